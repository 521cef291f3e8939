#ifndef KVCANARY_IMPL_CUDA_TWO_LAUNCHES_HPP
#define KVCANARY_IMPL_CUDA_TWO_LAUNCHES_HPP

// The CUDA plan for batches of more than 256 rows, in two launches: the rows kernel (offsets,
// WritePlan, scalars, status) over up to kRowsMaxBlocks blocks, then the entries kernel over tiles of
// the verify array, a programmatic dependent launch on Hopper.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/cuda_rows.hpp>
#include <kvcanary/impl/cuda_tiles.hpp>
#include <kvcanary/impl/offsets.hpp>

#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

constexpr int kRowsThreads = 256;          // the rows kernel: one row a thread per chunk
constexpr int kRowsMaxBlocks = 64;         // rows re-read before a block grow with the block count
constexpr int kSummaryRowsPerThread = 8;   // rows a thread loads at once when adding up earlier rows
constexpr std::int64_t kStagedRows = 512;  // the entries kernel stages a tile's rows when they fit

// What rows [0, end) add up to, this thread's share (kSummaryRowsPerThread rows' loads at once).
template <class MemorySpace>
__device__ RowsSummary summarize_rows(const DeviceInputs<MemorySpace>& in, std::int64_t end) {
  RowsSummary mine{{0, 0u}, 0, kNoBadRow};
  for (std::int64_t base = 0; base < end; base += std::int64_t(kRowsThreads) * kSummaryRowsPerThread) {
    RowGeometry g[kSummaryRowsPerThread];
#pragma unroll
    for (int q = 0; q < kSummaryRowsPerThread; ++q) {
      const std::int64_t r = base + q * kRowsThreads + threadIdx.x;
      g[q] = in.row_geometry(r < end ? r : end - 1);  // in bounds, so the loads are unconditional
    }
#pragma unroll
    for (int q = 0; q < kSummaryRowsPerThread; ++q) {
      const std::int64_t r = base + q * kRowsThreads + threadIdx.x;
      if (r < end) mine = RowsSummarySum()(mine, summary(g[q], r));
    }
  }
  return mine;
}

// Programmatic dependent launch (Hopper and later): the entries kernel is launched while the rows
// kernel runs; its blocks wait here until the rows kernel has finished and its writes are visible.
__device__ inline void wait_for_rows_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ inline void let_entries_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The offsets stage for larger batches: block b owns rows [b * rows_per_block, ...) and walks them
// in chunks of kRowsThreads (one row a thread, a block scan per chunk). Its carry is what all
// earlier rows add up to, which it re-reads itself: no block waits on another, and the last block,
// having seen every row, writes the totals and the status. Writes the workspace's verify_offsets,
// the WritePlan, the scalars and the status.
template <class MemorySpace, class Rider = NoRider>
__global__ void __launch_bounds__(kRowsThreads)
    rows_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out, const std::int64_t batch_size,
                const std::int64_t rows_per_block, const Rider rider = Rider{}) {
  if constexpr (Rider::kActive)
    if (blockIdx.x == 0) return rider.ride(threadIdx.x, blockDim.x, NoAppends{});  // the grid's first
  const unsigned row_blocks = plan_blocks<Rider>();
  const unsigned block = plan_block<Rider>();
  const std::int64_t rider_token = block == row_blocks - 1 && threadIdx.x == 0 ? rider.before_scalars() : 0;
  using BlockScan = cub::BlockScan<ScanPair, kRowsThreads>;
  using BlockReduce = cub::BlockReduce<RowsSummary, kRowsThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
  } storage;
  __shared__ RowsSummary before;
  __shared__ BlockStatus status;
  const std::int64_t first = std::int64_t(block) * rows_per_block;
  const std::int64_t last = first + rows_per_block < batch_size ? first + rows_per_block : batch_size;
  let_entries_kernel_start();

  const RowsSummary earlier = BlockReduce(storage.reduce).Reduce(summarize_rows(in, first), RowsSummarySum());
  if (threadIdx.x == 0) {
    before = earlier;  // the reduction's result is valid in thread 0 only
    status.reset();
  }
  __syncthreads();

  ScanPair carry = before.lengths;
  for (std::int64_t chunk = first; chunk < last; chunk += kRowsThreads) {
    const std::int64_t r = chunk + threadIdx.x;
    const bool mine = r < last;
    RowGeometry g = in.row_geometry(mine ? r : last - 1);  // in bounds, so the loads are unconditional
    if (!mine) g = RowGeometry{};
    const std::int32_t seed_raw = in.seed_raw(g);  // in flight during the scan
    ScanPair base, aggregate;
    BlockScan(storage.scan).ExclusiveScan(lengths(g), base, ScanPair{0, 0u}, ScanPairSum(), aggregate);
    base = ScanPairSum()(carry, base);
    if (mine) {
      status.add(g, r);
      out.verify_offsets(r) = base.verify;
      out.write_offsets(r) = static_cast<std::int64_t>(base.write);
      out.write_seed_slot_indices(r) = in.translate(seed_raw);
    }
    carry = ScanPairSum()(carry, aggregate);
    __syncthreads();  // storage is reused by the next chunk; status is complete after the last
  }
  if (block == row_blocks - 1 && threadIdx.x == 0) {
    // carry already counts the earlier rows' lengths: only their status is added to this block's.
    const RowsSummary own{ScanPair{0, 0u}, status.error_bits, status.first_bad_row};
    const RowsSummary all = RowsSummarySum()(before, own);
    rider.after_scalars(rider_token, write_totals(out, batch_size, carry.verify, carry.write, all.error_bits,
                                                  bad_row_or_none(all.first_bad_row)));
  }
  zero_write_offsets_tail(out, batch_size, row_blocks, block);
}

