// The in-graph pump's mailbox (runtime/impl/pump_in_graph.hpp) on its own: the snapshot kernel's slots as
// the host reads them — taken only whole (the checksum catches a word still arriving, or one in the wrong
// place), in order, and told apart from a slot the device has already written again — and the device's own
// row cursor, which mails each ring row once.

#include <kvcanary/runtime/impl/pump_in_graph.hpp>
#include <kvcanary/runtime/impl/side_channel.hpp>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace kvcanary_test {

class PumpMailbox : public ::testing::Test {
 protected:
  using Space = KVCANARY_TEST_EXECSPACE;
  using Memory = typename Space::memory_space;
  using HostMemory = typename kvcanary::Impl::SideChannel<Space>::host_space;
  using Layout = kvcanary::Impl::MailboxLayout;
  using Box = kvcanary::Impl::PumpMailbox<HostMemory>;
  using Read = typename Box::Read;
  static constexpr int kFields = kvcanary::kRingFields;
  static constexpr std::int64_t kWindow = 3, kCapacity = 16;

  Space space;
  Box box{kWindow};
  kvcanary::Impl::PumpInGraphKernel<Space> kernel;
  Kokkos::View<std::int64_t*, Memory> block{"test::block", kvcanary::Impl::CounterBlock::kSize};
  Kokkos::View<std::int64_t* [kFields], Kokkos::LayoutRight, Memory> rows { "test::rows", kCapacity };
  Kokkos::View<std::int64_t, Memory> seq{"test::seq"};
  Kokkos::View<std::int64_t*, Memory> mailed{"test::mailed", kvcanary::kGroupKinds};
  Kokkos::View<kvcanary::Impl::MailRowsTable, Memory> table{"test::rows_table"};
  static constexpr int kCountIndex = kvcanary::Impl::CounterBlock::count_index(1);

  void SetUp() override {
    // Group 1 on (count at its base), rows r with fields 100 r + f; every block word distinct.
    auto host_rows = Kokkos::create_mirror_view(rows);
    for (std::int64_t r = 0; r < kCapacity; ++r)
      for (int f = 0; f < kFields; ++f) host_rows(r, f) = 100 * r + f;
    Kokkos::deep_copy(rows, host_rows);
    auto& w = kernel.writer;
    w.block = block.data();
    w.forward_seq = seq.data();
    w.mailed = mailed.data();
    w.mailbox = box.mailbox().data();
    auto host_table = Kokkos::create_mirror_view(table);
    host_table().rows[1] = rows.data();
    Kokkos::deep_copy(table, host_table);
    w.rows = table.data()->rows;
    w.layout = box.layout();
    w.capacity = kCapacity;
  }

  // One forward's snapshot with the group's ring holding `count` rows.
  void snapshot(std::int64_t count) {
    auto host_block = Kokkos::create_mirror_view(block);
    for (int i = 0; i < kvcanary::Impl::CounterBlock::kSize; ++i) host_block(i) = 7 * i + 1;
    host_block(kCountIndex) = count;
    Kokkos::deep_copy(block, host_block);
    kvcanary::Impl::launch_pump_in_graph(space, kernel);
    space.fence();
  }

  std::int64_t& word(std::int64_t seq, std::int64_t index) {
    return box.mailbox()(static_cast<int>(seq % Layout::kSlots) * box.layout().slot_words() + index);
  }
};

TEST_F(PumpMailbox, TakesAWholeSlotWithItsWindowAndTheBlock) {
  auto slot = box.empty_slot();
  EXPECT_EQ(box.read(1, slot), Read::NotYet);
  snapshot(5);
  ASSERT_EQ(box.read(1, slot), Read::Taken);
  EXPECT_EQ(slot.seq, 1);
  EXPECT_EQ(slot.windows[2], 0);  // group 1: rows [0, 3), the window's size
  EXPECT_EQ(slot.windows[3], 3);
  EXPECT_EQ(slot.windows[0], slot.windows[1]);  // group 0 is off: an empty window
  EXPECT_EQ(slot.block[kCountIndex], 5);
  EXPECT_EQ(slot.block[3], 22);
  for (std::int64_t k = 0; k < 3 * kFields; ++k) EXPECT_EQ(slot.rows[1][k], 100 * (k / kFields) + k % kFields) << k;
  EXPECT_EQ(box.read(2, slot), Read::NotYet);
}

