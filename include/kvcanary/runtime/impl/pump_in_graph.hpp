#ifndef KVCANARY_RUNTIME_IMPL_PUMP_IN_GRAPH_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_IN_GRAPH_HPP

// The report pump's snapshot taken inside the forward's own work (PumpSnapshot::InGraph; docs/runtime.md,
// "The report pump"): one small kernel at the end of the forward's last canary pass, captured with it in
// the engine's graph, so that end_step() makes no CUDA call. The kernel writes a pinned host "mailbox"
// the host reads with plain loads:
//
//   slot (kSlots of them, the forward's sequence number modulo the count):
//     [0]                 sequence word: the device's forward number
//     [1 + 2g, 2 + 2g]    group g's window [begin, end) of ring rows copied
//     [kChecksum]         the checksum of every other word the slot holds (mailbox_word_hash() summed)
//     [kHeader, +kSize)   the counter block
//     then per group      `window` rows of kRingFields words (row begin + k at k)
//
// Nothing it reads or orders crosses PCIe: the device numbers its own forwards and keeps its own row cursor
// per group (rows already mailed, in device memory), so a replayed graph needs no host value and the kernel
// reads no host memory; its stores are plain (posted) and unordered, with no system-scope fence. The host
// takes a slot only when its sequence word is the one it expects next and the checksum over what it copied
// matches: a slot still arriving, or being written again, fails it. Slots are taken in order; one the
// device overwrote before the host came (the host more than kSlots forwards behind) leaves rows only the
// ring holds, which the host then copies synchronously (Canary::read_in_graph()).

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/runtime/config.hpp>
#include <kvcanary/runtime/impl/counter_block.hpp>
#include <kvcanary/stages/canary_types.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kvcanary {
namespace Impl {

struct MailboxLayout {
  static constexpr int kSlots = 8;  // how far the host may trail the device before it copies synchronously
  static constexpr int kSeq = 0;
  static constexpr int kChecksum = 1 + 2 * kGroupKinds;
  static constexpr int kHeader = 8;
  static_assert(kChecksum < kHeader, "the header holds the sequence word, the windows and the checksum");
  std::int64_t window = 0;  // rows per group and slot: min(pump_rows_per_step, ring_capacity)

  KOKKOS_INLINE_FUNCTION std::int64_t rows_offset(int group) const {
    return kHeader + CounterBlock::kSize + group * window * kRingFields;
  }
  KOKKOS_INLINE_FUNCTION std::int64_t slot_words() const { return rows_offset(kGroupKinds); }
};

// A slot's checksum is the sum of this over its words but the checksum's own (order-free: the team's threads
// add theirs in any order). The word's index is mixed in, so that a word in the wrong place fails it too.
KOKKOS_INLINE_FUNCTION std::uint64_t mailbox_word_hash(std::int64_t index, std::int64_t value) {
  return splitmix64(as_uint64(value) ^ (as_uint64(index) * 0x9E3779B97F4A7C15ull));
}

// The snapshot's device side, for whichever kernel takes it: the in-graph kernel below (a Kokkos team) or, on
// CUDA, the last block of the forward's last write (pump_in_write.hpp). Raw pointers, so that it rides
// in a kernel's arguments; the Canary keeps the Views alive. Its threads call open(k) for each of kOpenItems
// items (any threads; then a barrier), store() for each of words() items (any thread, any order; the hashes
// they return summed), then close() (one thread).
struct MailboxWriter {
  static constexpr int kHeaderWords = MailboxLayout::kChecksum;  // the sequence number, then the windows
  static constexpr int kOpenItems = 1 + kGroupKinds;             // the forward's number, then each group's window

