// SPEC §6, one test per row: the listed values literally, plus equality with the reference and the
// written/untouched rules (plan_checked). Where the table leaves extend_seq_lens out, every row extends by 1.

#include "test_support.hpp"

namespace kvcanary_test {

class PlanFacts : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

TEST_P(PlanFacts, ExtendOnlyHasNoVerifyEntries) {
  Inputs in = linear(4, 16);
  set_batch(in, {3}, {0}, {5});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.verify_num_valid, 0);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 5, 0, 0, 0}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 1), (Int64s{-1}));
}

TEST_P(PlanFacts, DecodeVerifiesWholePrefixAndSeedsLastSlot) {
  Inputs in = linear(4, 16);
  set_batch(in, {2}, {7}, {1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.verify_num_valid, 7);
  EXPECT_EQ(out.enable, 1);
  EXPECT_EQ(head(out.verify_slot_indices, 7), range(32, 39));
  Int64s prev = range(31, 38);
  prev[0] = -1;
  EXPECT_EQ(head(out.verify_prev_slot_indices, 7), prev);
  EXPECT_EQ(head(out.verify_expected_positions, 7), range(0, 7));
  EXPECT_EQ(head(out.verify_expected_tokens, 7), Int64s(7, -1));  // no pool
  EXPECT_EQ(head(out.write_seed_slot_indices, 1), (Int64s{38}));
}

TEST_P(PlanFacts, MixedBatchOffsetsFollowExtendLengths) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2, 3}, {0, 4, 10}, {8, 1, 1});
  const Outputs out = plan_checked(in, {64, 8});
  EXPECT_EQ(head(out.write_offsets, 4), (Int64s{0, 8, 9, 10}));
  EXPECT_EQ(out.verify_num_valid, 14);
}

TEST_P(PlanFacts, PaddingRowContributesNothingWhateverItHolds) {
  Inputs in = linear(4, 16);  // prefix 99 > 16 would be a bad row if the padding row were inspected
  set_batch(in, {1, 0, 2}, {5, 99, 3}, {1, 99, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.verify_num_valid, 8);
  EXPECT_EQ(head(out.write_offsets, 4), (Int64s{0, 1, 1, 2}));
  EXPECT_EQ(out.write_seed_slot_indices[1], -1);
  EXPECT_EQ(out.input_error_bits, 0);
  EXPECT_EQ(out.first_bad_row, -1);
}

TEST_P(PlanFacts, SwaWindowKeepsRealPredecessor) {
  Inputs in = linear(4, 512);
  in.full_to_swa_index_mapping = shifted_lut(2049, 0);
  in.swa_window_size = 128;
  set_batch(in, {1}, {200}, {1});
  const Outputs out = plan_checked(in, {512, 4});
  EXPECT_EQ(out.verify_num_valid, 128);
  EXPECT_EQ(out.verify_expected_positions[0], 72);
  EXPECT_EQ(out.verify_prev_slot_indices[0], 583);  // rtt[1][71], not -1: the chain does not restart
}

TEST_P(PlanFacts, SwaLutTranslatesSlotsAndSeed) {
  Inputs in = linear(4, 16);
  in.full_to_swa_index_mapping = shifted_lut(65, 100);
  in.swa_window_size = 128;
  set_batch(in, {1}, {3}, {1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_slot_indices, 3), (Int64s{116, 117, 118}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 1), (Int64s{118}));
}

TEST_P(PlanFacts, SwaManyRowsClipEachToTheWindow) {
  Inputs in = linear(4, 2048);
  in.full_to_swa_index_mapping = shifted_lut(8193, 0);
  in.swa_window_size = 128;
  set_batch(in, {1, 2, 3, 1}, {50, 128, 200, 1024}, {1, 1, 1, 1});
  const Outputs out = plan_checked(in, {1024, 8});
  EXPECT_EQ(out.verify_num_valid, 434);
}

TEST_P(PlanFacts, CapacityExactlyTheTotalFits) {
  Inputs in = linear(4, 16);
  set_batch(in, {1}, {4}, {1});
  const Outputs out = plan_checked(in, {4, 4});
  EXPECT_EQ(out.verify_num_valid, 4);
  EXPECT_EQ(out.enable, 1);
}

TEST_P(PlanFacts, CapacityOneShortOverflowsAndLeavesArraysUntouched) {
  Inputs in = linear(4, 16);
  set_batch(in, {1}, {3}, {1});
  const Outputs out = plan_checked(in, {2, 4});
  EXPECT_EQ(out.verify_num_valid, 2);
  EXPECT_EQ(out.enable, 0);
  EXPECT_EQ(out.verify_slot_indices, Int64s(2, kPoison));
  EXPECT_EQ(out.verify_expected_tokens, Int64s(2, kPoison));
  EXPECT_EQ(out.verify_expected_positions, Int64s(2, kPoison));
  EXPECT_EQ(out.verify_prev_slot_indices, Int64s(2, kPoison));
}

TEST_P(PlanFacts, ZeroExtendWritesNoSeeds) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2}, {4, 6}, {0, 0});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.verify_num_valid, 10);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 0, 0, 0, 0}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 2), (Int64s{-1, -1}));
}

