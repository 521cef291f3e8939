// SPEC-CANARY §7: the host report on ring snapshots — the exact line format, reason names, the
// never-written filter and its dropped count, already_reported windowing, overflow, and the three
// delivery modes and the JSON form.

#include "test_support.hpp"

#include <kvcanary/stages/report.hpp>

#include <limits>

namespace kvcanary_test {

using kvcanary::ReportMode;
using kvcanary::ReportOptions;
using kvcanary::ViolationError;
using kvcanary::ViolationReport;
using kvcanary::reference::RingRow;
using kvcanary::reference::ViolationRing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The row of SPEC-CANARY §5's fact (kind HEAD_K_FULL) and its §7 line, written out by hand.
constexpr RingRow kFactRow = {0, 5, 0, 33, -1, -2414019407054260458LL, -2414019407054260458LL, 2};
constexpr const char* kFactLine =
    "kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_position slot_idx=5 position=0 stored_token=33 "
    "expected_token=-1 stored_chain_hash=0xde7fae23a9a1b716 expected_aux=0xde7fae23a9a1b716";

// A never-written record seen by verify (SPEC-CANARY §10): token, position and chain hash 0, bits 2 | 32.
constexpr RingRow kZeroRecordRow = {0, 7, 0, 0, 55, 0, 0, 34};

inline ViolationRing snapshot(std::int64_t capacity, std::vector<RingRow> rows, std::int64_t count) {
  ViolationRing ring;
  ring.capacity = capacity;
  ring.rows = std::move(rows);
  ring.count = count;
  ring.slot_run_counter = 1234;
  ring.kernel_run_counter = 56;
  return ring;
}

inline RingRow row_for_slot(std::int64_t slot) {
  return RingRow{1, slot, 3, 4, 5, 6, 7, 16};
}

TEST(ReportLine, FactRowFormatsExactly) {
  EXPECT_EQ(kvcanary::format_violation(kFactRow), kFactLine);
}

TEST(ReportLine, OutOfRangeRowShowsMinusOneHashesAsUnsigned) {
  EXPECT_EQ(kvcanary::format_violation(RingRow{6, 9, 4, -1, -1, -1, -1, 64}),
            "kv_canary violation: launch_tag=HEAD_K_SWA fail_reason=out_of_range slot_idx=9 position=4 stored_token=-1 "
            "expected_token=-1 stored_chain_hash=0xffffffffffffffff expected_aux=0xffffffffffffffff");
}

TEST(ReportLine, SmallHashesArePaddedToSixteenDigitsAndExtremesPrintInFull) {
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(
      kvcanary::format_violation(RingRow{11, min, std::numeric_limits<std::int64_t>::max(), 0, 1, 0x1234, min, 8}),
      "kv_canary violation: launch_tag=SWEEP_V_SWA fail_reason=write_token slot_idx=-9223372036854775808 "
      "position=9223372036854775807 stored_token=0 expected_token=1 stored_chain_hash=0x0000000000001234 "
      "expected_aux=0x8000000000000000");
}

TEST(ReportLine, EveryLaunchTagIsItsSpecName) {
  const char* const names[12] = {"HEAD_K_FULL",  "HEAD_V_FULL",  "TAIL_K_FULL", "TAIL_V_FULL",
                                 "SWEEP_K_FULL", "SWEEP_V_FULL", "HEAD_K_SWA",  "HEAD_V_SWA",
                                 "TAIL_K_SWA",   "TAIL_V_SWA",   "SWEEP_K_SWA", "SWEEP_V_SWA"};
  for (std::int64_t kind = 0; kind < 12; ++kind) {
    RingRow row = kFactRow;
    row[0] = kind;
    EXPECT_THAT(kvcanary::format_violation(row),
                HasSubstr(std::string("violation: launch_tag=") + names[kind] + " fail_reason="));
  }
  RingRow corrupted = kFactRow;
  corrupted[0] = 12;
  EXPECT_THAT(kvcanary::format_violation(corrupted), HasSubstr("launch_tag=UNKNOWN "));
  corrupted[0] = -1;
  EXPECT_THAT(kvcanary::format_violation(corrupted), HasSubstr("launch_tag=UNKNOWN "));
}

TEST(ReportLine, ReasonNamesInBitOrder) {
  EXPECT_EQ(kvcanary::fail_reason_names(0), "none");
  EXPECT_EQ(kvcanary::fail_reason_names(1), "verify_chain_hash");
  EXPECT_EQ(kvcanary::fail_reason_names(4), "verify_real_kv_hash");
  EXPECT_EQ(kvcanary::fail_reason_names(16), "write_position");
  EXPECT_EQ(kvcanary::fail_reason_names(32 | 2 | 1), "verify_chain_hash+verify_position+verify_token");
  EXPECT_EQ(kvcanary::fail_reason_names(24), "write_token+write_position");
  EXPECT_EQ(
      kvcanary::fail_reason_names(127),
      "verify_chain_hash+verify_position+verify_real_kv_hash+write_token+write_position+verify_token+out_of_range");
}

TEST(ReportLine, UnknownBitsAreNamedByNumberInOrder) {
  EXPECT_EQ(kvcanary::fail_reason_names(2048 | 64 | 2), "verify_position+out_of_range+bit11");
  EXPECT_EQ(kvcanary::fail_reason_names(128 | 256 | 512 | 1024),
            "verify_freed+verify_slot_zero+metadata_mismatch+padding_slot_kv");  // SPEC-CANARY §11.1
  EXPECT_EQ(kvcanary::fail_reason_names(std::numeric_limits<std::int64_t>::min()), "bit63");
  EXPECT_EQ(kvcanary::fail_reason_names(-1).substr(0, 18), "verify_chain_hash+");
  RingRow row = kFactRow;
  row[7] = 0;
  EXPECT_THAT(kvcanary::format_violation(row), HasSubstr(" fail_reason=none slot_idx=5 "));
}

TEST(ReportLine, NeverWrittenIsTokenPositionAndChainHashZero) {
  EXPECT_TRUE(kvcanary::is_never_written(kZeroRecordRow));
  EXPECT_FALSE(kvcanary::is_never_written(kFactRow));
  for (const int field : {kvcanary::kRowStoredToken, kvcanary::kRowPosition, kvcanary::kRowStoredChainHash}) {
    RingRow row = kZeroRecordRow;
    row[static_cast<std::size_t>(field)] = 1;
    EXPECT_FALSE(kvcanary::is_never_written(row)) << "field " << field;
  }
}

// SPEC-CANARY §7: the filter is for verify-stage rows; a real store's rows (a token 0 at position 0
// chained to a zero seed record: running hash mix3(0, 0, 0) = 0) and out-of-range rows are always kept.
TEST(ReportLine, RowsWithAWriteOrOutOfRangeBitAreNeverDroppedAsNeverWritten) {
  for (const std::int64_t bit : {kvcanary::kWriteToken, kvcanary::kWritePosition, kvcanary::kOutOfRange}) {
    RingRow row = kZeroRecordRow;
    row[kvcanary::kRowFailReasonBits] = bit;
    EXPECT_FALSE(kvcanary::is_never_written(row)) << "bit " << bit;
    row[kvcanary::kRowFailReasonBits] = bit | kvcanary::kVerifyPosition;
    EXPECT_FALSE(kvcanary::is_never_written(row)) << "bit " << bit;
  }
  const RingRow write_row = {0, 1, 0, 0, 9, 0, 0, kvcanary::kWriteToken};
  const ViolationReport report = kvcanary::make_report(snapshot(8, {write_row, kZeroRecordRow}, 2), 0);
  EXPECT_THAT(report.rows, ElementsAre(write_row));
  EXPECT_EQ(report.dropped, 1);
}

// ---- make_report ----

TEST(Report, NeverWrittenRowsAreDroppedAndCounted) {
  const auto ring = snapshot(8, {kFactRow, kZeroRecordRow, row_for_slot(3), kZeroRecordRow}, 4);
  const ViolationReport report = kvcanary::make_report(ring, 0);
  EXPECT_THAT(report.rows, ElementsAre(kFactRow, row_for_slot(3)));
  ASSERT_EQ(report.lines.size(), 2u);
  EXPECT_EQ(report.lines[0], kFactLine);
  EXPECT_EQ(report.lines[1], kvcanary::format_violation(row_for_slot(3)));
  EXPECT_EQ(report.dropped, 2);
  EXPECT_EQ(report.rows_read, 4);
  EXPECT_EQ(report.count, 4);
  EXPECT_EQ(report.capacity, 8);
  EXPECT_FALSE(report.overflowed);
  EXPECT_EQ(report.lost_to_overflow, 0);
  EXPECT_EQ(report.slot_run_counter, 1234);
  EXPECT_EQ(report.kernel_run_counter, 56);
}

TEST(Report, KeepOptionKeepsNeverWrittenRows) {
  const auto ring = snapshot(8, {kFactRow, kZeroRecordRow}, 2);
  ReportOptions options;
  options.keep_never_written = true;
  const ViolationReport report = kvcanary::make_report(ring, 0, options);
  EXPECT_THAT(report.rows, ElementsAre(kFactRow, kZeroRecordRow));
  EXPECT_EQ(report.dropped, 0);
  ASSERT_EQ(report.lines.size(), 2u);
  EXPECT_EQ(
      report.lines[1],
      "kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_position+verify_token slot_idx=7 position=0 "
      "stored_token=0 expected_token=55 stored_chain_hash=0x0000000000000000 expected_aux=0x0000000000000000");
}

TEST(Report, AlreadyReportedRowsAreSkipped) {
  const auto ring = snapshot(8, {row_for_slot(1), row_for_slot(2), kZeroRecordRow, row_for_slot(4)}, 4);
  const ViolationReport report = kvcanary::make_report(ring, 1);
  EXPECT_THAT(report.rows, ElementsAre(row_for_slot(2), row_for_slot(4)));
  EXPECT_EQ(report.first_row, 1);
  EXPECT_EQ(report.rows_read, 3);
  EXPECT_EQ(report.dropped, 1);
  EXPECT_EQ(report.next_row(), 4);
  const ViolationReport nothing_new = kvcanary::make_report(ring, report.next_row());
  EXPECT_TRUE(nothing_new.rows.empty());
  EXPECT_EQ(nothing_new.rows_read, 0);
  EXPECT_EQ(nothing_new.dropped, 0);
}

TEST(Report, OverflowedRingReportsItsCapacityAndTheLostCount) {
  std::vector<RingRow> rows;
  for (std::int64_t s = 1; s <= 4; ++s) rows.push_back(row_for_slot(s));
  const ViolationReport report = kvcanary::make_report(snapshot(4, rows, 10), 0);
  EXPECT_TRUE(report.overflowed);
  EXPECT_EQ(report.count, 10);
  EXPECT_EQ(report.lost_to_overflow, 6);
  EXPECT_EQ(report.rows.size(), 4u);
  const ViolationReport full = kvcanary::make_report(snapshot(4, rows, 4), 0);
  EXPECT_FALSE(full.overflowed);
  EXPECT_EQ(full.lost_to_overflow, 0);
  const ViolationReport count_only = kvcanary::make_report(snapshot(0, {}, 10), 0);
  EXPECT_TRUE(count_only.overflowed);
  EXPECT_EQ(count_only.lost_to_overflow, 10);
  EXPECT_TRUE(count_only.rows.empty());
}

TEST(Report, InconsistentSnapshotsAndWindowsAreRejected) {
  const auto ring = snapshot(8, {row_for_slot(1), row_for_slot(2)}, 2);
  const auto message_of = [](const ViolationRing& r, std::int64_t already_reported) {
    return invalid_argument_message([&] { kvcanary::make_report(r, already_reported); });
  };
  EXPECT_THAT(message_of(ring, -1).value_or(""), HasSubstr("kvcanary::make_report: already_reported is -1"));
  EXPECT_THAT(message_of(ring, 3).value_or(""), HasSubstr("already_reported is 3, must be in [0, 2]"));
  EXPECT_EQ(message_of(ring, 2), std::nullopt);
  EXPECT_THAT(message_of(snapshot(8, {row_for_slot(1)}, 2), 0).value_or(""),
              HasSubstr("ring holds 1 rows but its count 2 and capacity 8 say 2"));
  EXPECT_THAT(message_of(snapshot(-1, {}, 0), 0).value_or(""), HasSubstr("ring capacity is -1"));
}

TEST(Report, RingSnapshotKeepsTheHeldRowsOfAFlatCopy) {
  // A device ring of capacity 3 copied to the host: 24 int64, of which count 2 rows are meaningful.
  std::vector<std::int64_t> flat(24, -9);
  for (std::int64_t f = 0; f < 8; ++f) flat[static_cast<std::size_t>(f)] = kFactRow[static_cast<std::size_t>(f)];
  for (std::int64_t f = 0; f < 8; ++f)
    flat[static_cast<std::size_t>(8 + f)] = row_for_slot(2)[static_cast<std::size_t>(f)];
  const ViolationRing ring = kvcanary::reference::ring_snapshot(flat.data(), 3, 2, 7, 8);
  EXPECT_THAT(ring.rows, ElementsAre(kFactRow, row_for_slot(2)));
  EXPECT_EQ(ring.capacity, 3);
  EXPECT_EQ(ring.count, 2);
  EXPECT_EQ(ring.slot_run_counter, 7);
  EXPECT_EQ(ring.kernel_run_counter, 8);
  EXPECT_EQ(kvcanary::reference::ring_snapshot(flat.data(), 3, 50, 0, 0).rows.size(), 3u);
}

// The reference's verify, reported: the §5 fact end to end.
TEST(Report, ReferenceVerifyFactReportsTheFactLine) {
  kvcanary::reference::CanaryBuffer buffer(8);
  buffer[5] = kvcanary::reference::Record{33, 0, -2414019407054260458LL, 0};
  Outputs plan = kvcanary::reference::make_outputs(1, 0, 0);
  plan.verify_slot_indices = {5};
  plan.verify_expected_positions = {99};
  plan.verify_prev_slot_indices = {-1};
  plan.verify_expected_tokens = {-1};
  plan.verify_num_valid = 1;
  plan.enable = 1;
  ViolationRing ring;
  ring.capacity = 16;
  kvcanary::reference::verify(plan, buffer, kvcanary::KernelKind::HEAD_K_FULL, {}, true, ring);
  EXPECT_THAT(kvcanary::make_report(ring, 0).lines, ElementsAre(kFactLine));
}

// ---- deliver ----

TEST(ReportDelivery, LogSendsEachLineToTheSink) {
  const ViolationReport report = kvcanary::make_report(snapshot(8, {kFactRow, row_for_slot(3)}, 2), 0);
  std::vector<std::string> received;
  ReportOptions options;
  options.mode = ReportMode::Log;
  options.sink = [&](const std::string& line) { received.push_back(line); };
  kvcanary::deliver(report, options);
  EXPECT_THAT(received, ElementsAre(kFactLine, kvcanary::format_violation(row_for_slot(3))));
}

TEST(ReportDelivery, LogAddsASummaryWhenRowsWereDroppedOrLost) {
  std::vector<std::string> received;
  ReportOptions options;
  options.mode = ReportMode::Log;
  options.sink = [&](const std::string& line) { received.push_back(line); };
  kvcanary::deliver(kvcanary::make_report(snapshot(2, {kFactRow, kZeroRecordRow}, 5), 0), options);
  EXPECT_THAT(received, ElementsAre(kFactLine, "kv_canary: 1 never-written rows dropped (launch tags HEAD_K_FULL)",
                                    "kv_canary report: rows=1 dropped_never_written=1 count=5 capacity=2 overflowed=1 "
                                    "lost_to_overflow=3"));
  received.clear();
  RingRow v_row = kZeroRecordRow;
  v_row[kvcanary::kRowKernelKind] = static_cast<std::int64_t>(kvcanary::KernelKind::TAIL_V_SWA);
  kvcanary::deliver(kvcanary::make_report(snapshot(8, {v_row, kZeroRecordRow, v_row}, 3), 0), options);
  // a wiped record is never silent: SPEC-CANARY §7's line, the distinct launch tags in kind order
  EXPECT_THAT(received, ElementsAre("kv_canary: 3 never-written rows dropped (launch tags HEAD_K_FULL, TAIL_V_SWA)"));
}

TEST(ReportDelivery, LogWithoutSinkWritesToStandardError) {
  ReportOptions options;
  options.mode = ReportMode::Log;
  ::testing::internal::CaptureStderr();
  kvcanary::deliver(kvcanary::make_report(snapshot(8, {kFactRow}, 1), 0), options);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), std::string(kFactLine) + "\n");
}

