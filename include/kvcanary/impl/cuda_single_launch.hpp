#ifndef KVCANARY_IMPL_CUDA_SINGLE_LAUNCH_HPP
#define KVCANARY_IMPL_CUDA_SINGLE_LAUNCH_HPP

// The CUDA plans made in one launch, for batches of up to 256 rows: the small kernel (up to 32 rows,
// a warp scan, no block barrier) and the fused kernel (a block scan). Every block computes the
// offsets itself, so no block waits on another and nothing is left in device memory between stages.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/cuda_rows.hpp>
#include <kvcanary/impl/cuda_tiles.hpp>
#include <kvcanary/impl/offsets.hpp>

#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

constexpr std::int64_t kFusedMaxRows = kTileThreads;  // the fused kernel gives each row one thread
constexpr std::int64_t kSmallMaxRows = 32;            // small_plan_kernel gives each row one lane

// A checking plan's rider (cuda_tiles.hpp) counts the plan's runs: each rider thread adds its row's verify length
// as the plan's blocks compute it (a rider block has kTileThreads threads, one a row), and the sink counts the
// total as the plan's leader would.
template <class MemorySpace, class Sink>
struct RiderCountsRuns {
  static constexpr bool kAppends = true;
  const DeviceInputs<MemorySpace>& in;
  const DeviceOutputs<MemorySpace>& out;
  const Sink& sink;
  std::int64_t batch_size;
  __device__ std::int64_t part(int thread) const {
    return thread < batch_size ? lengths(in.row_geometry(in.row_fields(thread))).verify : 0;
  }
  __device__ void count(std::int64_t total) const { sink.count_runs(total, out.verify_capacity()); }
};

// The rider's block of a single-launch plan: an offsets-only plan appends nothing, a checking one leaves its
// run counts to the rider.
template <class MemorySpace, class Sink, class Rider>
__device__ void ride_beside_plan(const Rider& rider, const DeviceInputs<MemorySpace>& in,
                                 const DeviceOutputs<MemorySpace>& out, const Sink& sink, std::int64_t batch_size) {
  static_assert(kFusedMaxRows <= kTileThreads, "the rider block's threads take a row each");
  if constexpr (expands_entries<Sink>)
    rider.ride(threadIdx.x, blockDim.x, RiderCountsRuns<MemorySpace, Sink>{in, out, sink, batch_size});
  else
    rider.ride(threadIdx.x, blockDim.x, NoAppends{});
}

// The kernels' minimum resident blocks for ptxas: none asked (as the kernels were tuned) but for a checking plan
// with a rider, one: without a bound ptxas held those to 80 registers and spilled 120-140 bytes a thread (small
// and fused, CUDA 13, sm_90; 93 registers and no spill without the rider, 98 and 100 and none with this bound).
template <class Sink, class Rider>
constexpr int kRiderMinBlocks = (Rider::kActive && expands_entries<Sink>) ? 1 : 0;

// The whole plan in one launch, for batch_size <= kFusedMaxRows (one row per thread). Every block
// scans the rows into shared memory (one round of loads), the plan's block 0 also writes the WritePlan, the
// scalars, the status and the workspace's verify_offsets, then all blocks expand their tiles.
template <class MemorySpace, class Sink, class Rider = NoRider>
__global__ void __launch_bounds__(kTileThreads, kRiderMinBlocks<Sink, Rider>)
    fused_plan_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out, const Sink sink,
                      const std::int64_t batch_size, const Rider rider = Rider{}) {
  if constexpr (Rider::kActive)
    if (blockIdx.x == 0) return ride_beside_plan(rider, in, out, sink, batch_size);  // the grid's first
  const unsigned block = plan_block<Rider>();
  const std::int64_t rider_token = block == 0 && threadIdx.x == 0 ? rider.before_scalars() : 0;
  using BlockScan = cub::BlockScan<ScanPair, kTileThreads>;
  __shared__ std::int64_t offsets[kFusedMaxRows + 1];
  __shared__ RowFields rows[kFusedMaxRows];  // the tile phase reads row inputs here, not from global memory
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ BlockStatus status;
  const bool leader = block == 0;
  if (threadIdx.x == 0) status.reset();
  __syncthreads();

  const std::int64_t r = threadIdx.x;
  const bool mine_row = r < batch_size;
  // Threads past the batch read nothing: their all-zero row is padding and counts for nothing.
  const RowFields f = mine_row ? in.row_fields(r) : RowFields{0, 0, 0, 0};
  if (mine_row) rows[r] = f;
  const RowGeometry g = in.row_geometry(f);
  if (leader && mine_row) status.add(g, r);
  const std::int32_t seed_raw = leader ? in.seed_raw(g) : -1;  // in flight during the scan
  ScanPair base, totals;
  BlockScan(scan_storage).ExclusiveScan(lengths(g), base, ScanPair{0, 0u}, ScanPairSum(), totals);
  if (r < batch_size) offsets[r] = base.verify;
  if (r == 0) offsets[batch_size] = totals.verify;
  if (leader && mine_row) {
    out.write_offsets(r) = static_cast<std::int64_t>(base.write);
    out.write_seed_slot_indices(r) = in.translate(seed_raw);
    out.verify_offsets(r) = base.verify;  // the workspace's offsets, as every path leaves them (identities read them)
  }
  if (leader && r == 0) out.verify_offsets(batch_size) = totals.verify;
  __syncthreads();
  if (leader && threadIdx.x == 0) {
    rider.after_scalars(rider_token, write_totals(out, batch_size, totals.verify, totals.write, status.error_bits,
                                                  bad_row_or_none(status.first_bad_row)));
    if constexpr (!Rider::kActive) sink.count_runs(totals.verify, out.verify_capacity());  // else the rider's
  }
  zero_write_offsets_tail(out, batch_size, plan_blocks<Rider>(), block);

  if (!expands_entries<Sink> || totals.verify > out.verify_capacity()) return;  // overflow: untouched arrays
  expand_tiles<kEntriesPerThread>(in, sink, StagedOffsets{offsets, 0}, StagedRowFields{rows, 0}, batch_size,
                                  totals.verify, plan_blocks<Rider>(), block);
}

