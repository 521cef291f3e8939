// SPEC §4 "what is written, and what is left alone": every output starts poisoned, and the tests check
// literally which elements changed (plan_checked also applies follows_write_rules to every result).

#include "test_support.hpp"

namespace kvcanary_test {

class WriteRules : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

inline Int64s tail(const Int64s& values, std::size_t from) {
  return Int64s(values.begin() + static_cast<std::ptrdiff_t>(from), values.end());
}

TEST_P(WriteRules, VerifyArraysAreWrittenOnlyBelowTheTotal) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 0, 2}, {3, 7, 2}, {1, 1, 1});
  const Outputs out = plan_checked(in, {64, 4});
  ASSERT_EQ(out.verify_num_valid, 5);
  EXPECT_EQ(head(out.verify_slot_indices, 5), (Int64s{16, 17, 18, 32, 33}));
  EXPECT_EQ(tail(out.verify_slot_indices, 5), Int64s(59, kPoison));
  EXPECT_EQ(tail(out.verify_expected_tokens, 5), Int64s(59, kPoison));
  EXPECT_EQ(tail(out.verify_expected_positions, 5), Int64s(59, kPoison));
  EXPECT_EQ(tail(out.verify_prev_slot_indices, 5), Int64s(59, kPoison));
}

TEST_P(WriteRules, OverflowTouchesNoVerifyArrayButWritesEveryScalar) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2, 3}, {16, 16, 16}, {1, 2, 3});
  const Outputs out = plan_checked(in, {47, 4});  // total 48
  EXPECT_EQ(out.enable, 0);
  EXPECT_EQ(out.verify_num_valid, 47);
  for (const Int64s* array : {&out.verify_slot_indices, &out.verify_expected_tokens, &out.verify_expected_positions,
                              &out.verify_prev_slot_indices})
    EXPECT_EQ(*array, Int64s(47, kPoison));
  EXPECT_EQ(out.write_offsets, (Int64s{0, 1, 3, 6, 0}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 3), (Int64s{31, 47, 63}));
  EXPECT_EQ(out.write_num_valid_reqs, 3);
  EXPECT_EQ(out.input_error_bits, 0);
  EXPECT_EQ(out.first_bad_row, -1);
}

TEST_P(WriteRules, SeedsPastBatchSizeStayUntouchedAndOffsetsAreZeroed) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2}, {2, 2}, {3, 4});
  const Outputs out = plan_checked(in, {64, 9});
  EXPECT_EQ(head(out.write_seed_slot_indices, 2), (Int64s{17, 33}));
  EXPECT_EQ(tail(out.write_seed_slot_indices, 2), Int64s(7, kPoison));
  EXPECT_EQ(out.write_offsets, (Int64s{0, 3, 7, 0, 0, 0, 0, 0, 0, 0}));
}

TEST_P(WriteRules, EmptyBatchWritesScalarsAndWholeOffsetsOnly) {
  Inputs in = linear(4, 16);
  set_batch(in, {}, {}, {});
  const Outputs out = plan_checked(in, {8, 3});
  EXPECT_EQ(out.verify_num_valid, 0);
  EXPECT_EQ(out.enable, 1);
  EXPECT_EQ(out.write_num_valid_reqs, 0);
  EXPECT_EQ(out.input_error_bits, 0);
  EXPECT_EQ(out.first_bad_row, -1);
  EXPECT_EQ(out.write_offsets, Int64s(4, 0));
  EXPECT_EQ(out.write_seed_slot_indices, Int64s(3, kPoison));
  EXPECT_EQ(out.verify_slot_indices, Int64s(8, kPoison));
}

TEST_P(WriteRules, ZeroCapacityFitsAnEmptyPlan) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2}, {0, 0}, {1, 1});
  const Outputs out = plan_checked(in, {0, 2});
  EXPECT_EQ(out.enable, 1);
  EXPECT_EQ(out.verify_num_valid, 0);
}

TEST_P(WriteRules, ZeroCapacityOverflowsOnOneEntry) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2}, {0, 1}, {1, 1});
  const Outputs out = plan_checked(in, {0, 2});
  EXPECT_EQ(out.enable, 0);
  EXPECT_EQ(out.verify_num_valid, 0);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 1, 2}));
}

TEST_P(WriteRules, AllRowsBadStillWritesScalarsAndOffsets) {
  Inputs in = linear(2, 4);
  set_batch(in, {5, -1}, {1, 1}, {1, 1});
  const Outputs out = plan_checked(in, {4, 2});
  EXPECT_EQ(out.verify_num_valid, 0);
  EXPECT_EQ(out.enable, 1);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 0, 0}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{-1, -1}));
  EXPECT_EQ(out.input_error_bits, 1);
  EXPECT_EQ(out.first_bad_row, 0);
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(WriteRules);

}  // namespace kvcanary_test
