#ifndef KVCANARY_IMPL_CUDA_ROWS_HPP
#define KVCANARY_IMPL_CUDA_ROWS_HPP

// The CUDA path's per-row values and how they combine: the lengths a scan adds up (ScanPair), a run
// of rows' lengths and status (RowsSummary), a block's status in shared memory (BlockStatus), the
// warp-level scan of the small kernel, and the zeroing of write_offsets past the batch.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/offsets.hpp>
#include <kvcanary/impl/row_rules.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

struct ScanPair {
  std::int64_t verify;
  std::uint64_t write;  // wraps, like the portable scan
};

struct ScanPairSum {
  __device__ ScanPair operator()(const ScanPair& a, const ScanPair& b) const {
    return {a.verify + b.verify, a.write + b.write};
  }
};

__device__ inline ScanPair lengths(const RowGeometry& g) {
  return {g.verify_len, static_cast<std::uint64_t>(g.write_len)};
}

// The rows that a run of batch rows adds up to: their lengths and their status.
struct RowsSummary {
  ScanPair lengths;
  int error_bits;
  int first_bad_row;  // kNoBadRow when none
};

struct RowsSummarySum {
  __device__ RowsSummary operator()(const RowsSummary& a, const RowsSummary& b) const {
    return {ScanPairSum()(a.lengths, b.lengths), a.error_bits | b.error_bits,
            a.first_bad_row < b.first_bad_row ? a.first_bad_row : b.first_bad_row};
  }
};

__device__ inline RowsSummary summary(const RowGeometry& g, std::int64_t r) {
  return {lengths(g), g.error_bits, g.error_bits != 0 ? static_cast<int>(r) : kNoBadRow};
}

// The status of a block's rows, gathered in shared memory.
struct BlockStatus {
  int error_bits;
  int first_bad_row;  // kNoBadRow when none
  __device__ void reset() {
    error_bits = 0;
    first_bad_row = kNoBadRow;
  }
  __device__ void add(const RowGeometry& g, std::int64_t r) {
    if (g.error_bits == 0) return;
    atomicOr(&error_bits, g.error_bits);
    atomicMin(&first_bad_row, static_cast<int>(r));
  }
};

// Inclusive scan of the lanes' summaries over the warp (shuffles only).
__device__ inline RowsSummary warp_inclusive_scan(RowsSummary s) {
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const RowsSummary below{
        {__shfl_up_sync(0xffffffffu, s.lengths.verify, d), __shfl_up_sync(0xffffffffu, s.lengths.write, d)},
        __shfl_up_sync(0xffffffffu, s.error_bits, d),
        __shfl_up_sync(0xffffffffu, s.first_bad_row, d)};
    if (lane >= d) s = RowsSummarySum()(below, s);
  }
  return s;
}

__device__ inline RowsSummary warp_broadcast(const RowsSummary& s, int lane) {
  return {{__shfl_sync(0xffffffffu, s.lengths.verify, lane), __shfl_sync(0xffffffffu, s.lengths.write, lane)},
          __shfl_sync(0xffffffffu, s.error_bits, lane),
          __shfl_sync(0xffffffffu, s.first_bad_row, lane)};
}

// SPEC §4: write_offsets after [bs] are zeroed, every call; spread over the plan's `plan_blocks` blocks, `block`
// this one's index among them (a rider's block, the grid's first, returns before it gets here: cuda_tiles.hpp).
template <class MemorySpace>
__device__ void zero_write_offsets_tail(const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size,
                                        unsigned plan_blocks, unsigned block) {
  const std::int64_t last = out.write_req_capacity();
  const std::int64_t stride = std::int64_t(plan_blocks) * blockDim.x;
  for (std::int64_t r = batch_size + 1 + std::int64_t(block) * blockDim.x + threadIdx.x; r <= last; r += stride)
    out.write_offsets(r) = 0;
}

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