  const std::int64_t* block = nullptr;         // the counter block
  std::int64_t* forward_seq = nullptr;         // the device's forward count
  std::int64_t* mailed = nullptr;              // per group: the rows below it went into a slot (always set)
  std::int64_t* mailbox = nullptr;             // kSlots * layout.slot_words(), in host memory
  // Each group's ring rows ([capacity][kRingFields]; null: off), as a table in device memory (MailRowsTable): an
  // array inside the writer, indexed by the group at run time, made the compiler copy the whole kernel argument
  // to local memory at the entry of every raw CUDA kernel that carries a writer (ptxas: 104 bytes in the plan
  // kernels, 96 in the write kernels; docs/perf-notes.md, "The rider's stack frame").
  const std::int64_t* const* rows = nullptr;  // null: no group's rows are mailed
  MailboxLayout layout;
  std::int64_t capacity = 0;

  // Item 0 numbers the forward; item 1 + g opens group g's window at the device's cursor, which moves past it
  // (with move_cursor; else the caller moves it with advance() once the window is final).
  // The items touch disjoint words and each loads before it stores, so that the items of one snapshot, taken
  // by as many threads, cost one round trip to device memory where one thread doing them all paid one per load
  // (its loads could not be hoisted above its stores, which may alias them).
  KOKKOS_INLINE_FUNCTION void open(int item, std::int64_t* header, bool move_cursor = true) const {
    if (item == 0) {
      const std::int64_t seq = *forward_seq + 1;
      *forward_seq = seq;
      header[MailboxLayout::kSeq] = seq;
      return;
    }
    const int g = item - 1;
    // The group's count and cursor are loaded before its rows' pointer is tested, not after (every writer has
    // both words; a group without rows uses neither), so that the three loads are in flight together: one round
    // trip where the test first made two (PTX checked; a count used only under the test had its load sunk below
    // it, so in_ring is computed whatever the test says). A group without rows holds none: its window is empty.
    const auto in_ring = static_cast<std::int64_t>(rows_held(block[CounterBlock::count_index(g)], capacity));
    const std::int64_t from = mailed[g];
    const bool mails = mails_rows(g);  // after the two loads above are issued
    const std::int64_t held = mails ? in_ring : 0;
    const std::int64_t begin = from < 0 ? 0 : (from < held ? from : held);
    const std::int64_t end = begin + layout.window < held ? begin + layout.window : held;
    if (mails && move_cursor) mailed[g] = end;
    header[1 + 2 * g] = begin;
    header[2 + 2 * g] = end;
  }

  // Whether group g's ring rows are mailed (its window and cursor are used).
  KOKKOS_INLINE_FUNCTION bool mails_rows(int g) const { return rows != nullptr && rows[g] != nullptr; }

  // Group g's cursor past its window (after open() without move_cursor).
  KOKKOS_INLINE_FUNCTION void advance(int g, const std::int64_t* header) const {
    if (mails_rows(g)) mailed[g] = header[2 + 2 * g];
  }

  // Where row k of group g's ring says it is whole: its fail-reason bits, stored last (DeviceRing::push).
  KOKKOS_INLINE_FUNCTION const std::int64_t* row_bits(int g, std::int64_t k) const {
    return rows[g] + k * kRingFields + kRowFailReasonBits;
  }

  KOKKOS_INLINE_FUNCTION std::int64_t* slot(const std::int64_t* header) const {
    return mailbox + (header[MailboxLayout::kSeq] % MailboxLayout::kSlots) * layout.slot_words();
  }

  // The counter block, then each group's window of rows.
  KOKKOS_INLINE_FUNCTION std::int64_t words(const std::int64_t* header) const {
    std::int64_t items = CounterBlock::kSize;
    for (int g = 0; g < kGroupKinds; ++g) items += (header[2 + 2 * g] - header[1 + 2 * g]) * kRingFields;
    return items;
  }

  // Stores word i < CounterBlock::kSize of the counter block, read by the caller, in its place; returns its
  // share of the checksum.
  KOKKOS_INLINE_FUNCTION std::uint64_t put(std::int64_t i, const std::int64_t* header, std::int64_t value) const {
    const std::int64_t at = MailboxLayout::kHeader + i;
    slot(header)[at] = value;
    return mailbox_word_hash(at, value);
  }