// A writer with no rows' table (a benchmark's, perf_write_mail.hpp) mails the counter block and empty windows.
TEST_F(PumpMailbox, AWriterWithNoRowsTableMailsTheBlockAndEmptyWindows) {
  kernel.writer.rows = nullptr;
  auto slot = box.empty_slot();
  snapshot(5);
  ASSERT_EQ(box.read(1, slot), Read::Taken);
  for (int g = 0; g < kvcanary::kGroupKinds; ++g) EXPECT_EQ(slot.windows[2 * g], slot.windows[2 * g + 1]) << g;
  EXPECT_EQ(slot.block[kCountIndex], 5);
  EXPECT_EQ(slot.block[3], 22);
}

TEST_F(PumpMailbox, TheDevicesCursorMailsEachRowOnce) {
  auto slot = box.empty_slot();
  std::vector<std::int64_t> mailed;
  const std::int64_t counts[] = {5, 5, 5, 9, 9, 9, 9};  // 3 + 2 + 0 rows, then 3 + 1 + 0 + 0
  std::int64_t seq = 0;
  for (const std::int64_t count : counts) {
    snapshot(count);
    ASSERT_EQ(box.read(++seq, slot), Read::Taken);
    for (std::int64_t r = slot.windows[2]; r < slot.windows[3]; ++r)
      mailed.push_back(slot.rows[1][(r - slot.windows[2]) * kFields] / 100);
    EXPECT_LE(slot.windows[3] - slot.windows[2], kWindow);
  }
  EXPECT_EQ(mailed, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(PumpMailbox, AWordStillArrivingOrMisplacedFailsTheChecksum) {
  auto slot = box.empty_slot();
  snapshot(5);
  const std::int64_t row_word = box.layout().rows_offset(1) + kFields + 2;  // row 1, field 2
  for (const std::int64_t index :
       {std::int64_t(Layout::kHeader + 3), row_word, std::int64_t(Layout::kChecksum), std::int64_t(2)}) {
    SCOPED_TRACE(index);
    const std::int64_t kept = word(1, index);
    word(1, index) = kept ^ 0x40;  // the slot's previous content, say
    EXPECT_EQ(box.read(1, slot), Read::NotYet);
    word(1, index) = kept;
    EXPECT_EQ(box.read(1, slot), Read::Taken);
  }
  // Two words swapped: each value is right, but not where it belongs.
  const std::int64_t a = Layout::kHeader + 4, b = Layout::kHeader + 5;
  std::swap(word(1, a), word(1, b));
  EXPECT_EQ(box.read(1, slot), Read::NotYet);
  std::swap(word(1, a), word(1, b));
  // A window a whole slot cannot hold is not trusted, whatever the checksum says.
  const std::int64_t end = word(1, 4);
  word(1, 4) = kWindow + 1;
  EXPECT_EQ(box.read(1, slot), Read::NotYet);
  word(1, 4) = end;
  EXPECT_EQ(box.read(1, slot), Read::Taken);
}

TEST_F(PumpMailbox, ASlotWrittenAgainReadsAsOverwritten) {
  auto slot = box.empty_slot();
  for (int k = 0; k <= Layout::kSlots; ++k) snapshot(0);  // forwards 1 .. kSlots + 1
  EXPECT_EQ(box.read(1, slot), Read::Overwritten);
  EXPECT_EQ(box.read(2, slot), Read::Taken);
  EXPECT_EQ(box.read(Layout::kSlots + 1, slot), Read::Taken);
  EXPECT_EQ(box.newest(), Layout::kSlots + 1);
  // A later forward's sequence word over a slot whose other words are the old forward's: not yet whole.
  word(Layout::kSlots + 2, 0) = Layout::kSlots + 2;
  EXPECT_EQ(box.read(Layout::kSlots + 2, slot), Read::NotYet);
}

}  // namespace kvcanary_test
