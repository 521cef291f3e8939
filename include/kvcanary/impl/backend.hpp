#ifndef KVCANARY_IMPL_BACKEND_HPP
#define KVCANARY_IMPL_BACKEND_HPP

// The backend trait: which entries paths an execution space offers, and the team shape of the
// portable path. Kokkos core alone decides both, so kvcanary builds on every Kokkos (3.4 to 5.x) with
// or without Kokkos Kernels:
// * a GPU space is one that cannot read HostSpace (Cuda, HIP, SYCL, OpenMPTarget; true with UVM too);
// * a team is 256 threads on a GPU and 1 on the host: Kokkos Kernels' suggested team size at vector
//   length 1 (kk_get_suggested_team_size, 3.4 to 5.0).
// Where the build has Kokkos Kernels (KVCANARY_HAVE_KOKKOSKERNELS, set by CMake) the GPU test is checked
// against Kokkos Kernels' own at compile time. Its execution-space utilities are internal API (renamed
// without deprecation in 4.5), so only the spellings of the versions known here are used.

#include <kvcanary/stages/plan_types.hpp>

#include <Kokkos_Core.hpp>

#ifdef KVCANARY_HAVE_KOKKOSKERNELS
#include <KokkosKernels_ExecSpaceUtils.hpp>
#include <KokkosKernels_config.h>  // KOKKOSKERNELS_VERSION (4.x on; 3.x has none)
#endif

#include <cstdint>

#ifdef KVCANARY_HAVE_KOKKOSKERNELS
// Kokkos Kernels' GPU test, where its spelling is known: kk_is_gpu_exec_space<E>() up to 4.4 (3.x has no
// KOKKOSKERNELS_VERSION), is_gpu_exec_space_v<E> from 4.5 to 5.x. Any other version: no check.
#if !defined(KOKKOSKERNELS_VERSION) || KOKKOSKERNELS_VERSION < 40500
#define KVCANARY_KOKKOSKERNELS_IS_GPU(E) (KokkosKernels::Impl::kk_is_gpu_exec_space<E>())
#elif KOKKOSKERNELS_VERSION < 60000
#define KVCANARY_KOKKOSKERNELS_IS_GPU(E) (KokkosKernels::Impl::is_gpu_exec_space_v<E>)
#endif
#endif

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
struct TeamShape {
  static constexpr bool is_gpu = !Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
#ifdef KVCANARY_KOKKOSKERNELS_IS_GPU
  static_assert(is_gpu == KVCANARY_KOKKOSKERNELS_IS_GPU(ExecutionSpace),
                "kvcanary: the GPU test of impl/backend.hpp disagrees with Kokkos Kernels' for this space");
#endif

  static constexpr int team_size() { return is_gpu ? 256 : 1; }
  // write(): the lanes that share one request's chain (impl/write_portable.hpp): a warp on a GPU.
  static constexpr int write_lanes() { return is_gpu ? 32 : 1; }
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

// A canary stage's launch: one work item per plan entry or request over [0, max(items, 1)), because
// every call moves the ring's run counters, even with a capacity of 0.
template <class ExecutionSpace, class Functor>
void launch_canary_items(const ExecutionSpace& space, const char* label, std::int64_t items, const Functor& functor) {
  static_assert(sizeof(Functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  Kokkos::parallel_for(
      label,
      light_weight(Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, items > 0 ? items : 1)),
      functor);
}

// A verify launch: one entry a work item over [0, entries) (the plan's capacity, or a smaller bound on its
// total that the host knows), of which only the first `active` (a device-side count) are checked. The launch is
// bounded by what the space runs at once, so that a capacity far above the batch (an engine's: 3 x its pool
// slots by default) costs at most one wave of idle work items, not one an entry of the capacity
// (docs/perf-notes.md, "The verify launch is sized by the capacity"). Launched
// item t takes entries t, t + launched, ... on a GPU (neighbouring items read neighbouring entries) and a
// contiguous run on the host, and stops at its first inactive entry: Functor::item(i) checks entry i and
// returns whether it was active (never again for a larger i). Entry 0 is item 0's first, so the call's run
// counters move as with one work item an entry.
template <class Functor, bool Contiguous>
struct BoundedEntries {
  Functor functor;
  std::int64_t entries;   // the capacity or a bound on the total below it, at least 1
  std::int64_t launched;  // 1 <= launched <= entries

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t t) const {
    if constexpr (Contiguous) {
      const std::int64_t run = entries / launched + (entries % launched != 0 ? 1 : 0);
      const std::int64_t end = entries - t * run < run ? entries : t * run + run;
      for (std::int64_t i = t * run; i < end; ++i)
        if (!functor.item(i)) return;
    } else {
      for (std::int64_t i = t; i < entries; i += launched)
        if (!functor.item(i)) return;
    }
  }
};

template <class ExecutionSpace, class Functor>
void launch_canary_entries(const ExecutionSpace& space, const char* label, std::int64_t bound, const Functor& functor) {
  constexpr bool is_gpu = TeamShape<ExecutionSpace>::is_gpu;
  const std::int64_t entries = bound > 0 ? bound : 1;
  const std::int64_t wave = static_cast<std::int64_t>(space.concurrency()) * (is_gpu ? 1 : 4);
  const std::int64_t launched = wave < 1 ? 1 : (wave < entries ? wave : entries);
  launch_canary_items(space, label, launched, BoundedEntries<Functor, !is_gpu>{functor, entries, launched});
}

// Whether a raw CUDA persistent kernel exists for a space: entries_cuda.hpp specializes it for Kokkos::Cuda.
template <class ExecutionSpace>
struct EntriesBackend {
  static constexpr bool has_cuda_persistent = false;
};

// Whether write() has a raw CUDA kernel for a space: write_cuda.hpp specializes it for Kokkos::Cuda.
template <class ExecutionSpace>
struct WriteBackend {
  static constexpr bool has_cuda = false;
};

}  // namespace Impl
}  // namespace kvcanary

#endif