TEST_P(PlanFacts, AggregateBatchOffsetsAndSeeds) {
  Inputs in = linear(4, 32);
  set_batch(in, {1, 2, 3, 1}, {0, 3, 8, 15}, {4, 1, 1, 1});
  const Outputs out = plan_checked(in, {128, 8});
  EXPECT_EQ(out.verify_num_valid, 26);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 4, 5, 6, 7, 0, 0, 0, 0}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 4), (Int64s{-1, 66, 103, 46}));
}

TEST_P(PlanFacts, PoolSuppliesExpectedTokens) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {16, 16});
  set_batch(in, {1, 2}, {3, 5}, {1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_expected_tokens, 8), (Int64s{1000, 1001, 1002, 2000, 2001, 2002, 2003, 2004}));
}

TEST_P(PlanFacts, DraftPoolOffsetShiftsExpectedTokens) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {16, 16});
  in.kv_token_id_vs_position_offset = 1;
  set_batch(in, {1, 2}, {3, 5}, {1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_expected_tokens, 8), (Int64s{1001, 1002, 1003, 2001, 2002, 2003, 2004, 2005}));
}

TEST_P(PlanFacts, PoolValidLensCutExpectedTokens) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {2, 4});
  set_batch(in, {1, 2}, {3, 3}, {1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_expected_tokens, 6), (Int64s{1000, 1001, -1, 2000, 2001, 2002}));
}

TEST_P(PlanFacts, PoolWithSwaWindowReadsWindowPositions) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {4});
  in.full_to_swa_index_mapping = shifted_lut(65, 0);
  in.swa_window_size = 3;
  set_batch(in, {1}, {5}, {1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_expected_positions, 3), (Int64s{2, 3, 4}));
  EXPECT_EQ(head(out.verify_expected_tokens, 3), (Int64s{1002, 1003, -1}));
}

TEST_P(PlanFacts, LutClampsSlotsPastItsEnd) {
  Inputs in = linear(4, 16);
  in.full_to_swa_index_mapping = Int64s{7, 8, 9};
  in.swa_window_size = 2;
  set_batch(in, {1}, {3}, {1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_slot_indices, 2), (Int64s{9, 9}));
  EXPECT_EQ(head(out.verify_prev_slot_indices, 2), (Int64s{9, 9}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 1), (Int64s{9}));
}

TEST_P(PlanFacts, BadRowIsFlaggedAndContributesNothing) {
  Inputs in = linear(3, 8);
  set_batch(in, {1, 9, 2}, {2, 3, 2}, {1, 1, 1});
  const Outputs out = plan_checked(in, {16, 4});
  EXPECT_EQ(out.verify_num_valid, 4);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 1, 1, 2, 0}));
  EXPECT_EQ(out.input_error_bits, 1);
  EXPECT_EQ(out.first_bad_row, 1);
}

// The last row of the table needs one plan object across two calls, hence the device API.
TEST_P(PlanFacts, ShrinkingBatchZeroesOffsetsAndKeepsOldSeeds) {
  using Space = execution_space;
  const Space space;
  Inputs in = linear(9, 16);
  set_batch(in, range(1, 9), range(1, 9), Int64s(8, 1));
  Outputs expected = poisoned({64, 8});
  const DevicePlan<Space> device(space, expected, 8);

  device.plan(space, kvcanary::upload_inputs(space, in), options());
  const Outputs first = device.download(space);
  kvcanary::reference::plan(in, expected);
  EXPECT_TRUE(same_plan(first, expected));

  set_batch(in, {4, 5, 6}, {2, 2, 2}, {1, 1, 1});
  device.plan(space, kvcanary::upload_inputs(space, in), options());
  const Outputs second = device.download(space);
  kvcanary::reference::plan(in, expected);
  EXPECT_TRUE(same_plan(second, expected));

  EXPECT_EQ(Int64s(second.write_offsets.begin() + 4, second.write_offsets.end()), Int64s(5, 0));
  EXPECT_EQ(Int64s(second.write_seed_slot_indices.begin() + 3, second.write_seed_slot_indices.end()),
            Int64s(first.write_seed_slot_indices.begin() + 3, first.write_seed_slot_indices.end()));
  EXPECT_EQ(head(second.write_seed_slot_indices, 3), (Int64s{65, 81, 97}));
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(PlanFacts);

}  // namespace kvcanary_test
