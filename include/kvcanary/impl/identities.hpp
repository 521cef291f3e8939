#ifndef KVCANARY_IMPL_IDENTITIES_HPP
#define KVCANARY_IMPL_IDENTITIES_HPP

// The plan's identity arrays (SPEC-CANARY §11.7): verify_identities[i] = req_identities[r] for every
// entry i of batch row r (only when the entries were written: enable == 1), write_identities[r] =
// req_identities[r] for r < bs. A launch of its own after the entries, from the workspace's verify_offsets,
// so that a plan without identities runs exactly the kernels it ran before (no work, not even a branch).

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/row_rules.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace, class MemorySpace>
struct IdentitiesFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecutionSpace>::member_type;
  using Array = Kokkos::View<std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  DeviceVector<MemorySpace> req_identities;
  Array verify_identities, write_identities;
  DeviceOutputs<MemorySpace> out;
  std::int64_t batch_size;
  bool store_verify_identities;  // false for plan_and_verify(), whose plan stores no verify entry

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    // The entries exist only when they fit (SPEC §4: on overflow no verify array is touched).
    const bool entries = store_verify_identities && out.verify_offsets(batch_size) <= out.verify_capacity();
    for (std::int64_t r = team.league_rank(); r < batch_size; r += team.league_size()) {
      const std::int64_t identity = req_identities(r);
      Kokkos::single(Kokkos::PerTeam(team), [&]() { write_identities(r) = identity; });
      if (!entries) continue;
      const std::int64_t begin = out.verify_offsets(r), end = out.verify_offsets(r + 1);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, begin, end),
                           [&](const std::int64_t i) { verify_identities(i) = identity; });
    }
  }
};

// Reads the workspace's verify_offsets, which every plan path leaves there (the portable scan, CUDA's
// rows kernel, and the single-launch kernels' block 0), stream-ordered before this launch. Rerunning the
// scan instead cost two more graph nodes per plan on CUDA (step_id/decode_bs1 at 518c7be: 6 nodes, 26.4 µs
// against 10.5 µs without identities; docs/PERFORMANCE.md).
template <class ExecutionSpace, class MemorySpace>
void launch_identities(const ExecutionSpace& space, const PlanInputs<MemorySpace>& inputs,
                       const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
                       const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size,
                       bool store_verify_identities = true) {
  using Functor = IdentitiesFunctor<ExecutionSpace, MemorySpace>;
  static_assert(sizeof(Functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  using Array = typename Functor::Array;
  const auto& ids = *inputs.req_identities;
  const auto& verify_ids = *verify_plan.verify_identities;
  const auto& write_ids = *write_plan.write_identities;
  const Functor functor{DeviceVector<MemorySpace>(ids.data(), ids.extent(0)),
                        Array(verify_ids.data(), verify_ids.extent(0)),
                        Array(write_ids.data(), write_ids.extent(0)),
                        out,
                        batch_size,
                        store_verify_identities};
  constexpr std::int64_t kMaxLeague = 65535;
  const std::int64_t league = batch_size < 1 ? 1 : (batch_size < kMaxLeague ? batch_size : kMaxLeague);
  Kokkos::parallel_for("kvcanary::plan[identities]",
                       light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league),
                                                                       TeamShape<ExecutionSpace>::team_size())),
                       functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
