// ViolationReader on a device ring (SPEC-CANARY §7): each read reports the rows counted since the last
// one, in the exact line format; a full ring is reported once per read that loses violations; Raise
// throws ViolationError with the rows; the never-written filter drops zero records and says how many.

#include "test_canary_support.hpp"

namespace kvcanary_test {

class ReportReader : public ::testing::Test {
 protected:
  using Space = KVCANARY_TEST_EXECSPACE;
  using memory_space = Space::memory_space;
  const Space space{};

  // A verify of `entries` (slot, expected position) against a buffer whose slot 5 holds (33, 0, anchor).
  void verify(const kvcanary::ViolationRing<memory_space>& ring, const std::vector<std::array<std::int64_t, 2>>& entries) {
    Outputs plan = kvcanary::reference::make_outputs(static_cast<std::int64_t>(entries.size()), 0, -1);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      plan.verify_slot_indices[i] = entries[i][0];
      plan.verify_expected_positions[i] = entries[i][1];
      plan.verify_prev_slot_indices[i] = -1;
    }
    plan.verify_num_valid = static_cast<std::int32_t>(entries.size());
    plan.enable = 1;
    Buffer host(8);
    host[5] = {33, 0, kAnchorHash, 0};
    kvcanary::verify(space, kvcanary::upload_verify_plan(space, plan), kvcanary::upload_canary_buffer(space, host), ring,
                     kvcanary::VerifyOptions{}, KernelKind::HEAD_K_FULL);
  }

  kvcanary::ReportOptions log_to(std::vector<std::string>& lines, bool keep_never_written = false) const {
    kvcanary::ReportOptions options;
    options.mode = kvcanary::ReportMode::Log;
    options.keep_never_written = keep_never_written;
    options.sink = [&lines](const std::string& line) { lines.push_back(line); };
    return options;
  }
};

TEST_F(ReportReader, EachReadReportsOnlyNewRows) {
  const auto ring = kvcanary::allocate_violation_ring(space, 8);
  std::vector<std::string> lines;
  kvcanary::ViolationReader reader(log_to(lines));
  verify(ring, {{5, 99}});
  const kvcanary::ViolationReport first = reader.read(space, ring);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_position slot_idx=5 position=0 "
            "stored_token=33 expected_token=-1 stored_chain_hash=0xde7fae23a9a1b716 expected_aux=0xde7fae23a9a1b716");
  EXPECT_EQ(first.rows.size(), 1u);
  EXPECT_EQ(reader.read(space, ring).rows.size(), 0u);  // nothing new
  EXPECT_EQ(lines.size(), 1u);
  verify(ring, {{5, 7}, {5, 8}});
  EXPECT_EQ(reader.read(space, ring).rows.size(), 2u);
  EXPECT_EQ(lines.size(), 3u);
  EXPECT_EQ(reader.already_reported(), 3);
}

TEST_F(ReportReader, NeverWrittenRowsAreDroppedAndCounted) {
  const auto ring = kvcanary::allocate_violation_ring(space, 8);
  std::vector<std::string> lines;
  kvcanary::ViolationReader reader(log_to(lines));
  verify(ring, {{3, 4}, {5, 9}});  // slot 3 was never written: a zero record
  const kvcanary::ViolationReport report = reader.read(space, ring);
  EXPECT_EQ(report.rows.size(), 1u);
  EXPECT_EQ(report.dropped, 1);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "kv_canary: 1 never-written rows dropped (launch tags HEAD_K_FULL)");

  const auto kept_ring = kvcanary::allocate_violation_ring(space, 8);
  std::vector<std::string> all;
  kvcanary::ViolationReader keeping(log_to(all, /*keep_never_written=*/true));
  verify(kept_ring, {{3, 4}, {5, 9}});
  EXPECT_EQ(keeping.read(space, kept_ring).rows.size(), 2u);
}