TEST(ReportDelivery, NoneDeliversNothing) {
  int calls = 0;
  ReportOptions options;
  options.mode = ReportMode::None;
  options.sink = [&](const std::string&) { ++calls; };
  EXPECT_NO_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(0, {}, 3), 0), options));
  EXPECT_NO_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(8, {kFactRow}, 1), 0), options));
  EXPECT_EQ(calls, 0);
}

TEST(ReportDelivery, RaiseThrowsViolationErrorCarryingRowsAndLines) {
  ReportOptions options;
  options.mode = ReportMode::Raise;
  const ViolationReport report = kvcanary::make_report(snapshot(8, {kFactRow, kZeroRecordRow, row_for_slot(3)}, 3), 0);
  try {
    kvcanary::deliver(report, options);
    FAIL() << "deliver did not throw";
  } catch (const ViolationError& error) {
    EXPECT_THAT(error.rows(), ElementsAre(kFactRow, row_for_slot(3)));
    EXPECT_THAT(error.lines(), ElementsAre(kFactLine, kvcanary::format_violation(row_for_slot(3))));
    EXPECT_EQ(error.report().dropped, 1);
    EXPECT_THAT(error.what(), HasSubstr("rows=2 dropped_never_written=1 count=3"));
    EXPECT_THAT(error.what(), HasSubstr(std::string("first: ") + kFactLine));
  }
  EXPECT_THROW(kvcanary::deliver(report, options), std::runtime_error);  // ViolationError is one
}

