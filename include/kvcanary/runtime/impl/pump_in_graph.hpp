#ifndef KVCANARY_RUNTIME_IMPL_PUMP_IN_GRAPH_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_IN_GRAPH_HPP

// The report pump's snapshot taken inside the forward's own work (PumpSnapshot::InGraph; docs/runtime.md,
// "The report pump"): one small kernel at the end of the forward's last canary pass, captured with it in
// the engine's graph, so that end_step() makes no CUDA call. The kernel writes a pinned host "mailbox"
// the host reads with plain loads:
//
//   slot (kMailboxSlots of them, the forward's sequence number modulo the count):
//     [0]                 sequence word: the device's forward number, 0 while the slot is written
//     [1 + 2g, 2 + 2g]    group g's window [begin, end) of ring rows copied
//     [kHeader, +kSize)   the counter block
//     then per group      `window` rows of kRingFields words (row begin + k at k)
//
// The device numbers its own forwards (a device counter the kernel increments), so a replayed graph needs
// no host value: the window starts at the host's first unreported row per group, which the host keeps in a
// pinned "row cursor" the kernel reads. The sequence word is cleared first and written last, each behind a
// system-scope fence (SystemFence): a reader that sees the same non-zero word before and after its copy
// read a whole slot (a seqlock).

#include <kvcanary/runtime/config.hpp>
#include <kvcanary/runtime/impl/counter_block.hpp>
#include <kvcanary/runtime/impl/system_fence.hpp>
#include <kvcanary/stages/canary_types.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvcanary {
namespace Impl {

struct MailboxLayout {
  static constexpr int kSlots = 4;  // >= 2: the host reads one while the device writes the next
  static constexpr int kHeader = 8;
  std::int64_t window = 0;  // rows per group and slot: min(pump_rows_per_step, ring_capacity)

  KOKKOS_INLINE_FUNCTION std::int64_t rows_offset(int group) const {
    return kHeader + CounterBlock::kSize + group * window * kRingFields;
  }
  KOKKOS_INLINE_FUNCTION std::int64_t slot_words() const { return rows_offset(kGroupKinds); }
};

template <class ExecutionSpace, class Memory, class HostMemory>
struct PumpInGraphKernel {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<std::int64_t*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  static constexpr int kScratchWords = 1 + 2 * kGroupKinds;  // sequence number, then the windows

  Kokkos::View<const std::int64_t*, Memory> block;
  Kokkos::View<std::int64_t, Memory> forward_seq;        // the device's forward count
  Kokkos::View<std::int64_t*, HostMemory> mailbox;       // kSlots * layout.slot_words()
  Kokkos::View<const std::int64_t*, HostMemory> cursor;  // per group: the host's first unreported row
  Kokkos::View<const std::int64_t* [kRingFields], Kokkos::LayoutRight, Memory> rows[kGroupKinds];
  bool on[kGroupKinds] = {};
  int count_index[kGroupKinds] = {};  // each group's ring count in the block (computed on the host)
  MailboxLayout layout;
  std::int64_t capacity = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    Scratch header(team.team_scratch(0), kScratchWords);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      const std::int64_t seq = forward_seq() + 1;
      forward_seq() = seq;
      std::int64_t* slot = mailbox.data() + (seq % MailboxLayout::kSlots) * layout.slot_words();
      *static_cast<volatile std::int64_t*>(slot) = 0;  // a reader copying this slot now sees it change
      SystemFence<ExecutionSpace>::apply();
      header(0) = seq;
      for (int g = 0; g < kGroupKinds; ++g) {
        std::int64_t begin = 0, end = 0;
        if (on[g]) {
          // A count past int64 is a huge unsigned value: the ring is full.
          const auto count = static_cast<std::uint64_t>(block(count_index[g]));
          const std::int64_t held =
              count < static_cast<std::uint64_t>(capacity) ? static_cast<std::int64_t>(count) : capacity;
          const std::int64_t from = *static_cast<const volatile std::int64_t*>(cursor.data() + g);
          begin = from < 0 ? 0 : (from < held ? from : held);
          end = begin + layout.window < held ? begin + layout.window : held;
        }
        header(1 + 2 * g) = slot[1 + 2 * g] = begin;
        header(2 + 2 * g) = slot[2 + 2 * g] = end;
      }
    });
    team.team_barrier();
    std::int64_t* slot = mailbox.data() + (header(0) % MailboxLayout::kSlots) * layout.slot_words();
    std::int64_t items = CounterBlock::kSize;
    for (int g = 0; g < kGroupKinds; ++g) items += (header(2 + 2 * g) - header(1 + 2 * g)) * kRingFields;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, items), [&](const std::int64_t i) {
      if (i < CounterBlock::kSize) {
        slot[MailboxLayout::kHeader + i] = block(i);
        return;
      }
      std::int64_t j = i - CounterBlock::kSize;
      for (int g = 0; g < kGroupKinds; ++g) {
        const std::int64_t span = (header(2 + 2 * g) - header(1 + 2 * g)) * kRingFields;
        if (j < span) {
          slot[layout.rows_offset(g) + j] = rows[g](header(1 + 2 * g) + j / kRingFields, j % kRingFields);
          return;
        }
        j -= span;
      }
    });
    SystemFence<ExecutionSpace>::apply();  // every thread's slot stores before the sequence word
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      *static_cast<volatile std::int64_t*>(slot) = header(0);
      SystemFence<ExecutionSpace>::apply();
    });
  }
};

