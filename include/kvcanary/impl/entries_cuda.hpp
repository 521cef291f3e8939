#ifndef KVCANARY_IMPL_ENTRIES_CUDA_HPP
#define KVCANARY_IMPL_ENTRIES_CUDA_HPP

// The CUDA fast path (EntriesAlgorithm::CudaPersistent), chosen by EntriesBackend<Kokkos::Cuda>: which
// kernels a call launches (cuda_single_launch.hpp, cuda_two_launches.hpp) and how.
//
// * Batches of up to kSmallMaxRows (32) rows: ONE kernel with no block barrier (small_plan_kernel):
//   every warp scans the rows itself with shuffles. Its tiles are one entry a thread when 4-entry
//   tiles would leave SMs idle, so that a small batch's stores spread over more SMs.
// * Batches of up to kFusedMaxRows (256) rows: ONE kernel. Every block scans the rows into shared
//   memory (one row per thread, one CUB block scan), block 0 also writes the WritePlan, the scalars
//   and the status, then all blocks expand their tiles of the verify array. Recomputing 256 rows per
//   block costs less than a second launch (~1 µs in a graph).
// * Larger batches: two kernels. The rows kernel spreads the rows over up to kRowsMaxBlocks blocks;
//   each block first adds up the rows before its own (re-reading them instead of waiting on other
//   blocks), then scans its own and writes their offsets; the last block writes the totals and the
//   status. The entries kernel finds each tile's rows with a block-wide search and stages only those;
//   on Hopper it is a programmatic dependent launch, resident before the rows kernel ends.
// Entries kernels have a grid sized from the SM count and occupancy and walk tiles of 1024 entries
// with a grid stride; a thread's loads for a whole tile are in flight together.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/cuda_queries.hpp>
#include <kvcanary/impl/cuda_single_launch.hpp>
#include <kvcanary/impl/cuda_two_launches.hpp>
#include <kvcanary/impl/verify_entries_cuda.hpp>

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <utility>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

// Queried once per kernel and device (the first call on a device must not be inside a graph capture).
// `device` is the current device of the call (the space's), which the occupancy and attribute queries use.
template <class MemorySpace, class Sink>
struct Kernels {
  static int fused_blocks(int device) {
    static PerDevice cache;
    return cache.get(device,
                     [device] { return resident_blocks(fused_plan_kernel<MemorySpace, Sink>, kTileThreads, device); });
  }
  template <int kPerThread>
  static int small_blocks(int device) {
    static PerDevice cache;
    return cache.get(device, [device] {
      return resident_blocks(small_plan_kernel<MemorySpace, kPerThread, Sink>, kTileThreads, device);
    });
  }
  // Whether the entries kernel may be a programmatic dependent launch: its code for this device was
  // compiled for compute capability 9.0 or later, so it waits for the rows kernel (wait_for_rows_kernel).
  static bool dependent_launch(int device) {
    static PerDevice cache;
    return cache.get(device, [device] {
             return on_device(device, [] {
               cudaFuncAttributes attributes{};
               return cudaFuncGetAttributes(&attributes, entries_kernel<MemorySpace, Sink>) == cudaSuccess &&
                      attributes.ptxVersion >= 90;
             });
           }) != 0;
  }
  static int entries_blocks(int device) {
    static PerDevice cache;
    return cache.get(device,
                     [device] { return resident_blocks(entries_kernel<MemorySpace, Sink>, kTileThreads, device); });
  }
};

// Launches `kernel` on `stream`; with `early`, as a programmatic dependent launch, so that its blocks
// are resident before the previous kernel ends (the kernel waits with wait_for_rows_kernel).
template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), unsigned blocks, cudaStream_t stream, bool early,
                           Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kTileThreads);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = early ? 1 : 0;
  KVCANARY_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Tiles of tile_entries up to the host's bound on the total (DeviceInputs::verify_total_bound()), at most as
// many blocks as fit on the device at once; at least one block.
inline unsigned grid_blocks(std::int64_t total_bound, int resident, std::int64_t tile_entries = kTileEntries) {
  return capped_blocks(total_bound, tile_entries, resident);
}

}  // namespace CudaPersistent

template <>
struct EntriesBackend<Kokkos::Cuda> {
  static constexpr bool has_cuda_persistent = true;

  // Launches the whole plan on `space`'s stream and returns true, or launches nothing and returns false.
  template <class MemorySpace>
  static bool plan(const Kokkos::Cuda& space, const DeviceInputs<MemorySpace>& in,
                   const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
    return plan(space, in, out, batch_size, CudaPersistent::StoreEntries<MemorySpace>{out});
  }

  // plan_and_verify()'s head pass (SPEC-CANARY §5.1) in the plan's own kernels: each entry checked where it
  // is made (CheckEntries), none stored. One launch for up to 256 rows. Same return as plan(). With a Rider:
  // its job in one extra block of that launch, which also counts the pass's runs; declined above 256 rows.
  template <class MemorySpace, class Rider = CudaPersistent::NoRider>
  static bool plan_and_check(const Kokkos::Cuda& space, const DeviceInputs<MemorySpace>& in,
                             const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size,
                             const VerifyCall<MemorySpace>& call, const DeviceVector<MemorySpace>& req_identities,
                             bool has_identities, const Rider& rider = Rider{}) {
    return plan(space, in, out, batch_size,
                CudaPersistent::CheckEntries<MemorySpace>{call, req_identities, has_identities}, rider);
  }

