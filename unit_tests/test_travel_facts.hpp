// The facts of SPEC-CANARY §12.3 (records that travel) on this backend, each also checked against the host
// reference by TransferRunner: export, import and relocate, padding and out-of-range slots, snapshot moves
// of overlapping lists, poisoned entries that must stay untouched, host errors before any launch.

#include "test_travel_support.hpp"

namespace kvcanary_test {

class Travel : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  TransferRunner<ExecSpace> runner;

  static Buffer two_records() {  // §12.3's facts: slots 3 and 5 of 8
    Buffer buffer(8);
    buffer[3] = {42, 7, 0x1234, 99};
    buffer[5] = {43, 8, 0x5678, 98};
    return buffer;
  }
  static Packed poisoned(std::size_t n) { return Packed(n, Record{-7, -7, -7, -7}); }
};

TEST_F(Travel, ExportPacksTheListedSlotsInOrder) {
  const TransferRun run = runner.export_records({5, -1, 3, 9}, two_records(), poisoned(4), empty_ring(4));
  EXPECT_EQ(run.records, (Packed{{43, 8, 0x5678, 98}, {}, {42, 7, 0x1234, 99}, {}}));
  ASSERT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows[0], (RingRow{0, 9, -1, -1, -1, -1, 3, kvcanary::kOutOfRange}));
  EXPECT_EQ(run.ring.slot_run_counter, 2);
  EXPECT_EQ(run.ring.kernel_run_counter, 1);
  EXPECT_EQ(run.buffer, two_records());  // export reads the buffer only
}

TEST_F(Travel, ExportLeavesEntriesPastTheListUntouched) {
  const TransferRun run = runner.export_records({3}, two_records(), poisoned(3), empty_ring(0));
  EXPECT_EQ(run.records, (Packed{{42, 7, 0x1234, 99}, {-7, -7, -7, -7}, {-7, -7, -7, -7}}));
}

TEST_F(Travel, ImportPlacesRecordsVerbatim) {
  const Packed out = runner.export_records({5, -1, 3, 9}, two_records(), poisoned(4), empty_ring(4)).records;
  const TransferRun run = runner.import_records({1, 2, 6, -1}, out, Buffer(8), empty_ring(4));
  Buffer expected(8);
  expected[1] = {43, 8, 0x5678, 98};
  expected[6] = {42, 7, 0x1234, 99};
  EXPECT_EQ(run.buffer, expected);
  EXPECT_TRUE(run.ring.rows.empty());
  EXPECT_EQ(run.ring.slot_run_counter, 3);
  EXPECT_EQ(run.ring.kernel_run_counter, 1);
}

TEST_F(Travel, ImportOfASlotPastTheBufferIsAnOutOfRangeRowAndStoresNothing) {
  const Packed in{{42, 7, 0x1234, 99}, {43, 8, 0x5678, 98}};
  const TransferRun run =
      runner.import_records({8, std::numeric_limits<std::int64_t>::max()}, in, two_records(), empty_ring(4), KernelKind::TAIL_V_FULL);
  EXPECT_EQ(run.buffer, two_records());
  ASSERT_EQ(run.ring.rows.size(), 2u);
  EXPECT_EQ(sorted(run.ring.rows),
            sorted({RingRow{3, 8, 7, 42, -1, 0x1234, 0, kvcanary::kOutOfRange},
                    RingRow{3, std::numeric_limits<std::int64_t>::max(), 8, 43, -1, 0x5678, 1, kvcanary::kOutOfRange}}));
  EXPECT_EQ(run.ring.slot_run_counter, 0);
}

TEST_F(Travel, ImportNeverReStampsAFreedOrZeroRecord) {
  // What arrived is what is stored, whatever it is: the consumer's verify judges it.
  const Packed in{{kvcanary::kFreedToken, 3, 0x77, 12}, {}};
  const TransferRun run = runner.import_records({2, 3}, in, two_records(), empty_ring(4));
  EXPECT_EQ(run.buffer[2], in[0]);
  EXPECT_EQ(run.buffer[3], Record{});
}

TEST_F(Travel, RelocateIsASnapshotMoveForOverlappingLists) {
  Buffer buffer(6);
  buffer[1] = {1, 0, 11, 0};
  buffer[2] = {2, 1, 22, 0};
  buffer[3] = {3, 2, 33, 0};
  const TransferRun shift = runner.relocate({1, 2, 3}, {2, 3, 4}, buffer, poisoned(4), empty_ring(4));
  EXPECT_EQ(shift.buffer[1], buffer[1]);  // sources are not cleared
  EXPECT_EQ(shift.buffer[2], buffer[1]);
  EXPECT_EQ(shift.buffer[3], buffer[2]);
  EXPECT_EQ(shift.buffer[4], buffer[3]);
  EXPECT_EQ(shift.records[3], (Record{-7, -7, -7, -7}));  // staging past the list untouched
  EXPECT_EQ(shift.ring.slot_run_counter, 3);
  EXPECT_EQ(shift.ring.kernel_run_counter, 1);
  const TransferRun cycle = runner.relocate({1, 2, 3}, {3, 1, 2}, buffer, poisoned(3), empty_ring(4));
  EXPECT_EQ(cycle.buffer[3], buffer[1]);
  EXPECT_EQ(cycle.buffer[1], buffer[2]);
  EXPECT_EQ(cycle.buffer[2], buffer[3]);
}