template <class ExecutionSpace, class Memory, class HostMemory>
void launch_pump_in_graph(const ExecutionSpace& space,
                          const PumpInGraphKernel<ExecutionSpace, Memory, HostMemory>& kernel) {
  using Kernel = PumpInGraphKernel<ExecutionSpace, Memory, HostMemory>;
  Kokkos::parallel_for("kvcanary::pump[in_graph]",
                       typename Kernel::Policy(space, 1, Kokkos::AUTO)
                           .set_scratch_size(0, Kokkos::PerTeam(Kernel::kScratchWords * sizeof(std::int64_t))),
                       kernel);
}

// The host side of the mailbox and the row cursor (both in `HostMemory`: pinned on CUDA).
template <class HostMemory>
class PumpMailbox {
 public:
  struct Slot {
    std::int64_t seq = 0;
    std::array<std::int64_t, 2 * kGroupKinds> windows{};  // [begin, end) per group
    std::array<std::int64_t, CounterBlock::kSize> block{};
    std::array<std::vector<std::int64_t>, kGroupKinds> rows;  // row windows[2g] + k at k * kRingFields
  };

  PumpMailbox() = default;
  explicit PumpMailbox(std::int64_t window) {
    layout_.window = window;
    // Zero-initialised: sequence word 0 is "nothing written yet", the cursors start at row 0.
    mailbox_ = Kokkos::View<std::int64_t*, HostMemory>("kvcanary::Canary::pump_mailbox",
                                                       MailboxLayout::kSlots * layout_.slot_words());
    cursor_ = Kokkos::View<std::int64_t*, HostMemory>("kvcanary::Canary::pump_row_cursor", kGroupKinds);
  }

  const MailboxLayout& layout() const { return layout_; }
  const Kokkos::View<std::int64_t*, HostMemory>& mailbox() const { return mailbox_; }
  const Kokkos::View<std::int64_t*, HostMemory>& cursor() const { return cursor_; }
  Slot empty_slot() const {
    Slot slot;
    for (auto& rows : slot.rows) rows.resize(static_cast<std::size_t>(layout_.window * kRingFields));
    return slot;
  }

  // The host's first unreported row of a group; the device reads it at its next snapshot.
  void set_cursor(int group, std::int64_t row) { *static_cast<volatile std::int64_t*>(cursor_.data() + group) = row; }

  // Copies the newest complete slot with a sequence number above `after` into `out`, each group's rows
  // from `from_row[g]` on (those below were reported): read the word, copy, read the word again; a word
  // that changed (the device began that slot again) is tried once more. False: nothing newer, or torn twice.
  bool read_newest(std::int64_t after, const std::array<std::int64_t, kGroupKinds>& from_row, Slot& out) const {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::int64_t seq = 0;
      const std::int64_t* newest = nullptr;
      for (int s = 0; s < MailboxLayout::kSlots; ++s) {
        const std::int64_t* slot = mailbox_.data() + s * layout_.slot_words();
        const std::int64_t word = load(slot);
        if (word > seq) {
          seq = word;
          newest = slot;
        }
      }
      if (seq <= after) return false;
      std::atomic_thread_fence(std::memory_order_acquire);
      out.seq = seq;
      std::memcpy(out.windows.data(), newest + 1, sizeof(out.windows));
      std::memcpy(out.block.data(), newest + MailboxLayout::kHeader, sizeof(out.block));
      bool whole = true;  // windows a whole slot cannot hold: a torn read
      for (int g = 0; g < kGroupKinds; ++g) {
        const std::int64_t begin = out.windows[2 * g], end = out.windows[2 * g + 1];
        const std::int64_t first = std::max(begin, from_row[g]);
        whole = whole && begin >= 0 && begin <= end && end - begin <= layout_.window;
        if (whole && first < end)
          std::memcpy(out.rows[g].data() + (first - begin) * kRingFields,
                      newest + layout_.rows_offset(g) + (first - begin) * kRingFields,
                      static_cast<std::size_t>((end - first) * kRingFields) * sizeof(std::int64_t));
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (whole && load(newest) == seq) return true;
    }
    return false;
  }

 private:
  static std::int64_t load(const std::int64_t* word) { return *static_cast<const volatile std::int64_t*>(word); }

  MailboxLayout layout_;
  Kokkos::View<std::int64_t*, HostMemory> mailbox_, cursor_;
};

}  // namespace Impl
}  // namespace kvcanary

#endif