TEST_F(ReportReader, AFullRingIsReportedOncePerReadThatLosesViolations) {
  const auto ring = kvcanary::allocate_violation_ring(space, 2);
  std::vector<std::string> lines;
  kvcanary::ViolationReader reader(log_to(lines));
  verify(ring, {{5, 1}, {5, 2}, {5, 3}});
  const kvcanary::ViolationReport first = reader.read(space, ring);
  EXPECT_EQ(first.count, 3);
  EXPECT_EQ(first.rows.size(), 2u);
  EXPECT_EQ(first.newly_lost, 1);
  EXPECT_EQ(lines.size(), 3u);  // two rows and the summary
  EXPECT_EQ(reader.read(space, ring).newly_lost, 0);
  EXPECT_EQ(lines.size(), 3u);  // a quiet step stays quiet
  verify(ring, {{5, 4}});
  EXPECT_EQ(reader.read(space, ring).newly_lost, 1);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[3], ::testing::HasSubstr("count=4"));
}

// SPEC-CANARY §7, on the device: a stamped record wiped to zeros is dropped as never written, and Raise
// mode says so on the sink without throwing (before: nothing at all); a later kept row throws.
TEST_F(ReportReader, RaiseModeIsNeverSilentOnAWipedRecord) {
  const auto ring = kvcanary::allocate_violation_ring(space, 8);
  std::vector<std::string> lines;
  kvcanary::ReportOptions options = log_to(lines);
  options.mode = kvcanary::ReportMode::Raise;
  kvcanary::ViolationReader reader(options);
  verify(ring, {{3, 4}});  // slot 3: a zero record, as a wiped one reads
  kvcanary::ViolationReport report;
  EXPECT_NO_THROW(report = reader.read(space, ring));
  EXPECT_EQ(report.dropped, 1);
  EXPECT_THAT(lines, ::testing::ElementsAre("kv_canary: 1 never-written rows dropped (launch tags HEAD_K_FULL)"));
  verify(ring, {{5, 9}});
  EXPECT_THROW(reader.read(space, ring), kvcanary::ViolationError);
}

// SPEC-CANARY §7: a real store's write rows are kept even when token, position and chain hash are all 0
// (token 0 at position 0 chained to a zero seed record; repro never_written_filter_drops_write_rows.json).
TEST_F(ReportReader, WriteRowsOfAZeroSeedChainAreReported) {
  const auto ring = kvcanary::allocate_violation_ring(space, 8);
  const auto buffer = kvcanary::allocate_canary_buffer(space, 3);
  Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
  plan.write_offsets = {0, 1};
  plan.write_seed_slot_indices = {2};
  plan.write_num_valid_reqs = 1;
  Tokens tokens;
  tokens.input_ids = {0};
  tokens.positions = {0};
  tokens.out_cache_loc = {1};
  tokens.expected_input_ids = Int64s{9};
  tokens.expected_positions = Int64s{0};
  kvcanary::write(space, kvcanary::upload_write_plan(space, plan), kvcanary::upload_step_tokens(space, tokens), buffer,
                  ring);
  std::vector<std::string> lines;
  kvcanary::ViolationReader reader(log_to(lines));
  const kvcanary::ViolationReport report = reader.read(space, ring);
  EXPECT_EQ(report.dropped, 0);
  ASSERT_EQ(report.rows.size(), 2u);
  EXPECT_THAT(lines, ::testing::UnorderedElementsAre(::testing::HasSubstr("fail_reason=write_token slot_idx=1"),
                                                     ::testing::HasSubstr("fail_reason=write_position slot_idx=1")));
}

TEST_F(ReportReader, RaiseThrowsWithTheRows) {
  const auto ring = kvcanary::allocate_violation_ring(space, 4);
  kvcanary::ViolationReader reader(kvcanary::ReportOptions{kvcanary::ReportMode::Raise});
  EXPECT_NO_THROW(reader.read(space, ring));
  verify(ring, {{5, 1}});
  try {
    reader.read(space, ring);
    ADD_FAILURE() << "no ViolationError";
  } catch (const kvcanary::ViolationError& error) {
    ASSERT_EQ(error.rows().size(), 1u);
    EXPECT_EQ(error.rows()[0][kvcanary::kRowSlot], 5);
    EXPECT_THAT(error.lines()[0], ::testing::StartsWith("kv_canary violation: launch_tag=HEAD_K_FULL"));
  }
  EXPECT_NO_THROW(reader.read(space, ring));  // reported once
}

}  // namespace kvcanary_test
