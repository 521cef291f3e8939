// SPEC §4 host-side errors, through the device API (kvcanary::plan on Views): std::invalid_argument
// naming the argument and the values, thrown before any output is modified; the reference rejects the
// same call with the same message.

#include "test_support.hpp"

#include <limits>

namespace kvcanary_test {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A valid call with a pool and a LUT, so that every rule has something to break.
inline Inputs valid_call() {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {16, 16, 16});
  in.full_to_swa_index_mapping = shifted_lut(64, 0);
  in.swa_window_size = 8;
  set_batch(in, {1, 2, 3}, {3, 4, 5}, {1, 1, 1});
  return in;
}

class HostErrors : public ::testing::Test {
 protected:
  using Space = KVCANARY_TEST_EXECSPACE;

  // The library's message; when it throws, its device outputs must still be exactly `outputs`.
  static std::optional<std::string> library_message(const Inputs& in, const Outputs& outputs,
                                                    std::int64_t workspace_rows) {
    const Space space;
    const DevicePlan<Space> device(space, outputs, workspace_rows);
    const auto device_inputs = kvcanary::upload_inputs(space, in);
    const auto message = invalid_argument_message([&] { device.plan(space, device_inputs); });
    if (message) EXPECT_TRUE(same_plan(device.download(space), outputs)) << "outputs changed by a rejected call";
    return message;
  }

  // Expects both the library and the reference to reject the call with one message holding `matcher`.
  template <class Matcher>
  static void expect_rejected(const Inputs& in, const Outputs& outputs, const Matcher& matcher) {
    const auto library = library_message(in, outputs, batch_size(in));
    ASSERT_TRUE(library.has_value()) << "kvcanary::plan accepted the call";
    EXPECT_THAT(*library, AllOf(HasSubstr("kvcanary::plan: "), matcher));

    Outputs reference_outputs = outputs;
    const auto reference = invalid_argument_message([&] { kvcanary::reference::plan(in, reference_outputs); });
    ASSERT_TRUE(reference.has_value()) << "reference::plan accepted the call";
    EXPECT_EQ(*reference, *library);
    EXPECT_TRUE(same_plan(reference_outputs, outputs)) << "reference outputs changed by a rejected call";
  }
};

TEST_F(HostErrors, ValidCallIsAccepted) {
  const Inputs in = valid_call();
  EXPECT_EQ(library_message(in, poisoned({64, 4}), 3), std::nullopt);
}

TEST_F(HostErrors, PrefixLensOfAnotherLengthAreRejected) {
  Inputs in = valid_call();
  in.prefix_lens.pop_back();
  expect_rejected(in, poisoned({64, 4}), AllOf(HasSubstr("prefix_lens has 2"), HasSubstr("has 3")));
}

TEST_F(HostErrors, ExtendSeqLensOfAnotherLengthAreRejected) {
  Inputs in = valid_call();
  in.extend_seq_lens.push_back(1);
  expect_rejected(in, poisoned({64, 4}), AllOf(HasSubstr("extend_seq_lens has 4"), HasSubstr("has 3")));
}

TEST_F(HostErrors, PoolWithoutValidLensIsRejected) {
  Inputs in = valid_call();
  in.req_to_verify_expected_tokens_valid_lens.reset();
  expect_rejected(in, poisoned({64, 4}), HasSubstr("req_to_verify_expected_tokens_valid_lens is missing"));
}

TEST_F(HostErrors, ValidLensOfAnotherLengthAreRejected) {
  Inputs in = valid_call();
  in.req_to_verify_expected_tokens_valid_lens = Int64s{16, 16};
  expect_rejected(in, poisoned({64, 4}),
                  AllOf(HasSubstr("req_to_verify_expected_tokens_valid_lens has 2"), HasSubstr("has 3")));
}

TEST_F(HostErrors, NegativeWindowIsRejected) {
  Inputs in = valid_call();
  in.swa_window_size = -1;
  expect_rejected(in, poisoned({64, 4}), HasSubstr("swa_window_size is -1"));
}

TEST_F(HostErrors, WindowWithoutLutIsRejected) {
  Inputs in = valid_call();
  in.full_to_swa_index_mapping.reset();
  expect_rejected(in, poisoned({64, 4}),
                  AllOf(HasSubstr("swa_window_size is 8"), HasSubstr("full_to_swa_index_mapping is missing")));
}

TEST_F(HostErrors, EmptyLutIsRejected) {
  Inputs in = valid_call();
  in.full_to_swa_index_mapping = Int64s{};
  expect_rejected(in, poisoned({64, 4}), HasSubstr("full_to_swa_index_mapping is empty"));
}

TEST_F(HostErrors, EmptyLutIsRejectedWithoutWindow) {
  Inputs in = valid_call();
  in.swa_window_size = 0;
  in.full_to_swa_index_mapping = Int64s{};
  expect_rejected(in, poisoned({64, 4}), HasSubstr("full_to_swa_index_mapping is empty"));
}

TEST_F(HostErrors, WriteCapacityBelowBatchSizeIsRejected) {
  expect_rejected(valid_call(), poisoned({64, 2}),
                  AllOf(HasSubstr("write_req_capacity is 2"), HasSubstr("batch has 3")));
}

TEST_F(HostErrors, WriteOffsetsTooShortAreRejected) {
  Outputs outputs = poisoned({64, 4});
  outputs.write_offsets.pop_back();
  expect_rejected(valid_call(), outputs, AllOf(HasSubstr("write_offsets has 4"), HasSubstr("= 5")));
}

