// SPEC §4 bad rows and garbage data: flagged in the status, contributing nothing, never read out of
// bounds. plan_host_data() uploads every input at its exact size, so a stray read past req_to_token,
// the pool or the LUT is caught by the sanitizer build.

#include "test_support.hpp"

#include <limits>

namespace kvcanary_test {

class BadRows : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

TEST_P(BadRows, PoolIndexOutsideReqToTokenIsBit1) {
  Inputs in = linear(3, 8);
  // rp == max_reqs is the first index out of range; bad rows' huge extends must not reach the offsets.
  set_batch(in, {1, -1, 3, kMax, kMin, 2}, {2, 2, 2, 2, 2, 2}, {1, kMax, 1, 1, 1, 1});
  const Outputs out = plan_checked(in, {16, 6});
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPoolIndex | kvcanary::kBadExtendLen);  // row 1: both
  EXPECT_EQ(out.first_bad_row, 1);
  EXPECT_EQ(out.verify_num_valid, 4);
  EXPECT_EQ(head(out.verify_slot_indices, 4), (Int64s{8, 9, 16, 17}));
  EXPECT_EQ(out.write_offsets, (Int64s{0, 1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{9, -1, -1, -1, -1, 17}));
}

TEST_P(BadRows, PrefixPastTheRowIsBit2) {
  Inputs in = linear(3, 8);
  // prefix == max_seq_len is the whole row and fine; one more is bad.
  set_batch(in, {1, 2, 1}, {8, 9, kMax}, {1, 1, 1});
  const Outputs out = plan_checked(in, {16, 3});
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPrefixLen);
  EXPECT_EQ(out.first_bad_row, 1);
  EXPECT_EQ(out.verify_num_valid, 8);
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{15, -1, -1}));
}

TEST_P(BadRows, PoolRowOutsideThePoolIsBit4) {
  Inputs in = linear(4, 16);
  set_pool(in, 2, 16, {16, 16, 16});  // pool rows 0 and 1 only
  set_batch(in, {1, 2, 3}, {2, 2, 2}, {1, 1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPoolRow);
  EXPECT_EQ(out.first_bad_row, 1);
  EXPECT_EQ(out.verify_num_valid, 2);
  EXPECT_EQ(head(out.verify_expected_tokens, 2), (Int64s{1000, 1001}));
}

TEST_P(BadRows, ValidLenPastThePoolIsBit4) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {16, 17, kMax});  // valid_len == pool_cols is fine
  set_batch(in, {1, 2, 3}, {2, 2, 2}, {1, 1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPoolRow);
  EXPECT_EQ(out.first_bad_row, 1);
  EXPECT_EQ(out.verify_num_valid, 2);
}

TEST_P(BadRows, ExtendPastInt32IsBit8) {
  Inputs in = linear(3, 8);
  // 2^31 - 1 is the longest good extend; two rows of INT64_MAX used to wrap write_offsets unflagged.
  const std::int64_t longest = kvcanary::kMaxExtendLen;
  set_batch(in, {1, 2, 1, 2}, {2, 3, 1, 0}, {longest, longest + 1, kMax, 4});
  const Outputs out = plan_checked(in, {16, 4});
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadExtendLen);
  EXPECT_EQ(out.first_bad_row, 1);
  EXPECT_EQ(out.verify_num_valid, 2);  // bad rows verify nothing either
  EXPECT_EQ(out.write_offsets, (Int64s{0, longest, longest, longest, longest + 4}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{9, -1, -1, -1}));
}

// Issue 10: prefix - window overflowed in the reference at INT64_MIN, and with the verify arrays made
// larger by a bad row it then read req_to_token out of bounds. Every difference of SPEC §4 at the ends.
TEST_P(BadRows, LengthsAtTheInt64EndsDoNotOverflow) {
  Inputs in = linear(3, 4);
  in.swa_window_size = 1;
  in.full_to_swa_index_mapping = range(0, 12);
  set_batch(in, {1, 99, 2}, {kMin, 4, 2}, {1, 1, 1});
  const Outputs out = plan_checked(in, {16, 3});
  EXPECT_EQ(out.verify_num_valid, 1);
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPoolIndex);

  in.swa_window_size = std::numeric_limits<int>::max();
  set_batch(in, {1, 2, 1, 2}, {kMin, kMin + 1, 4, -1}, {kMax, kMin, 1, 1});
  const Outputs wide = plan_checked(in, {16, 4});
  EXPECT_EQ(wide.verify_num_valid, 4);
  EXPECT_EQ(wide.input_error_bits, kvcanary::kBadExtendLen);
}