  // Stores item i in its place; returns its share of the checksum.
  KOKKOS_INLINE_FUNCTION std::uint64_t store(std::int64_t i, const std::int64_t* header) const {
    if (i < CounterBlock::kSize) return put(i, header, block[i]);
    std::int64_t at = MailboxLayout::kHeader + i, value = 0, j = i - CounterBlock::kSize;
    for (int g = 0; g < kGroupKinds; ++g) {
      const std::int64_t span = (header[2 + 2 * g] - header[1 + 2 * g]) * kRingFields;
      if (j < span) {
        at = layout.rows_offset(g) + j;
        value = rows[g][header[1 + 2 * g] * kRingFields + j];
        break;
      }
      j -= span;
    }
    slot(header)[at] = value;
    return mailbox_word_hash(at, value);
  }

  // One thread, after every store(): the header and the checksum (`sum`: the stores' hashes).
  KOKKOS_INLINE_FUNCTION void close(const std::int64_t* header, std::uint64_t sum) const {
    std::int64_t* out = slot(header);
    for (int w = 0; w < kHeaderWords; ++w) {
      out[w] = header[w];
      sum += mailbox_word_hash(w, header[w]);
    }
    out[MailboxLayout::kChecksum] = as_int64(sum);
  }
};

// MailboxWriter::rows as one allocation: a group's entry at its index (GroupKind).
struct MailRowsTable {
  const std::int64_t* rows[kGroupKinds] = {};
};

// The snapshot as a kernel of its own (one team), after the forward's last canary pass.
template <class ExecutionSpace>
struct PumpInGraphKernel {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<std::int64_t*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

  MailboxWriter writer;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    Scratch header(team.team_scratch(0), MailboxWriter::kHeaderWords);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, MailboxWriter::kOpenItems),
                         [&](const int item) { writer.open(item, header.data()); });
    team.team_barrier();
    std::uint64_t sum = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, writer.words(header.data())),
        [&](const std::int64_t i, std::uint64_t& partial) { partial += writer.store(i, header.data()); }, sum);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { writer.close(header.data(), sum); });
  }
};

template <class ExecutionSpace>
void launch_pump_in_graph(const ExecutionSpace& space, const PumpInGraphKernel<ExecutionSpace>& kernel) {
  using Kernel = PumpInGraphKernel<ExecutionSpace>;
  Kokkos::parallel_for("kvcanary::pump[in_graph]",
                       typename Kernel::Policy(space, 1, Kokkos::AUTO)
                           .set_scratch_size(0, Kokkos::PerTeam(MailboxWriter::kHeaderWords * sizeof(std::int64_t))),
                       kernel);
}

// The host side of the mailbox (in `HostMemory`: pinned on CUDA).
template <class HostMemory>
class PumpMailbox {
 public:
  struct Slot {
    std::int64_t seq = 0;
    std::array<std::int64_t, 2 * kGroupKinds> windows{};  // [begin, end) per group
    std::array<std::int64_t, CounterBlock::kSize> block{};
    std::array<std::vector<std::int64_t>, kGroupKinds> rows;  // row windows[2g] + k at k * kRingFields
  };
  enum class Read { Taken, NotYet, Overwritten };

