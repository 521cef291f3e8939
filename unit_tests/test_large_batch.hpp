// SPEC §4 "No limit on bs": the reference system capped a launch at 4096 requests; a batch of
// 100,000 rows must plan exactly like the reference, rows past 4096 included.

#include "test_random_cases.hpp"

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

// Mostly padding, with a long row every 997 rows and a bad row in an early and a late part of the
// batch: tiles of the verify array span many rows (more than a GPU block stages), and the status
// must combine rows that different blocks of a GPU kernel see.
TEST_P(LargeBatch, SparseLongRowsAndLateBadRowsMatchReference) {
  constexpr std::int64_t kRows = 60000;
  Inputs in = linear(64, 1500);
  for (std::int64_t r = 0; r < kRows; ++r) {
    const bool long_row = r % 997 == 5;
    in.req_pool_indices.push_back(long_row ? 1 + r % 63 : 0);
    in.prefix_lens.push_back(long_row ? 1000 + r % 500 : 123456);  // padding rows are never inspected
    in.extend_seq_lens.push_back(long_row ? 2 : -7);
  }
  in.req_pool_indices[41000] = 64;  // bad pool index (bit 1), in a late block
  in.req_pool_indices[23000] = 3;   // prefix past max_seq_len (bit 2): the first bad row
  in.prefix_lens[23000] = 1501;
  in.req_pool_indices[kRows - 1] = 9;  // the last row has a seed
  in.prefix_lens[kRows - 1] = 1500;
  in.extend_seq_lens[kRows - 1] = 1;

  const Outputs out = plan_checked(in, {63 * 1500, kRows});
  EXPECT_EQ(out.input_error_bits, 1 | 2);
  EXPECT_EQ(out.first_bad_row, 23000);
  EXPECT_EQ(out.enable, 1);
  EXPECT_EQ(out.write_seed_slot_indices[kRows - 1], 9 * 1500 + 1499);
}

// Batch sizes at the edges of the CUDA persistent path's kernel shapes: the small kernel (up to 32
// rows, one a lane), the fused kernel (up to 256 rows, one a thread), the rows
// kernel's blocks of 256 rows, and its blocks of several 256-row chunks past 64 blocks (16384 rows).
// Random rows as in the differential tests, two seeds each.
TEST_P(LargeBatch, KernelShapeEdgesMatchReference) {
  for (const std::int64_t bs : {1, 31, 32, 33, 255, 256, 257, 511, 512, 513, 16383, 16384, 16385, 16641}) {
    for (const std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE("bs " + std::to_string(bs) + ", seed " + std::to_string(seed));
      const RandomCase c = CaseGenerator(seed * 1000003u + static_cast<std::uint64_t>(bs)).next(bs);
      plan_checked(c.inputs, c.capacities);
    }
  }
}

// A few long rows (the small kernel's 4-entry tiles: the capacity exceeds one tile per SM), and the
// same short rows under a small and a large capacity (the CUDA small kernel picks its tile width from
// the capacity, the only bound the host knows on the total), with a pool and rows that end mid-tile.
TEST_P(LargeBatch, FewRowsUnderSmallAndLargeCapacitiesMatchReference) {
  Inputs in = linear(6, 50000);
  set_pool(in, 6, 50000, {50000, 1234, 49999, 7});
  in.req_pool_indices = {5, 2, 0, 3};
  in.prefix_lens = {50000, 40001, 99, 33333};
  in.extend_seq_lens = {1, 2, 3, 1};
  const Outputs out = plan_checked(in, {50000 + 40001 + 33333, 4});
  EXPECT_EQ(out.enable, 1);

  in.prefix_lens = {1000, 1, 99, 1025};
  for (const std::int64_t capacity : {std::int64_t{2026}, std::int64_t{1} << 22}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    EXPECT_EQ(plan_checked(in, {capacity, 4}).verify_num_valid, 2026);
  }
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(LargeBatch);

}  // namespace kvcanary_test