// The entries stage after rows_kernel. Each tile's rows are found with a block-wide search of the
// offsets, and their offsets and inputs are staged in shared memory when there are few enough.
template <class MemorySpace, class Sink>
__global__ void __launch_bounds__(kTileThreads)
    entries_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out, const Sink sink,
                   const std::int64_t batch_size) {
  __shared__ std::int64_t offsets[kStagedRows + 1];
  __shared__ RowFields rows[kStagedRows];
  wait_for_rows_kernel();
  const std::int64_t total = out.verify_offsets(batch_size);
  if (blockIdx.x == 0 && threadIdx.x == 0) sink.count_runs(total, out.verify_capacity());
  if (out.enable() == 0) return;  // overflow: the verify arrays stay untouched
  for (std::int64_t begin = std::int64_t(blockIdx.x) * kTileEntries; begin < total;
       begin += std::int64_t(gridDim.x) * kTileEntries) {
    const std::int64_t end = begin + kTileEntries < total ? begin + kTileEntries : total;
    const RowSpan span = block_owner_rows(out.verify_offsets, batch_size, begin, end - 1);
    const std::int64_t n = span.last - span.first + 1;
    if (n <= kStagedRows) {  // block-uniform
      // Offsets up to row last + 1 (it exists: last < batch_size). expand_tile never reads the last
      // one, but without it ptxas gives this kernel 72 registers instead of 64 (3 blocks per SM, not 4).
      for (std::int64_t t = threadIdx.x; t <= n; t += kTileThreads) {
        offsets[t] = out.verify_offsets(span.first + t);
        if (t < n) rows[t] = in.row_fields(span.first + t);
      }
      __syncthreads();
      expand_tile<kEntriesPerThread>(in, sink, StagedOffsets{offsets, span.first}, StagedRowFields{rows, span.first},
                                     span.first, span.last, begin, end);
    } else {
      expand_tile<kEntriesPerThread>(in, sink, out.verify_offsets, GlobalRowFields<MemorySpace>{in}, span.first,
                                     span.last, begin, end);
    }
    __syncthreads();  // the next tile restages
  }
}

// Rows per block of rows_kernel: whole chunks, at most kRowsMaxBlocks blocks.
inline std::int64_t rows_per_block(std::int64_t batch_size) {
  const std::int64_t chunks = (batch_size + kRowsThreads - 1) / kRowsThreads;
  return (chunks + kRowsMaxBlocks - 1) / kRowsMaxBlocks * kRowsThreads;
}

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