TEST_P(BadRows, BitsAreOredAndFirstBadRowIsTheSmallest) {
  Inputs in = linear(4, 16);
  set_pool(in, 2, 16, {1, 1, 1, 1, 1, 1});
  // row 2: bits 2 and 4; row 3: bits 1 and 4; row 5: bits 1 and 4 (negative)
  set_batch(in, {0, 1, 2, 9, 1, -3}, {5, 1, 99, 1, 1, 1}, {1, 1, 1, 1, 1, 1});
  const Outputs out = plan_checked(in, {64, 6});
  EXPECT_EQ(out.input_error_bits, 7);
  EXPECT_EQ(out.first_bad_row, 2);
  EXPECT_EQ(out.verify_num_valid, 2);
}

TEST_P(BadRows, PaddingRowsAreNeverInspected) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {kMax, 16, -1, kMin});
  set_batch(in, {0, 1, 0, 0}, {kMax, 2, -kMax, kMin}, {kMax, 1, -5, kMin});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.input_error_bits, 0);
  EXPECT_EQ(out.first_bad_row, -1);
  EXPECT_EQ(out.verify_num_valid, 2);
  EXPECT_EQ(head(out.verify_expected_tokens, 2), (Int64s{1000, 1001}));
  EXPECT_EQ(out.write_offsets, (Int64s{0, 0, 1, 1, 1}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{-1, 17, -1, -1}));
}

TEST_P(BadRows, NegativeLengthsActAsZeroWithoutError) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2, 3}, {-5, 4, 3}, {3, -2, kMin});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(out.input_error_bits, 0);
  EXPECT_EQ(out.verify_num_valid, 7);
  EXPECT_EQ(out.write_offsets, (Int64s{0, 3, 3, 3, 0}));
  EXPECT_EQ(head(out.write_seed_slot_indices, 3), (Int64s{-1, -1, -1}));
}

TEST_P(BadRows, TokensOutsideValidRangeAreMinusOne) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {-1, 3});
  in.kv_token_id_vs_position_offset = -1;  // s = pos - 1: position 0 reads s = -1
  set_batch(in, {1, 2}, {2, 5}, {1, 1});
  const Outputs out = plan_checked(in);
  EXPECT_EQ(head(out.verify_expected_tokens, 7), (Int64s{-1, -1, -1, 2000, 2001, 2002, -1}));
}

TEST_P(BadRows, EmptyPoolFlagsEveryActiveRow) {
  Inputs in = linear(4, 16);
  set_pool(in, 0, 16, {0, 0});
  set_batch(in, {0, 1}, {1, 1}, {1, 1});
  const Outputs out = plan_checked(in, {64, 2});
  EXPECT_EQ(out.input_error_bits, kvcanary::kBadPoolRow);
  EXPECT_EQ(out.first_bad_row, 1);
}

TEST_P(BadRows, NegativeSlotsPassThroughTheLut) {
  Inputs in = linear(2, 4);
  in.req_to_token = {0, 0, 0, 0, -5, 1, 100, -1};
  in.full_to_swa_index_mapping = Int64s{40, 41, 42};  // no window: translation only
  set_batch(in, {1}, {4}, {1});
  const Outputs out = plan_checked(in, {8, 1});
  EXPECT_EQ(head(out.verify_slot_indices, 4), (Int64s{-5, 41, 42, -1}));
  EXPECT_EQ(head(out.verify_prev_slot_indices, 4), (Int64s{-1, -5, 41, 42}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{-1}));
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(BadRows);

}  // namespace kvcanary_test
