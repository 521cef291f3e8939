// SPEC §4 "No limit on bs": the reference system capped a launch at 4096 requests; a batch of
// 100,000 rows must plan exactly like the reference, rows past 4096 included.

#include "test_support.hpp"

#include <random>

namespace kvcanary_test {

class LargeBatch : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

TEST_P(LargeBatch, HundredThousandRowsMatchReference) {
  constexpr std::int64_t kRows = 100000;
  Inputs in = linear(1000, 8);
  set_pool(in, 1000, 8, {});
  std::mt19937_64 rng(100000);
  const auto between = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (std::int64_t r = 0; r < kRows; ++r) {
    in.req_pool_indices.push_back(between(0, 999));
    in.prefix_lens.push_back(between(0, 8));
    in.extend_seq_lens.push_back(between(0, 3));
    in.req_to_verify_expected_tokens_valid_lens->push_back(between(0, 8));
  }
  // Same pool row as the first row, so a capped implementation would leave its seed at -1 or poison.
  in.req_pool_indices.back() = 7;
  in.prefix_lens.back() = 8;
  in.extend_seq_lens.back() = 1;

  const Outputs out = plan_checked(in, {kRows * 8, kRows + 3});
  EXPECT_EQ(out.write_num_valid_reqs, kRows);
  EXPECT_EQ(out.enable, 1);
  EXPECT_GT(out.verify_num_valid, kRows * 3);
  EXPECT_EQ(out.write_seed_slot_indices[kRows - 1], 7 * 8 + 7);
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(LargeBatch);

}  // namespace kvcanary_test