TEST_F(Travel, RelocateSkipsPairsWithABadSourceAndReportsOutOfRangeIndices) {
  Buffer buffer(4);
  buffer[1] = {1, 0, 11, 0};
  buffer[2] = {2, 1, 22, 0};
  const TransferRun run = runner.relocate({-1, 9, 1, 2, 2}, {3, 3, 7, -1, 3}, buffer, poisoned(5), empty_ring(4));
  EXPECT_EQ(run.buffer[3], buffer[2]);  // only the last pair moves
  EXPECT_EQ(run.buffer[0], Record{});
  EXPECT_EQ(sorted(run.ring.rows), sorted({RingRow{0, 9, -1, -1, -1, -1, 1, kvcanary::kOutOfRange},
                                           RingRow{0, 7, 0, 1, -1, 11, 2, kvcanary::kOutOfRange}}));
  EXPECT_EQ(run.ring.slot_run_counter, 1);
}

TEST_F(Travel, StridedBuffersMoveOnlyTheirRecords) {
  TransferRunner<ExecSpace> strided;
  strided.stride_bytes = 48;  // the filler words between records must not travel
  const Packed out = strided.export_records({3, 5}, two_records(), poisoned(2), empty_ring(0)).records;
  EXPECT_EQ(out, (Packed{{42, 7, 0x1234, 99}, {43, 8, 0x5678, 98}}));
  const TransferRun run = strided.import_records({5, 3}, out, Buffer(8), empty_ring(0));
  EXPECT_EQ(run.buffer[5], two_records()[3]);
  EXPECT_EQ(run.buffer[3], two_records()[5]);
}

TEST_F(Travel, NothingToMoveStillCountsTheCall) {
  const TransferRun run = runner.export_records({}, Buffer(2), {}, empty_ring(0));
  const TransferRun in = runner.import_records({}, {}, Buffer(2), run.ring);
  const TransferRun moved = runner.relocate({}, {}, Buffer(2), {}, in.ring);
  EXPECT_EQ(moved.ring.kernel_run_counter, 3);
  EXPECT_EQ(moved.ring.slot_run_counter, 0);
}

TEST_F(Travel, HostErrorsComeBeforeAnyLaunch) {
  using kvcanary::reference::TransferRecords;
  ExecSpace space;
  Buffer buffer = two_records();
  Ring ring = empty_ring(2);
  TransferRecords short_batch(1);
  EXPECT_THROW(kvcanary::export_records_host_data(space, {3, 5}, buffer, short_batch, KernelKind::HEAD_K_FULL, ring),
               std::invalid_argument);
  EXPECT_THROW(kvcanary::import_records_host_data(space, {3, 5}, short_batch, buffer, KernelKind::HEAD_K_FULL, ring),
               std::invalid_argument);
  TransferRecords staging(3);
  EXPECT_THROW(kvcanary::relocate_host_data(space, {3, 5}, {1}, buffer, staging, KernelKind::HEAD_K_FULL, ring),
               std::invalid_argument);
  EXPECT_THROW(kvcanary::relocate_host_data(space, {3, 5, 1, 2}, {1, 2, 3, 4}, buffer, staging, KernelKind::HEAD_K_FULL, ring),
               std::invalid_argument);
  EXPECT_THROW(kvcanary::export_records_host_data(space, {3}, buffer, staging, static_cast<KernelKind>(12), ring),
               std::invalid_argument);
  EXPECT_EQ(buffer, two_records());
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(ring.kernel_run_counter, 0);  // nothing ran
  // The reference throws on the same input.
  EXPECT_THROW(kvcanary::reference::export_records({3, 5}, buffer, short_batch, KernelKind::HEAD_K_FULL, ring),
               std::invalid_argument);
  EXPECT_THROW(kvcanary::reference::relocate({3}, {}, buffer, staging, KernelKind::HEAD_K_FULL, ring), std::invalid_argument);
}

TEST_F(Travel, AHostErrorLaunchesNothingOnTheDevice) {
  using memory_space = ExecSpace::memory_space;
  ExecSpace space;
  const auto buffer = kvcanary::upload_canary_buffer(space, two_records());
  const auto ring = kvcanary::upload_violation_ring(space, empty_ring(2));
  const auto slots = kvcanary::Impl::upload<std::int64_t, memory_space>(space, "test::slots", Int64s{3, 5, 9});
  const auto short_batch = kvcanary::allocate_transfer_records<memory_space>("test::short", 2);
  const auto staging = kvcanary::allocate_transfer_records<memory_space>("test::staging", 3);
  const auto two = kvcanary::Impl::upload<std::int64_t, memory_space>(space, "test::two", Int64s{1, 2});
  EXPECT_THROW(kvcanary::export_records(space, slots, buffer, short_batch, ring), std::invalid_argument);
  EXPECT_THROW(kvcanary::import_records(space, slots, short_batch, buffer, ring), std::invalid_argument);
  EXPECT_THROW(kvcanary::relocate(space, slots, two, buffer, staging, ring), std::invalid_argument);
  kvcanary::TransferOptions bad_kind;
  bad_kind.kernel_kind = static_cast<KernelKind>(-1);
  EXPECT_THROW(kvcanary::export_records(space, slots, buffer, staging, ring, bad_kind), std::invalid_argument);
  EXPECT_THROW(kvcanary::allocate_transfer_records<memory_space>("test::negative", -1), std::invalid_argument);
  const Ring after = kvcanary::download_violation_ring(space, ring);
  EXPECT_EQ(after.kernel_run_counter, 0);
  EXPECT_EQ(after.count, 0);
  EXPECT_EQ(kvcanary::download_canary_buffer(space, buffer), two_records());
}

}  // namespace kvcanary_test
