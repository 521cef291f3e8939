#ifndef KVCANARY_TEST_RANDOM_CASES_HPP
#define KVCANARY_TEST_RANDOM_CASES_HPP

// Random plan calls for the differential tests. Each case is a pure function of its seed, so a failing
// seed printed by SCOPED_TRACE reproduces it alone. Values are drawn to hit the edges of SPEC §4:
// padding with garbage, bad rows, negative lengths, lengths and windows at the int64/int32 limits,
// out-of-range and negative slots, LUT clamping,
// pools with offsets 0 and 1, and verify capacities exact, one short or loose.

#include "test_support.hpp"

#include <algorithm>
#include <limits>
#include <random>

namespace kvcanary_test {

struct RandomCase {
  Inputs inputs;
  Capacities capacities;
};

class CaseGenerator {
 public:
  explicit CaseGenerator(std::uint64_t seed) : rng_(seed) {}

  RandomCase next() { return next(batch_size_()); }

  // A case with `bs` rows (the batch size is otherwise drawn first, so both draw the same rows after it).
  RandomCase next(std::int64_t bs) {
    RandomCase c;
    Inputs& in = c.inputs;
    in.max_reqs = between(1, 12);
    in.max_seq_len = chance(0.1) ? between(65, 300) : between(1, 64);
    const std::int64_t slots = in.max_reqs * in.max_seq_len;

    if (chance(0.5)) in.swa_window_size = static_cast<int>(between(1, in.max_seq_len + 2));
    if (in.swa_window_size > 0 && chance(0.05)) in.swa_window_size = std::numeric_limits<int>::max();
    if (in.swa_window_size > 0 || chance(0.3)) {
      // Shorter than the slots in use (clamping) or longer; values include negatives.
      Int64s lut(static_cast<std::size_t>(between(1, 2 * slots)));
      for (auto& v : lut) v = between(-1000, 1000000);
      in.full_to_swa_index_mapping = std::move(lut);
    }
    // Mostly valid slots; some negative and some past the LUT's end.
    in.req_to_token.resize(static_cast<std::size_t>(slots));
    for (auto& v : in.req_to_token) v = static_cast<std::int32_t>(chance(0.9) ? between(0, slots) : between(-50, 3 * slots));

    const bool has_pool = chance(0.5);
    if (has_pool) {
      // Mostly covering every pool row in use; sometimes too few rows (bit 4).
      in.pool_rows = chance(0.85) ? in.max_reqs + between(0, 2) : between(0, in.max_reqs - 1);
      in.pool_cols = between(0, in.max_seq_len + 3);
      std::vector<std::int32_t> pool(static_cast<std::size_t>(in.pool_rows * in.pool_cols));
      for (auto& v : pool) v = static_cast<std::int32_t>(between(0, 1000000));
      in.req_to_verify_expected_tokens = std::move(pool);
      in.req_to_verify_expected_tokens_valid_lens = Int64s{};
      in.kv_token_id_vs_position_offset = static_cast<int>(between(0, 1));
    }

    for (std::int64_t r = 0; r < bs; ++r) {
      const bool padding = chance(0.25);
      const bool bad = !padding && chance(0.05);
      // With max_reqs == 1 no active row can be good (rp 0 is padding).
      std::int64_t rp = 0;
      if (!padding && (bad || in.max_reqs == 1)) rp = chance(0.5) ? between(-5, -1) : between(in.max_reqs, in.max_reqs + 5);
      else if (!padding) rp = between(1, in.max_reqs - 1);
      std::int64_t prefix = between(0, in.max_seq_len);
      if (chance(0.05)) prefix = between(-10, -1);
      if (chance(0.03)) prefix = between(in.max_seq_len + 1, in.max_seq_len + 10);
      if (chance(0.02)) prefix = extreme();
      std::int64_t extend = chance(0.1) ? between(-3, 0) : between(1, 20);
      // Past 2^31 - 1 a row is bad (bit 8); the values around the limit and the int64 ends.
      if (chance(0.02)) extend = kvcanary::kMaxExtendLen + between(-1, 1);
      if (chance(0.01)) extend = extreme();
      std::int64_t valid_len = between(-2, in.pool_cols + 1);
      if (padding) {  // never inspected, so anything goes
        prefix = garbage();
        extend = garbage();
        valid_len = garbage();
      }
      in.req_pool_indices.push_back(rp);
      in.prefix_lens.push_back(prefix);
      in.extend_seq_lens.push_back(extend);
      if (has_pool) in.req_to_verify_expected_tokens_valid_lens->push_back(valid_len);
    }

    const std::int64_t total = verify_total(in);
    const double pick = uniform();
    c.capacities.verify = pick < 0.35 ? total : pick < 0.55 ? std::max<std::int64_t>(total - 1, 0)
                                      : pick < 0.9 ? total + between(1, 50) : 0;
    c.capacities.write = chance(0.5) ? bs : bs + between(1, 5);
    return c;
  }

 private:
  std::int64_t batch_size_() {
    const double pick = uniform();
    if (pick < 0.85) return between(0, 16);
    if (pick < 0.97) return between(17, 300);
    return between(301, 5000);
  }

  // The reference's verify total, run with a capacity that surely fits (SPEC §4: a row verifies at most
  // max(prefix, 0) entries, and only prefixes up to max_seq_len are good).
  static std::int64_t verify_total(const Inputs& in) {
    std::int64_t bound = 0;
    for (std::size_t r = 0; r < in.prefix_lens.size(); ++r)
      if (in.req_pool_indices[r] != 0) bound += std::min(std::max<std::int64_t>(in.prefix_lens[r], 0), in.max_seq_len);
    Outputs probe = kvcanary::reference::make_outputs(bound, batch_size(in), 0);
    kvcanary::reference::plan(in, probe);
    return probe.verify_num_valid;
  }

  // The int64 ends, where a careless difference or sum overflows.
  std::int64_t extreme() {
    static const std::int64_t values[] = {std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::int64_t>::min() + 1,
                                          std::numeric_limits<std::int64_t>::max()};
    return values[between(0, 2)];
  }

  std::int64_t garbage() {
    static const std::int64_t values[] = {std::numeric_limits<std::int64_t>::max(),
                                          std::numeric_limits<std::int64_t>::min(), -1, 1 << 30};
    return chance(0.5) ? values[between(0, 3)] : between(-1000000, 1000000);
  }

  std::int64_t between(std::int64_t lo, std::int64_t hi) {  // inclusive
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  bool chance(double p) { return uniform() < p; }

  std::mt19937_64 rng_;
};

}  // namespace kvcanary_test

#endif
