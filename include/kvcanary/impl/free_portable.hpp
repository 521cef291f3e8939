#ifndef KVCANARY_IMPL_FREE_PORTABLE_HPP
#define KVCANARY_IMPL_FREE_PORTABLE_HPP

// The free stage (SPEC-CANARY §11.2) as one Kokkos team kernel: a team stamps a run of the freed slots
// and adds its count to slot_run_counter once (one atomic per team, not per slot).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace, class Index>
struct FreeFunctor {
  Kokkos::View<const Index*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> slots;
  Kokkos::View<const std::int64_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> epoch;  // null: epoch 0
  DeviceBuffer<MemorySpace> buffer;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;
  std::int64_t items_per_team = 1;

  std::int64_t num_items() const { return static_cast<std::int64_t>(slots.extent(0)); }

  // One slot: stamp the FREED record, keeping position and chain; 1 when stamped.
  KOKKOS_INLINE_FUNCTION std::int64_t stamp(std::int64_t i, std::int64_t epoch_value) const {
    const std::int64_t slot = slots(i);
    if (slot < 0) return 0;  // padding
    if (slot >= buffer.num_slots) {
      ring.push(kind, slot, -1, -1, -1, -1, epoch_value, kOutOfRange);
      return 0;
    }
    buffer.field(slot, kToken) = kFreedToken;
    buffer.field(slot, kRealKvHash) = epoch_value;
    return 1;
  }

  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t n = static_cast<std::int64_t>(slots.extent(0));
    const std::int64_t first = static_cast<std::int64_t>(team.league_rank()) * items_per_team;
    const std::int64_t last = first + items_per_team < n ? first + items_per_team : n;
    const std::int64_t epoch_value = epoch.data() != nullptr ? epoch() : 0;
    std::int64_t stamped = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, first, last > first ? last : first),
        [&](const std::int64_t i, std::int64_t& count) { count += stamp(i, epoch_value); }, stamped);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { ring.add_runs(stamped, team.league_rank() == 0 ? 1 : 0); });
  }
};

template <class ExecutionSpace, class MemorySpace, class Index>
void launch_free_portable(const ExecutionSpace& space, FreeFunctor<MemorySpace, Index> functor) {
  static_assert(sizeof(functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  using Shape = TeamShape<ExecutionSpace>;
  functor.items_per_team = Shape::is_gpu ? 4 * Shape::team_size() : 4096;
  const std::int64_t n = functor.num_items();
  const std::int64_t league = n > 0 ? (n + functor.items_per_team - 1) / functor.items_per_team : 1;
  Kokkos::parallel_for("kvcanary::free[portable]",
                       light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league), Shape::team_size())),
                       functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