  // plan_and_verify()'s offsets-only plan, when its verify runs after the plan (verify[from_inputs]): the
  // same kernels with no tile expanded, one block up to 256 rows, the rows kernel alone above. Same return.
  // With a Rider (cuda_tiles.hpp): its job in one extra block of the first launch.
  template <class MemorySpace, class Rider = CudaPersistent::NoRider>
  static bool plan_offsets(const Kokkos::Cuda& space, const DeviceInputs<MemorySpace>& in,
                           const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size,
                           const Rider& rider = Rider{}) {
    return plan(space, in, out, batch_size, CudaPersistent::SkipEntries{}, rider);
  }

  // The same with each verify entry handed to `sink` (cuda_tiles.hpp) instead of stored.
  template <class MemorySpace, class Sink, class Rider = CudaPersistent::NoRider>
  static bool plan(const Kokkos::Cuda& space, const DeviceInputs<MemorySpace>& in,
                   const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size, const Sink& sink,
                   const Rider& rider = Rider{}) {
    using namespace CudaPersistent;
    using K = Kernels<MemorySpace, Sink>;
    constexpr bool expands = expands_entries<Sink>;
    constexpr unsigned rider_blocks = Rider::kActive ? 1u : 0u;
    const int device = space.cuda_device();
    if (!is_current_device(device)) return false;
    // A checking plan leaves its run counts to its rider in one launch only: above kFusedMaxRows rows the
    // entries kernel counts them while the rows kernel's rider reads the counters.
    if (Rider::kActive && expands && batch_size > kFusedMaxRows) return false;
    const cudaStream_t stream = space.cuda_stream();
    // The grid's and the tile shape's bound on the total: the capacity, or less where the batch's shape says so
    // (an engine's derived capacity is ~3 x its pool; the exact capacity of the perf suite is never above it).
    const std::int64_t total_bound = in.verify_total_bound(batch_size, out.verify_capacity());
    if (batch_size <= kSmallMaxRows) {
      // Fewer 4-entry tiles than SMs: one-entry tiles, spread over the SMs.
      // An offsets-only plan (one block) queries nothing.
      const bool spread = expands && grid_blocks(total_bound, INT_MAX) < static_cast<unsigned>(sm_count(device));
      const int resident = !expands ? 1
                           : spread ? K::template small_blocks<kSpreadEntriesPerThread>(device)
                                    : K::template small_blocks<kEntriesPerThread>(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion(expands ? "kvcanary::plan::entries[cuda_persistent_small]"
                                            : "kvcanary::plan::offsets[cuda_persistent_small]");
      const std::int64_t tile = std::int64_t(kTileThreads) * (spread ? kSpreadEntriesPerThread : kEntriesPerThread);
      const unsigned blocks = expands ? grid_blocks(total_bound, resident, tile) : 1u;
      if (spread)
        small_plan_kernel<MemorySpace, kSpreadEntriesPerThread, Sink, Rider>
            <<<blocks + rider_blocks, kTileThreads, 0, stream>>>(in, out, sink, batch_size, rider);
      else
        small_plan_kernel<MemorySpace, kEntriesPerThread, Sink, Rider>
            <<<blocks + rider_blocks, kTileThreads, 0, stream>>>(in, out, sink, batch_size, rider);
    } else if (batch_size <= kFusedMaxRows) {
      const int resident = expands ? K::fused_blocks(device) : 1;
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion(expands ? "kvcanary::plan::entries[cuda_persistent_fused]"
                                            : "kvcanary::plan::offsets[cuda_persistent_fused]");
      const unsigned blocks = expands ? grid_blocks(total_bound, resident) : 1u;
      fused_plan_kernel<MemorySpace, Sink, Rider>
          <<<blocks + rider_blocks, kTileThreads, 0, stream>>>(in, out, sink, batch_size, rider);
    } else {
      const int resident = expands ? K::entries_blocks(device) : 1;
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion(expands ? "kvcanary::plan::entries[cuda_persistent]"
                                            : "kvcanary::plan::offsets[cuda_persistent]");
      const std::int64_t per_block = rows_per_block(batch_size);
      const unsigned row_blocks = static_cast<unsigned>((batch_size + per_block - 1) / per_block);
      rows_kernel<MemorySpace, Rider>
          <<<row_blocks + rider_blocks, kRowsThreads, 0, stream>>>(in, out, batch_size, per_block, rider);
      if (expands)
        launch_after_previous(entries_kernel<MemorySpace, Sink>, grid_blocks(total_bound, resident), stream,
                              K::dependent_launch(device), in, out, sink, batch_size);
    }
    Kokkos::Profiling::popRegion();
    KVCANARY_CUDA_CHECK(cudaGetLastError());
    return true;
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