  PumpMailbox() = default;
  explicit PumpMailbox(std::int64_t window) {
    layout_.window = window;
    // Zeroed by this thread, not by a Kokkos kernel of the default host space (OpenMP refuses a thread other than
    // the one that started it: a serial Canary built on a worker): sequence word 0 is "nothing written yet".
    mailbox_ = Kokkos::View<std::int64_t*, HostMemory>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kvcanary::Canary::pump_mailbox"),
        MailboxLayout::kSlots * layout_.slot_words());
    std::fill_n(mailbox_.data(), mailbox_.extent(0), std::int64_t(0));
  }

  const MailboxLayout& layout() const { return layout_; }
  const Kokkos::View<std::int64_t*, HostMemory>& mailbox() const { return mailbox_; }
  Slot empty_slot() const {
    Slot slot;
    for (auto& rows : slot.rows) rows.resize(static_cast<std::size_t>(layout_.window * kRingFields));
    return slot;
  }

  // The highest sequence word of any slot (0: none written).
  std::int64_t newest() const {
    std::int64_t seq = 0;
    for (int s = 0; s < MailboxLayout::kSlots; ++s) seq = std::max(seq, load(slot_of(s)));
    return seq;
  }

  // Copies the slot of forward `seq` into `out` when it is whole: its sequence word is `seq` and the checksum
  // of what was copied matches. NotYet: not written yet, or still arriving; Overwritten: the device has
  // written a later forward there.
  Read read(std::int64_t seq, Slot& out) const {
    const std::int64_t* slot = slot_of(static_cast<int>(seq % MailboxLayout::kSlots));
    const std::int64_t word = load(slot);
    if (word < seq) return Read::NotYet;
    if (word > seq) return Read::Overwritten;
    std::atomic_thread_fence(std::memory_order_acquire);
    std::array<std::int64_t, MailboxLayout::kHeader> header;
    std::memcpy(header.data(), slot, sizeof(header));
    std::memcpy(out.block.data(), slot + MailboxLayout::kHeader, sizeof(out.block));
    std::uint64_t sum = 0;
    for (int w = 0; w < MailboxLayout::kHeader; ++w)
      if (w != MailboxLayout::kChecksum) sum += mailbox_word_hash(w, header[static_cast<std::size_t>(w)]);
    for (int i = 0; i < CounterBlock::kSize; ++i)
      sum += mailbox_word_hash(MailboxLayout::kHeader + i, out.block[static_cast<std::size_t>(i)]);
    bool whole = header[MailboxLayout::kSeq] == seq;
    for (int g = 0; g < kGroupKinds && whole; ++g) {
      const std::int64_t begin = header[1 + 2 * g], end = header[2 + 2 * g];
      whole = begin >= 0 && begin <= end && end - begin <= layout_.window;  // else a torn window: not trusted
      if (!whole) break;
      const std::int64_t words = (end - begin) * kRingFields;
      std::int64_t* rows = out.rows[static_cast<std::size_t>(g)].data();
      std::memcpy(rows, slot + layout_.rows_offset(g), static_cast<std::size_t>(words) * sizeof(std::int64_t));
      for (std::int64_t j = 0; j < words; ++j) sum += mailbox_word_hash(layout_.rows_offset(g) + j, rows[j]);
      out.windows[static_cast<std::size_t>(2 * g)] = begin;
      out.windows[static_cast<std::size_t>(2 * g + 1)] = end;
    }
    if (whole && as_int64(sum) == header[MailboxLayout::kChecksum]) {
      out.seq = seq;
      return Read::Taken;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    return load(slot) > seq ? Read::Overwritten : Read::NotYet;
  }

 private:
  const std::int64_t* slot_of(int s) const { return mailbox_.data() + s * layout_.slot_words(); }
  static std::int64_t load(const std::int64_t* word) { return *static_cast<const volatile std::int64_t*>(word); }

  MailboxLayout layout_;
  Kokkos::View<std::int64_t*, HostMemory> mailbox_;
};

// How many forwards the newest snapshot may trail the forwards end_step() was told of, at a health
// check, before the check calls it a forward that ran without the canary: none where the passes ran before
// end_step() returned (the host backends); on CUDA the device may still be a few forwards behind the host
// (an engine that queues the next step before it waits), which flush() (after a fence) checks exactly.
template <class ExecutionSpace>
struct PumpLagSlack {
  static constexpr std::int64_t value = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct PumpLagSlack<Kokkos::Cuda> {
  static constexpr std::int64_t value = 16;
};
#endif

}  // namespace Impl
}  // namespace kvcanary

#endif
