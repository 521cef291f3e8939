// Randomized differential tests of SPEC-CANARY §11 on this backend against the host reference: the free
// stage (padding, out-of-range and repeated slots, strided buffers, full rings), verify with the v2 checks
// over buffers holding FREED records and plans holding slot 0, and the cross-check over correct and
// corrupted CSR and dense metadata with page sizes and LUTs. Every case is compared record by record and
// row by row (CanaryRunner), so slots a call must leave alone are checked too.

#include "test_canary_support.hpp"

#include <random>

namespace kvcanary_test {

class CanaryV2Differential : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  std::mt19937_64 rng{20261204};

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }
  bool coin(int one_in) { return uniform(0, one_in - 1) == 0; }

  Buffer random_buffer(std::int64_t slots) {
    Buffer buffer(static_cast<std::size_t>(slots));
    for (Record& r : buffer) {
      if (coin(4)) continue;  // never written
      r = {uniform(0, 50), uniform(0, 20), uniform(INT64_MIN, INT64_MAX), coin(2) ? 0 : uniform(-5, 5)};
      if (coin(6)) r.token = kvcanary::kFreedToken;
    }
    return buffer;
  }
};

TEST_F(CanaryV2Differential, FreeMatchesTheReference) {
  for (int c = 0; c < 200; ++c) {
    CanaryRunner<ExecSpace> runner;
    runner.layout.stride_bytes = coin(2) ? 32 : 48;
    const std::int64_t slots = uniform(1, 64);
    Int64s freed(static_cast<std::size_t>(uniform(0, 40)));
    for (std::int64_t& s : freed)
      s = coin(8) ? uniform(-3, -1) : coin(10) ? uniform(slots, slots + 5) : uniform(0, slots - 1);
    Ring ring = empty_ring(uniform(0, 3));
    ring.count = 0;
    runner.free(freed, uniform(-2, 1000), random_buffer(slots), ring, static_cast<KernelKind>(uniform(0, 11)));
  }
}

TEST_F(CanaryV2Differential, VerifyWithTheChecksMatchesTheReference) {
  for (int c = 0; c < 300; ++c) {
    CanaryRunner<ExecSpace> runner;
    runner.checks = kvcanary::VerifyChecks{coin(2) || c % 3 == 0, coin(2) || c % 3 == 0};
    const std::int64_t slots = uniform(2, 48);
    Buffer buffer = random_buffer(slots);
    // Some FREED records stamped by the free stage itself, keeping real positions and chains.
    Int64s freed;
    for (int k = 0; k < 4; ++k) freed.push_back(uniform(0, slots - 1));
    buffer = runner.free(freed, uniform(0, 9), buffer, empty_ring(4)).buffer;
    const std::int64_t entries = uniform(0, 40);
    Outputs plan = kvcanary::reference::make_outputs(entries, 0, 0);
    for (std::int64_t i = 0; i < entries; ++i) {
      const auto e = static_cast<std::size_t>(i);
      plan.verify_slot_indices[e] = coin(5) ? 0 : coin(20) ? uniform(slots, slots + 3) : uniform(1, slots - 1);
      plan.verify_prev_slot_indices[e] = coin(5) ? -1 : coin(6) ? 0 : uniform(0, slots - 1);
      plan.verify_expected_positions[e] = uniform(0, 20);
      plan.verify_expected_tokens[e] = coin(3) ? -1 : uniform(0, 50);
    }
    plan.verify_num_valid = static_cast<std::int32_t>(uniform(-1, entries + 1));
    plan.enable = coin(10) ? 0 : 1;
    runner.verify(plan, buffer, empty_ring(uniform(0, 8)), coin(2));
  }
}

TEST_F(CanaryV2Differential, CrossCheckMatchesTheReference) {
  for (int c = 0; c < 300; ++c) {
    CanaryRunner<ExecSpace> runner;
    const std::int64_t page_size = coin(2) ? 1 : uniform(2, 8);
    const std::int64_t rows = uniform(2, 6), cols = uniform(1, 24);
    Inputs in = linear(rows, cols);
    for (std::int32_t& v : in.req_to_token) v = static_cast<std::int32_t>(coin(30) ? uniform(-2, 0) : uniform(1, 400));
    if (coin(3)) in.full_to_swa_index_mapping = shifted_lut(uniform(1, 500), uniform(0, 3));
    const std::int64_t bs = uniform(0, 5);
    Int64s rpi, prefix, extend;
    for (std::int64_t r = 0; r < bs; ++r) {
      rpi.push_back(coin(5) ? 0 : coin(10) ? uniform(rows, rows + 2) : uniform(1, rows - 1));
      prefix.push_back(coin(10) ? uniform(-2, cols + 3) : uniform(0, cols));
      extend.push_back(coin(8) ? uniform(-3, 0) : uniform(0, 4));
    }
    set_batch(in, rpi, prefix, extend);
    // The metadata a correct backend builds, then broken now and then.
    kvcanary::reference::BackendMetadata m;
    m.form = coin(2) ? kvcanary::MetadataForm::Csr : kvcanary::MetadataForm::Dense;
    m.page_size = page_size;
    m.max_blocks = uniform(0, cols / page_size + 2);
    m.kv_indptr.push_back(0);
    for (std::int64_t r = 0; r < bs; ++r) {
      const std::int64_t rp = rpi[static_cast<std::size_t>(r)], p = prefix[static_cast<std::size_t>(r)];
      const bool good = rp > 0 && rp < rows && p >= 0 && p <= cols;
      const std::int64_t length = good ? std::min(cols, p + std::max<std::int64_t>(0, extend[static_cast<std::size_t>(r)])) : uniform(0, 3);
      Int64s entries;
      for (std::int64_t j = 0; j * page_size < length; ++j) {
        std::int64_t slot = good ? in.req_to_token[static_cast<std::size_t>(rp * cols + j * page_size)] : uniform(0, 9);
        if (good && in.full_to_swa_index_mapping) {
          const auto& lut = *in.full_to_swa_index_mapping;
          if (slot >= 0) slot = lut[static_cast<std::size_t>(std::min<std::int64_t>(slot, static_cast<std::int64_t>(lut.size()) - 1))];
        }
        const std::int64_t q = slot / page_size;
        entries.push_back(coin(12) ? uniform(-1, 60) : (slot % page_size != 0 && slot < 0) ? q - 1 : q);
      }
      if (coin(10) && !entries.empty()) entries.pop_back();
      for (std::int64_t e : entries) m.kv_indices.push_back(e);
      m.kv_indptr.push_back(static_cast<std::int64_t>(m.kv_indices.size()));
      m.seq_lens.push_back(coin(10) ? uniform(-1, length + 3) : length);
      for (std::int64_t j = 0; j < m.max_blocks; ++j)
        m.block_table.push_back(j < static_cast<std::int64_t>(entries.size()) ? entries[static_cast<std::size_t>(j)] : uniform(-1, 9));
    }
    if (coin(10) && bs > 0) m.kv_indptr[static_cast<std::size_t>(uniform(0, bs))] += uniform(-3, 3);
    runner.cross_check(in, m, empty_ring(uniform(0, 8)), static_cast<KernelKind>(uniform(0, 11)));
  }
}

}  // namespace kvcanary_test
