#ifndef KVCANARY_IMPL_TRANSFER_PORTABLE_HPP
#define KVCANARY_IMPL_TRANSFER_PORTABLE_HPP

// The stages that move records (SPEC-CANARY §12.3) as one Kokkos team kernel each: a team moves a run of
// the listed entries and adds its count to slot_run_counter once (one atomic per team, not per entry).
// export packs buffer -> transfer records, import places transfer records -> buffer; relocate is the two
// launches in order through the caller's staging records (a snapshot: all reads before any write).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
using RecordsHandle = Kokkos::View<std::int64_t* [kRecordFields], Kokkos::LayoutRight, MemorySpace,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class MemorySpace, class Index>
using SlotsHandle = Kokkos::View<const Index*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

enum class TransferDirection : int { Export = 0, Import = 1 };

template <class MemorySpace, class Index>
struct TransferFunctor {
  SlotsHandle<MemorySpace, Index> slots;    // the slots read (export) or written (import)
  SlotsHandle<MemorySpace, Index> sources;  // relocate's import half: a pair whose source is bad is skipped
  RecordsHandle<MemorySpace> records;       // the packed records (out, in or staging); only [0, n) touched
  DeviceBuffer<MemorySpace> buffer;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;
  TransferDirection direction = TransferDirection::Export;
  bool count_kernel = true;   // relocate counts its call once, in its second half
  bool count_stores = true;   // export's entries count, except as relocate's first half
  std::int64_t items_per_team = 1;

  KOKKOS_INLINE_FUNCTION std::int64_t num_items() const { return static_cast<std::int64_t>(slots.extent(0)); }

  // Export one entry; 1 when packed from a slot.
  KOKKOS_INLINE_FUNCTION std::int64_t pack(std::int64_t i) const {
    const std::int64_t slot = slots(i);
    if (slot >= 0 && slot < buffer.num_slots) {
      for (int f = 0; f < kRecordFields; ++f) records(i, f) = buffer.field(slot, f);
      return 1;
    }
    for (int f = 0; f < kRecordFields; ++f) records(i, f) = 0;  // padding: a never-written record travels
    if (slot >= buffer.num_slots) ring.push(kind, slot, -1, -1, -1, -1, i, kOutOfRange);
    return 0;
  }

  // Import one entry verbatim (never re-stamped); 1 when stored.
  KOKKOS_INLINE_FUNCTION std::int64_t place(std::int64_t i) const {
    if (sources.data() != nullptr) {
      const std::int64_t source = sources(i);
      if (source < 0 || source >= buffer.num_slots) return 0;  // the export half skipped it (and said so)
    }
    const std::int64_t slot = slots(i);
    if (slot < 0) return 0;
    if (slot >= buffer.num_slots) {
      ring.push(kind, slot, records(i, kPosition), records(i, kToken), -1, records(i, kPrevHash), i, kOutOfRange);
      return 0;
    }
    for (int f = 0; f < kRecordFields; ++f) buffer.field(slot, f) = records(i, f);
    return 1;
  }

  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t n = num_items();
    const std::int64_t first = static_cast<std::int64_t>(team.league_rank()) * items_per_team;
    const std::int64_t last = first + items_per_team < n ? first + items_per_team : n;
    std::int64_t moved = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, first, last > first ? last : first),
        [&](const std::int64_t i, std::int64_t& count) {
          count += direction == TransferDirection::Export ? pack(i) : place(i);
        },
        moved);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      ring.add_runs(count_stores ? moved : 0, count_kernel && team.league_rank() == 0 ? 1 : 0);
    });
  }
};

template <class ExecutionSpace, class MemorySpace, class Index>
void launch_transfer_portable(const ExecutionSpace& space, const char* label, TransferFunctor<MemorySpace, Index> functor) {
  static_assert(sizeof(functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  using Shape = TeamShape<ExecutionSpace>;
  functor.items_per_team = Shape::is_gpu ? 4 * Shape::team_size() : 4096;
  const std::int64_t n = functor.num_items();
  const std::int64_t league = n > 0 ? (n + functor.items_per_team - 1) / functor.items_per_team : 1;
  Kokkos::parallel_for(label, light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league), Shape::team_size())),
                       functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