TEST_F(HostErrors, WriteOffsetsTooLongAreRejected) {
  Outputs outputs = poisoned({64, 4});
  outputs.write_offsets.push_back(kPoison);
  expect_rejected(valid_call(), outputs, AllOf(HasSubstr("write_offsets has 6"), HasSubstr("= 5")));
}

TEST_F(HostErrors, VerifyArraysOfDifferentExtentsAreRejected) {
  const auto shorten = [](Int64s Outputs::*array, const char* name) {
    SCOPED_TRACE(name);
    Outputs outputs = poisoned({64, 4});
    (outputs.*array).pop_back();
    expect_rejected(valid_call(), outputs, AllOf(HasSubstr(std::string(name) + " has 63"), HasSubstr("has 64")));
  };
  shorten(&Outputs::verify_expected_tokens, "verify_expected_tokens");
  shorten(&Outputs::verify_expected_positions, "verify_expected_positions");
  shorten(&Outputs::verify_prev_slot_indices, "verify_prev_slot_indices");
}

TEST_F(HostErrors, ReqToTokenWithoutRowsIsRejected) {
  Inputs in = valid_call();
  in.max_reqs = 0;
  in.req_to_token.clear();
  expect_rejected(in, poisoned({64, 4}), HasSubstr("req_to_token is 0 x 16"));
}

TEST_F(HostErrors, ReqToTokenWithoutColumnsIsRejected) {
  Inputs in = valid_call();
  in.max_seq_len = 0;
  in.req_to_token.clear();
  expect_rejected(in, poisoned({64, 4}), HasSubstr("req_to_token is 4 x 0"));
}

// A View cannot have a negative extent, so a negative capacity can only reach the shared shape checks.
TEST_F(HostErrors, NegativeCapacitiesAreRejectedByShapeChecks) {
  kvcanary::PlanShapes shapes;
  shapes.req_to_token_rows = shapes.req_to_token_cols = 1;
  for (auto& extent : shapes.verify_extents) extent = -1;
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::check_plan_shapes(shapes); }).value_or(""),
              HasSubstr("verify_capacity is -1"));
  for (auto& extent : shapes.verify_extents) extent = 0;
  shapes.write_req_capacity = -1;
  shapes.write_offsets = 0;
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::check_plan_shapes(shapes); }).value_or(""),
              HasSubstr("write_req_capacity is -1"));
}

// Sizes at the int64 end (issue 10): the checks compare without computing capacity + 1 or bs x cols,
// which would overflow (UBSan, in the sanitizer build).
TEST_F(HostErrors, SizesAtTheInt64EndAreRejectedWithoutOverflow) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  kvcanary::PlanShapes shapes;
  shapes.req_to_token_rows = shapes.req_to_token_cols = 1;
  shapes.write_req_capacity = kMax;
  shapes.write_offsets = 5;
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::check_plan_shapes(shapes); }).value_or(""),
              HasSubstr("write_offsets has 5 entries, must be write_req_capacity + 1 = 9223372036854775808"));
  shapes.write_req_capacity = 4;
  shapes.req_pool_indices = shapes.prefix_lens = shapes.extend_seq_lens = 3;
  shapes.req_to_token_cols = kMax / 2;
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::check_plan_shapes(shapes); }).value_or(""),
              HasSubstr("the verify total could overflow int64"));
  shapes.req_to_token_cols = kMax / 3;  // 3 rows of kMax / 3 entries still sum inside int64
  EXPECT_EQ(invalid_argument_message([&] { kvcanary::check_plan_shapes(shapes); }), std::nullopt);
}

// The reference's flat matrices: rows x cols is checked by division, never formed.
TEST_F(HostErrors, FlatSizesOfHugeShapesAreRejectedWithoutOverflow) {
  Inputs in = valid_call();
  in.req_to_token.assign(64, 0);
  in.max_reqs = (std::int64_t(1) << 60) + 1;
  in.max_seq_len = 64;  // (2^60 + 1) x 64 wraps to 64 in 64 bits: a product would accept the 64 values
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::reference::check_flat_sizes(in); }).value_or(""),
              HasSubstr("req_to_token holds"));
}

// The library's own rules beyond SPEC §4 (no reference counterpart): scratch and output scalars.
TEST_F(HostErrors, BatchLargerThanWorkspaceIsRejected) {
  const auto message = library_message(valid_call(), poisoned({64, 4}), 2);
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, AllOf(HasSubstr("batch has 3"), HasSubstr("workspace was allocated for 2")));
}

TEST_F(HostErrors, UnallocatedScalarIsRejected) {
  const Space space;
  const DevicePlan<Space> device(space, poisoned({64, 4}), 3);
  auto verify = device.verify;
  verify.enable = decltype(verify.enable)();
  const auto in = kvcanary::upload_inputs(space, valid_call());
  const auto message = invalid_argument_message(
      [&] { kvcanary::plan(space, in, verify, device.write, device.status, device.workspace); });
  EXPECT_THAT(message.value_or(""), HasSubstr("enable is not allocated"));
  EXPECT_TRUE(same_plan(device.download(space), poisoned({64, 4})));
}

// Without a pool, valid_lens is ignored (SPEC §4): any length is accepted and never read.
TEST_F(HostErrors, ValidLensWithoutPoolAreIgnored) {
  Inputs in = valid_call();
  in.req_to_verify_expected_tokens.reset();
  in.req_to_verify_expected_tokens_valid_lens = Int64s{1};
  Outputs library = poisoned({64, 4});
  Outputs reference = library;
  kvcanary::reference::plan(in, reference);
  kvcanary::plan_host_data(Space(), in, library);
  EXPECT_TRUE(same_plan(library, reference));
  EXPECT_EQ(library.verify_num_valid, 12);
}

}  // namespace kvcanary_test
