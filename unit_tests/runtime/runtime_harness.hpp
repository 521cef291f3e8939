#ifndef KVCANARY_TEST_RUNTIME_SUPPORT_HPP
#define KVCANARY_TEST_RUNTIME_SUPPORT_HPP

// A small engine for the runtime's tests: requests that prefill and decode through a linear page table,
// finish and are replaced (their slots reused), and a "model" that writes each token's KV bytes. It drives
// kvcanary::Canary on the device and the same step on the host reference (per group: plan, verify K and
// V, write K and V; the tail with real-KV fingerprints; sweeps), so that tests compare the two.

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/kvcanary.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kvcanary_runtime_test {

using kvcanary::GroupKind;
using kvcanary::KernelKind;
using kvcanary::reference::RingRow;

struct EngineShape {
  std::int64_t rows = 9, cols = 48, max_batch = 6, max_extend = 5;
  bool swa = false, draft = false, real_kv = false;
  int swa_window = 12;
  std::int64_t slots() const { return 1 + rows * cols; }
  std::int64_t token_capacity() const { return max_batch * (max_extend + 1); }
};

inline std::uint8_t kv_byte(std::int64_t token, std::int64_t position, std::int64_t b, int tensor) {
  return static_cast<std::uint8_t>((token * 131 + position * 17 + b * 3 + tensor * 101) & 0xFF);
}

// Writes the step's KV bytes on the device (the reference writes the same on the host).
template <class MemorySpace>
struct ModelWrite {
  Kokkos::View<const std::int64_t*, MemorySpace> input_ids, positions, out_cache_loc;
  Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, MemorySpace> k, v;
  KOKKOS_FUNCTION void operator()(std::int64_t i) const {
    const std::int64_t slot = out_cache_loc(i);
    if (slot < 0 || slot >= static_cast<std::int64_t>(k.extent(0))) return;
    for (std::int64_t b = 0; b < 16; ++b) {
      k(slot, b) = static_cast<std::uint8_t>((input_ids(i) * 131 + positions(i) * 17 + b * 3) & 0xFF);
      v(slot, b) = static_cast<std::uint8_t>((input_ids(i) * 131 + positions(i) * 17 + b * 3 + 101) & 0xFF);
    }
  }
};

template <class Space>
class RuntimeHarness {
 public:
  using Memory = typename Space::memory_space;
  using Vector = Kokkos::View<std::int64_t*, Memory>;
  using Table = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Memory>;
  using Bytes = Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, Memory>;

  EngineShape shape;
  kvcanary::CanaryConfig config;
  Space space;
  std::mt19937_64 rng;

  // host engine state
  std::vector<std::int64_t> rpi, prefix, extend, request_of_row;
  std::vector<std::int32_t> req_to_token, pool;
  std::vector<std::int64_t> lut;
  std::int64_t next_request = 1;

  // device copies (fixed addresses)
  Table d_req_to_token, d_pool;
  Vector d_lut, d_rpi, d_prefix, d_extend, d_valid, d_cached_rows, d_cached_lens;
  std::array<Vector, 3> d_ids, d_pos, d_loc;
  Bytes d_k, d_v;
  std::unique_ptr<kvcanary::Canary<Space>> canary;

  // host reference, per group
  struct RefGroup {
    bool on = false, tail = false;
    kvcanary::reference::Inputs inputs;
    kvcanary::reference::Outputs plan;
    kvcanary::reference::CanaryBuffer k, v;
    kvcanary::reference::ViolationRing ring;
    kvcanary::reference::StepTokens tokens;
  };
  std::array<RefGroup, 3> ref;
  kvcanary::reference::RealKv real_k, real_v;
  std::array<std::vector<RingRow>, 3> reported;  // rows the runtime reported, per group
  std::vector<kvcanary::RuntimeReport> reports;

  RuntimeHarness(EngineShape s, kvcanary::CanaryConfig c, std::uint64_t seed = 1, const Space& instance = Space())
      : shape(s), config(std::move(c)), space(instance), rng(seed) {
    const std::int64_t slots = shape.slots();
    rpi.assign(shape.max_batch, 0);
    prefix.assign(shape.max_batch, 0);
    extend.assign(shape.max_batch, 0);
    request_of_row.assign(shape.rows, 0);
    req_to_token.resize(shape.rows * shape.cols);
    for (std::int64_t i = 0; i < shape.rows * shape.cols; ++i) req_to_token[i] = static_cast<std::int32_t>(1 + i);
    pool.assign(shape.rows * shape.cols, 0);
    lut.resize(slots);
    for (std::int64_t i = 0; i < slots; ++i) lut[i] = i;  // identity: the SWA pool mirrors the full one

    config.dimensions.pool_slots = slots;
    config.dimensions.max_running_requests = shape.rows;
    config.dimensions.max_context_len = shape.cols;
    config.dimensions.cuda_graph_max_bs = shape.max_batch;
    config.swa_group = shape.swa;
    config.swa_window = shape.swa ? shape.swa_window : 0;
    config.draft_group = shape.draft;

    d_req_to_token = Table("test::req_to_token", shape.rows, shape.cols);
    d_pool = Table("test::pool", shape.rows, shape.cols);
    d_lut = Vector("test::lut", slots);
    d_rpi = Vector("test::rpi", shape.max_batch);
    d_prefix = Vector("test::prefix", shape.max_batch);
    d_extend = Vector("test::extend", shape.max_batch);
    d_valid = Vector("test::valid", shape.max_batch);
    d_cached_rows = Vector("test::cached_rows", shape.rows);
    d_cached_lens = Vector("test::cached_lens", shape.rows);
    for (int g = 0; g < 3; ++g) {
      d_ids[g] = Vector("test::ids", shape.token_capacity());
      d_pos[g] = Vector("test::pos", shape.token_capacity());
      d_loc[g] = Vector("test::loc", shape.token_capacity());
    }
    d_k = Bytes("test::kv_k", slots, 16);
    d_v = Bytes("test::kv_v", slots, 16);
    upload_table(d_req_to_token, req_to_token);
    upload_vector(d_lut, lut);

    kvcanary::EngineTables<Memory> tables;
    tables.req_to_token = d_req_to_token;
    if (config.verify_token_assert) tables.expected_tokens = kvcanary::EngineTable<Memory>(d_pool);
    if (shape.swa) tables.full_to_swa_index_mapping = kvcanary::EngineVector<Memory>(d_lut);
    if (shape.real_kv) {
      tables.target.real_kv_k = {kvcanary::RealKvSource<Memory>{d_k, 1, 16, 16}};
      tables.target.real_kv_v = {kvcanary::RealKvSource<Memory>{d_v, 1, 16, 16}};
    }
    canary = std::make_unique<kvcanary::Canary<Space>>(space, config, tables);

    for (auto* real : {&real_k, &real_v}) {
      real->mode = shape.real_kv ? config.real_kv_mode : kvcanary::RealKvMode::None;
      kvcanary::reference::RealKvSource source;
      source.bytes.assign(static_cast<std::size_t>(slots * 16), 0);
      source.pages = slots;
      source.row_bytes = 16;
      real->sources = {source};
      if (!shape.real_kv) real->sources.clear();
    }
    const auto caps = canary->capacities();
    for (int g = 0; g < 3; ++g) {
      RefGroup& r = ref[g];
      r.on = g == 0 || (g == 1 && shape.swa) || (g == 2 && shape.draft);
      if (!r.on) continue;
      r.tail = g == 0 && shape.real_kv && config.tail_pass;
      r.inputs.max_reqs = r.inputs.pool_rows = shape.rows;
      r.inputs.max_seq_len = r.inputs.pool_cols = shape.cols;
      if (g == 1) {
        r.inputs.swa_window_size = shape.swa_window;
        r.inputs.full_to_swa_index_mapping = lut;
      }
      if (g == 2) r.inputs.kv_token_id_vs_position_offset = 1;
      r.plan = kvcanary::reference::make_outputs(caps.verify_capacity, caps.write_req_capacity, 0);
      r.k.assign(static_cast<std::size_t>(slots), kvcanary::reference::Record{});
      r.v = r.k;
      r.ring.capacity = config.ring_capacity;
    }
  }

  template <class T>
  void upload_vector(const Kokkos::View<T*, Memory>& view, const std::vector<T>& values) {
    kvcanary::Impl::copy_into(space, Kokkos::subview(view, std::make_pair(std::size_t(0), values.size())), values);
  }
  void upload_table(const Table& view, const std::vector<std::int32_t>& values) {
    Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
        values.data(), view.extent(0), view.extent(1));
    Kokkos::deep_copy(space, view, host);
    space.fence();
  }

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }

  // The next batch: finished requests free their row; free batch rows take a new request (or pad).
  void next_batch() {
    for (std::int64_t r = 0; r < shape.max_batch; ++r) {
      std::int64_t& row = rpi[r];
      if (row != 0) prefix[r] += extend[r];
      if (row != 0 && prefix[r] + 2 > shape.cols) {
        request_of_row[row] = 0;
        row = 0;
      }
      if (row == 0 && uniform(0, 2) != 0)
        for (std::int64_t candidate = 1; candidate < shape.rows; ++candidate)
          if (request_of_row[candidate] == 0) {
            request_of_row[candidate] = next_request++;
            row = candidate;
            prefix[r] = 0;
            for (std::int64_t p = 0; p < shape.cols; ++p)
              pool[row * shape.cols + p] = static_cast<std::int32_t>(uniform(1, 30000));
            break;
          }
      if (row == 0) {
        prefix[r] = extend[r] = 0;
        continue;
      }
      extend[r] = std::min(shape.cols - 1 - prefix[r], prefix[r] == 0 ? uniform(1, shape.max_extend) : std::int64_t(1));
    }
  }

  // One group's flat tokens: the draft group's input ids are the tokens one position later.
  kvcanary::reference::StepTokens tokens_of(int g) const {
    kvcanary::reference::StepTokens t;
    for (std::int64_t r = 0; r < shape.max_batch; ++r) {
      const std::int64_t row = rpi[r];
      if (row == 0) continue;
      for (std::int64_t j = 0; j < extend[r]; ++j) {
        const std::int64_t p = prefix[r] + j;
        const std::int64_t token_position = g == 2 ? p + 1 : p;
        t.input_ids.push_back(pool[row * shape.cols + token_position]);
        t.positions.push_back(p);
        const std::int64_t slot = req_to_token[row * shape.cols + p];
        t.out_cache_loc.push_back(g == 1 ? lut[slot] : slot);
      }
    }
    t.input_ids.resize(shape.token_capacity(), 0);
    t.positions.resize(shape.token_capacity(), 0);
    t.out_cache_loc.resize(shape.token_capacity(), -1);
    t.chain_position_assert = config.chain_position_assert ? 1 : 0;
    return t;
  }

  kvcanary::ForwardBatch<Memory> batch() const {
    kvcanary::ForwardBatch<Memory> b;
    b.req_pool_indices = d_rpi;
    b.prefix_lens = d_prefix;
    b.extend_seq_lens = d_extend;
    if (config.verify_token_assert) b.expected_tokens_valid_lens = kvcanary::EngineVector<Memory>(d_valid);
    const auto tokens = [&](int g) {
      return kvcanary::ForwardTokens<Memory>{d_ids[g], d_pos[g], d_loc[g], std::nullopt, std::nullopt};
    };
    b.tokens = tokens(0);
    if (shape.swa) b.swa_tokens = tokens(1);
    if (shape.draft) b.draft_tokens = tokens(2);
    return b;
  }

  // Uploads the step (page table and pool rows too: new requests rewrote them).
  void upload_step() {
    upload_table(d_pool, pool);
    upload_vector(d_rpi, rpi);
    upload_vector(d_prefix, prefix);
    upload_vector(d_extend, extend);
    upload_vector(d_valid, std::vector<std::int64_t>(shape.max_batch, shape.cols));
    for (int g = 0; g < 3; ++g) {
      if (!ref[g].on) continue;
      ref[g].tokens = tokens_of(g);
      upload_vector(d_ids[g], ref[g].tokens.input_ids);
      upload_vector(d_pos[g], ref[g].tokens.positions);
      upload_vector(d_loc[g], ref[g].tokens.out_cache_loc);
      RefGroup& r = ref[g];
      r.inputs.req_to_token = req_to_token;
      r.inputs.req_pool_indices = rpi;
      r.inputs.prefix_lens = prefix;
      r.inputs.extend_seq_lens = extend;
      if (config.verify_token_assert) {
        r.inputs.req_to_verify_expected_tokens = pool;
        r.inputs.req_to_verify_expected_tokens_valid_lens = std::vector<std::int64_t>(shape.max_batch, shape.cols);
      } else {
        r.inputs.req_to_verify_expected_tokens.reset();
        r.inputs.req_to_verify_expected_tokens_valid_lens.reset();
      }
    }
    space.fence();
  }

  static std::array<KernelKind, 2> tags(int g, int pass) {  // pass 0 head, 1 tail, 2 sweep
    const int base = (g == 1 ? 6 : 0) + 2 * pass;
    return {static_cast<KernelKind>(base), static_cast<KernelKind>(base + 1)};
  }
  const kvcanary::reference::RealKv& ref_real(int g, int tensor) const {
    static const kvcanary::reference::RealKv none{};
    return g == 0 && shape.real_kv ? (tensor == 0 ? real_k : real_v) : none;
  }

  void reference_head() {
    for (int g = 0; g < 3; ++g) {
      RefGroup& r = ref[g];
      if (!r.on) continue;
      kvcanary::reference::plan(r.inputs, r.plan);
      const auto t = tags(g, 0);
      kvcanary::reference::verify(r.plan, r.k, t[0], ref_real(g, 0), config.verify_token_assert, r.ring);
      kvcanary::reference::verify(r.plan, r.v, t[1], ref_real(g, 1), config.verify_token_assert, r.ring);
      kvcanary::reference::write(r.plan, r.tokens, t[0], ref_real(g, 0), r.k, r.ring);
      kvcanary::reference::write(r.plan, r.tokens, t[1], ref_real(g, 1), r.v, r.ring);
    }
  }

  void model_write() {
    const auto& t = ref[0].tokens;
    for (std::size_t i = 0; i < t.out_cache_loc.size(); ++i) {
      const std::int64_t slot = t.out_cache_loc[i];
      if (slot < 0 || !shape.real_kv) continue;
      for (int b = 0; b < 16; ++b) {
        real_k.sources[0].bytes[slot * 16 + b] = kv_byte(t.input_ids[i], t.positions[i], b, 0);
        real_v.sources[0].bytes[slot * 16 + b] = kv_byte(t.input_ids[i], t.positions[i], b, 1);
      }
    }
    if (!shape.real_kv) return;
    Kokkos::parallel_for("test::model_write",
                         Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(space, 0, shape.token_capacity()),
                         ModelWrite<Memory>{d_ids[0], d_pos[0], d_loc[0], d_k, d_v});
  }

  void reference_tail() {
    RefGroup& r = ref[0];
    if (!r.tail) return;
    const auto t = tags(0, 1);
    kvcanary::reference::verify(r.plan, r.k, t[0], real_k, config.verify_token_assert, r.ring);
    kvcanary::reference::verify(r.plan, r.v, t[1], real_v, config.verify_token_assert, r.ring);
    kvcanary::reference::write(r.plan, r.tokens, t[0], real_k, r.k, r.ring);
    kvcanary::reference::write(r.plan, r.tokens, t[1], real_v, r.v, r.ring);
  }

  // The live requests' prefixes, as a prefix cache would hold them.
  void sweep() {
    std::vector<std::int64_t> rows, lens;
    for (std::int64_t r = 0; r < shape.max_batch; ++r)
      if (rpi[r] != 0) {
        rows.push_back(rpi[r]);
        lens.push_back(prefix[r] + extend[r]);
      }
    upload_vector(d_cached_rows, rows);
    upload_vector(d_cached_lens, lens);
    space.fence();
    const auto n = rows.size();
    kvcanary::CachedPrefixes<Memory> cached;
    cached.pool_rows = Kokkos::subview(d_cached_rows, std::make_pair(std::size_t(0), n));
    cached.lengths = Kokkos::subview(d_cached_lens, std::make_pair(std::size_t(0), n));
    canary->sweep(cached);
    for (int g = 0; g < 2; ++g) {
      RefGroup& r = ref[g];
      if (!r.on) continue;
      kvcanary::reference::Inputs in = r.inputs;
      in.req_pool_indices = rows;
      in.prefix_lens = lens;
      in.extend_seq_lens.assign(n, 0);
      if (config.verify_token_assert) in.req_to_verify_expected_tokens_valid_lens = lens;
      auto plan = kvcanary::reference::make_outputs(canary->capacities().verify_capacity,
                                                    canary->capacities().sweep_req_capacity, 0);
      kvcanary::reference::plan(in, plan);
      const auto t = tags(g, 2);
      kvcanary::reference::verify(plan, r.k, t[0], ref_real(g, 0), config.verify_token_assert, r.ring);
      kvcanary::reference::verify(plan, r.v, t[1], ref_real(g, 1), config.verify_token_assert, r.ring);
    }
  }

  // Corrupts one live record's token on the device and in the reference alike.
  void corrupt_one() {
    std::vector<std::int64_t> live;
    for (std::int64_t r = 0; r < shape.max_batch; ++r)
      if (rpi[r] != 0 && prefix[r] > 0) live.push_back(req_to_token[rpi[r] * shape.cols + uniform(0, prefix[r] - 1)]);
    if (live.empty()) return;
    const std::int64_t slot = live[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(live.size()) - 1))];
    ref[0].k[slot].token += 7;
    auto records = canary->k_buffer(GroupKind::Target).records;
    Kokkos::parallel_for("test::corrupt", Kokkos::RangePolicy<Space>(space, 0, 1),
                         KOKKOS_LAMBDA(int) { records(slot, kvcanary::kToken) += 7; });
  }

  void record(const kvcanary::RuntimeReport& report) {
    for (std::size_t i = 0; i < report.violations.rows.size(); ++i)
      reported[static_cast<int>(report.row_groups[i])].push_back(report.violations.rows[i]);
    reports.push_back(report);
  }

  // One whole step on both sides; `skip_canary` runs the step without the canary's passes (a replay
  // that lost its nodes) while end_step() is still told one forward ran.
  // `head` and `tail` run the canary's passes (a test may replay them from a graph instead).
  template <class Head, class Tail>
  void step_with(bool sweep_now, bool corrupt, const Head& head, const Tail& tail) {
    next_batch();
    upload_step();
    if (corrupt) corrupt_one();
    head();
    reference_head();
    model_write();
    tail();
    reference_tail();
    if (sweep_now) sweep();
    engine_waits_for_tokens();
    record(canary->end_step());
  }

  void step(bool sweep_now = false, bool corrupt = false, bool skip_canary = false) {
    next_batch();
    upload_step();
    if (corrupt) corrupt_one();
    if (!skip_canary) canary->before_forward(batch());
    reference_head();
    model_write();
    if (!skip_canary) canary->after_forward(batch());
    reference_tail();
    if (sweep_now) sweep();
    engine_waits_for_tokens();
    record(canary->end_step());
  }

  // An engine waits for its sampled tokens before its host ends the step, so the forward's work (and the
  // mailbox routes' snapshot, written at its end or joined by after_forward()) has run by then; the host
  // backends always have.
  void engine_waits_for_tokens() {
    const kvcanary::PumpSnapshot route = canary->pump_snapshot();  // Default resolved
    if (route == kvcanary::PumpSnapshot::InGraph || route == kvcanary::PumpSnapshot::BesideForward ||
        route == kvcanary::PumpSnapshot::WithNextPlan)
      space.fence();
  }

  static std::vector<RingRow> sorted(std::vector<RingRow> rows) {
    std::sort(rows.begin(), rows.end());
    return rows;
  }
};

}  // namespace kvcanary_runtime_test

#endif