TEST(ReportDelivery, RaiseThrowsOnlyForKeptRowsButNotWhenTheRingKeepsNone) {
  std::vector<std::string> received;
  ReportOptions options;
  options.mode = ReportMode::Raise;
  options.sink = [&](const std::string& line) { received.push_back(line); };
  EXPECT_NO_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(8, {}, 0), 0), options));
  EXPECT_NO_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(8, {kZeroRecordRow}, 1), 0), options));
  EXPECT_NO_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(8, {kFactRow}, 1), 1), options));
  // Dropped rows do not raise, but they are never silent: SPEC-CANARY §7's line goes to the sink.
  EXPECT_THAT(received, ElementsAre("kv_canary: 1 never-written rows dropped (launch tags HEAD_K_FULL)"));
  received.clear();
  EXPECT_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(8, {kFactRow, kZeroRecordRow}, 2), 0), options),
               ViolationError);
  EXPECT_THAT(received, ElementsAre(HasSubstr("kv_canary: 1 never-written rows dropped")));
  // Capacity 0 keeps only the count: the violations must still raise.
  EXPECT_THROW(kvcanary::deliver(kvcanary::make_report(snapshot(0, {}, 2), 0), options), ViolationError);
}

// ---- JSON ----

TEST(ReportJson, OneRowReportIsExactJson) {
  const ViolationReport report = kvcanary::make_report(snapshot(2, {kFactRow, kZeroRecordRow}, 6), 0);
  EXPECT_EQ(
      kvcanary::report_json(report),
      std::string("{\"count\": 6, \"capacity\": 2, \"overflowed\": true, \"lost_to_overflow\": 4, \"first_row\": 0, "
                  "\"rows_read\": 2, \"dropped\": 1, \"slot_run_counter\": 1234, \"kernel_run_counter\": 56, "
                  "\"rows\": [[0, 5, 0, 33, -1, -2414019407054260458, -2414019407054260458, 2]], \"lines\": [\"") +
          kFactLine + "\"]}");
}

TEST(ReportJson, EmptyReportHasEmptyArrays) {
  const std::string json = kvcanary::report_json(kvcanary::make_report(snapshot(4, {}, 0), 0));
  EXPECT_THAT(json, HasSubstr("\"overflowed\": false"));
  EXPECT_THAT(json, HasSubstr("\"rows\": [], \"lines\": []}"));
}

TEST(ReportJson, StringsAreEscaped) {
  ViolationReport report;
  report.rows.push_back(kFactRow);
  report.lines.push_back("a\"b\\c\nd\x01");
  EXPECT_THAT(kvcanary::report_json(report), HasSubstr("\"lines\": [\"a\\\"b\\\\c\\u000ad\\u0001\"]}"));
}

}  // namespace kvcanary_test
