#ifndef KVCANARY_IMPL_BACKEND_HPP
#define KVCANARY_IMPL_BACKEND_HPP

// The backend trait: which entries paths an execution space offers, and the team shape of the
// portable path. Kokkos Kernels' execution-space utilities supply the GPU test and the team size
// heuristic (256 threads on CUDA/HIP, 1 on host backends); this is the only file that uses them.

#include <kvcanary/plan_types.hpp>

#include <KokkosKernels_ExecSpaceUtils.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
struct TeamShape {
  static constexpr bool is_gpu = KokkosKernels::Impl::kk_is_gpu_exec_space<ExecutionSpace>();

  static int team_size() {
    return KokkosKernels::Impl::kk_get_suggested_team_size(
        1, KokkosKernels::Impl::kk_get_exec_space_type<ExecutionSpace>());
  }
  // Entries one team expands before it moves to its next tile: 8 per thread on GPUs, where a wider
  // tile amortizes the owner search; on the host a team is one thread and a tile a cache-friendly run.
  static std::int64_t tile_entries() { return is_gpu ? 8 * team_size() : 4096; }
  // Upper bound on the league: enough teams to fill the machine a few times over.
  static std::int64_t max_league_size(const ExecutionSpace& space) {
    const std::int64_t teams = static_cast<std::int64_t>(space.concurrency()) / team_size();
    return (teams > 0 ? teams : 1) * (is_gpu ? 1 : 4);
  }
};

// Launch a kernel with its arguments passed by value (up to 4 KB), never through constant memory:
// Kokkos 3.4 sends functors of 512 bytes or more through constant memory with an event
// synchronization, which breaks CUDA graph capture (KOKKOS34-CUDA.md, rule 4).
template <class Policy>
auto light_weight(const Policy& policy) {
  return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
}
constexpr std::size_t kMaxKernelArgumentBytes = 2048;  // half of CUDA's 4 KB, room for the policy

// Whether a raw CUDA persistent kernel exists for a space: entries_cuda.hpp specializes it for Kokkos::Cuda.
template <class ExecutionSpace>
struct EntriesBackend {
  static constexpr bool has_cuda_persistent = false;
};

}  // namespace Impl
}  // namespace kvcanary

#endif