// The whole plan in one launch for batch_size <= kSmallMaxRows (one row a lane), with no block
// barrier: every warp scans the rows itself (shuffles; the status is part of the scan value) into its
// own slice of shared memory and expands its share of each tile from it. Warp 0 of the plan's block 0 also
// writes the WritePlan, the scalars and the status. Tiles of kTileThreads * kPerThread entries.
template <class MemorySpace, int kPerThread, class Sink, class Rider = NoRider>
__global__ void __launch_bounds__(kTileThreads, kRiderMinBlocks<Sink, Rider>)
    small_plan_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out, const Sink sink,
                      const std::int64_t batch_size, const Rider rider = Rider{}) {
  if constexpr (Rider::kActive)
    if (blockIdx.x == 0) return ride_beside_plan(rider, in, out, sink, batch_size);  // the grid's first
  const unsigned block = plan_block<Rider>();
  const std::int64_t rider_token = block == 0 && threadIdx.x == 0 ? rider.before_scalars() : 0;
  constexpr int kWarps = kTileThreads / 32;
  __shared__ std::int64_t offsets[kWarps][kSmallMaxRows + 1];
  __shared__ RowFields rows[kWarps][kSmallMaxRows];
  const int warp = threadIdx.x / 32;
  const std::int64_t r = threadIdx.x % 32;
  const bool mine_row = r < batch_size;
  const bool writer = block == 0 && warp == 0;
  // Lanes past the batch read nothing: their all-zero row is padding and counts for nothing.
  const RowFields f = mine_row ? in.row_fields(r) : RowFields{0, 0, 0, 0};
  const RowGeometry g = in.row_geometry(f);
  const std::int32_t seed_raw = writer ? in.seed_raw(g) : -1;  // in flight during the scan
  const RowsSummary mine = summary(g, r);
  const RowsSummary through = warp_inclusive_scan(mine);
  const RowsSummary all = warp_broadcast(through, 31);
  const std::int64_t base_verify = through.lengths.verify - mine.lengths.verify;
  if (mine_row) {
    offsets[warp][r] = base_verify;
    rows[warp][r] = f;
  }
  if (r == 0) offsets[warp][batch_size] = all.lengths.verify;
  __syncwarp();
  if (writer) {
    if (mine_row) {
      out.write_offsets(r) = static_cast<std::int64_t>(through.lengths.write - mine.lengths.write);
      out.write_seed_slot_indices(r) = in.translate(seed_raw);
      out.verify_offsets(r) = base_verify;  // the workspace's offsets, as every path leaves them
    }
    if (r == 0) {
      out.verify_offsets(batch_size) = all.lengths.verify;
      rider.after_scalars(rider_token, write_totals(out, batch_size, all.lengths.verify, all.lengths.write,
                                                    all.error_bits, bad_row_or_none(all.first_bad_row)));
      if constexpr (!Rider::kActive) sink.count_runs(all.lengths.verify, out.verify_capacity());  // else the rider's
    }
  }
  zero_write_offsets_tail(out, batch_size, plan_blocks<Rider>(), block);

  if (!expands_entries<Sink> || all.lengths.verify > out.verify_capacity()) return;  // overflow: untouched arrays
  expand_tiles<kPerThread>(in, sink, StagedOffsets{offsets[warp], 0}, StagedRowFields{rows[warp], 0}, batch_size,
                           all.lengths.verify, plan_blocks<Rider>(), block);
}

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
