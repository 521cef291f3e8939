#ifndef KVCANARY_IMPL_ENTRIES_CUDA_HPP
#define KVCANARY_IMPL_ENTRIES_CUDA_HPP

// The CUDA fast path (EntriesAlgorithm::CudaPersistent), chosen by EntriesBackend<Kokkos::Cuda>.
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
#include <kvcanary/impl/cuda_tiles.hpp>
#include <kvcanary/impl/offsets.hpp>

#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#define KVCANARY_CUDA_CHECK(call) ::kvcanary::Impl::cuda_check((call), #call, __FILE__, __LINE__)

namespace kvcanary {
namespace Impl {

inline void cuda_check(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("kvcanary: ") + call + " failed at " + file + ":" + std::to_string(line) +
                             ": " + cudaGetErrorString(error));
}

namespace CudaPersistent {

constexpr std::int64_t kFusedMaxRows = kTileThreads;  // the fused kernel gives each row one thread
constexpr std::int64_t kSmallMaxRows = 32;            // small_plan_kernel gives each row one lane
constexpr int kRowsThreads = 256;                     // the rows kernel: one row a thread per chunk
constexpr int kRowsMaxBlocks = 64;                    // rows re-read before a block grow with the block count
constexpr int kSummaryRowsPerThread = 8;              // rows a thread loads at once when adding up earlier rows
constexpr std::int64_t kStagedRows = 512;             // the entries kernel stages a tile's rows when they fit

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
  int first_bad_row;  // INT_MAX when none
};

struct RowsSummarySum {
  __device__ RowsSummary operator()(const RowsSummary& a, const RowsSummary& b) const {
    return {ScanPairSum()(a.lengths, b.lengths), a.error_bits | b.error_bits,
            a.first_bad_row < b.first_bad_row ? a.first_bad_row : b.first_bad_row};
  }
};

__device__ inline RowsSummary summary(const RowGeometry& g, std::int64_t r) {
  return {lengths(g), g.error_bits, g.error_bits != 0 ? static_cast<int>(r) : INT_MAX};
}

// The status of a block's rows, gathered in shared memory.
struct BlockStatus {
  int error_bits;
  int first_bad_row;  // INT_MAX when none
  __device__ void reset() {
    error_bits = 0;
    first_bad_row = INT_MAX;
  }
  __device__ void add(const RowGeometry& g, std::int64_t r) {
    if (g.error_bits == 0) return;
    atomicOr(&error_bits, g.error_bits);
    atomicMin(&first_bad_row, static_cast<int>(r));
  }
};

__device__ inline int bad_row_or_none(int first_bad_row) {
  return first_bad_row == INT_MAX ? -1 : first_bad_row;
}

// Tiles (of kTileThreads * kPerThread entries) blockIdx.x, blockIdx.x + gridDim.x, ... of [0, total),
// with the offsets and row inputs of every row at hand (the fused and small kernels' shared memory).
template <int kPerThread, class MemorySpace, class Offsets, class Rows>
__device__ void expand_tiles(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                             const Offsets& offsets, const Rows& rows, std::int64_t batch_size, std::int64_t total) {
  constexpr std::int64_t tile = std::int64_t(kTileThreads) * kPerThread;
  for (std::int64_t begin = std::int64_t(blockIdx.x) * tile; begin < total; begin += std::int64_t(gridDim.x) * tile) {
    const std::int64_t end = begin + tile < total ? begin + tile : total;
    const std::int64_t first_row = owner_row(offsets, 0, batch_size - 1, begin);
    const std::int64_t last_row = owner_row(offsets, first_row, batch_size - 1, end - 1);
    expand_tile<kPerThread>(in, out, offsets, rows, first_row, last_row, begin, end);
  }
}

// SPEC §4: write_offsets after [bs] are zeroed, every call; spread over the grid.
template <class MemorySpace>
__device__ void zero_write_offsets_tail(const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
  const std::int64_t last = out.write_req_capacity();
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t r = batch_size + 1 + std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r <= last; r += stride)
    out.write_offsets(r) = 0;
}

// The whole plan in one launch, for batch_size <= kFusedMaxRows (one row per thread). Every block
// scans the rows into shared memory (one round of loads), block 0 also writes the WritePlan, the
// scalars and the status, then all blocks expand their tiles.
template <class MemorySpace>
__global__ void __launch_bounds__(kTileThreads)
    fused_plan_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                      const std::int64_t batch_size) {
  using BlockScan = cub::BlockScan<ScanPair, kTileThreads>;
  __shared__ std::int64_t offsets[kFusedMaxRows + 1];
  __shared__ RowFields rows[kFusedMaxRows];  // the tile phase reads row inputs here, not from global memory
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ BlockStatus status;
  const bool leader = blockIdx.x == 0;
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
  }
  __syncthreads();
  if (leader && threadIdx.x == 0)
    write_totals(out, batch_size, totals.verify, totals.write, status.error_bits,
                 bad_row_or_none(status.first_bad_row));
  zero_write_offsets_tail(out, batch_size);

  if (totals.verify > out.verify_capacity()) return;  // overflow: the verify arrays stay untouched
  expand_tiles<kEntriesPerThread>(in, out, StagedOffsets{offsets, 0}, StagedRowFields{rows, 0}, batch_size,
                                  totals.verify);
}

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

// The whole plan in one launch for batch_size <= kSmallMaxRows (one row a lane), with no block
// barrier: every warp scans the rows itself (shuffles; the status is part of the scan value) into its
// own slice of shared memory and expands its share of each tile from it. Warp 0 of block 0 also
// writes the WritePlan, the scalars and the status. Tiles of kTileThreads * kPerThread entries.
template <class MemorySpace, int kPerThread>
__global__ void __launch_bounds__(kTileThreads)
    small_plan_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                      const std::int64_t batch_size) {
  constexpr int kWarps = kTileThreads / 32;
  __shared__ std::int64_t offsets[kWarps][kSmallMaxRows + 1];
  __shared__ RowFields rows[kWarps][kSmallMaxRows];
  const int warp = threadIdx.x / 32;
  const std::int64_t r = threadIdx.x % 32;
  const bool mine_row = r < batch_size;
  const bool writer = blockIdx.x == 0 && warp == 0;
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
    }
    if (r == 0)
      write_totals(out, batch_size, all.lengths.verify, all.lengths.write, all.error_bits,
                   bad_row_or_none(all.first_bad_row));
  }
  zero_write_offsets_tail(out, batch_size);

  if (all.lengths.verify > out.verify_capacity()) return;  // overflow: the verify arrays stay untouched
  expand_tiles<kPerThread>(in, out, StagedOffsets{offsets[warp], 0}, StagedRowFields{rows[warp], 0}, batch_size,
                           all.lengths.verify);
}

// What rows [0, end) add up to, this thread's share (kSummaryRowsPerThread rows' loads at once).
template <class MemorySpace>
__device__ RowsSummary summarize_rows(const DeviceInputs<MemorySpace>& in, std::int64_t end) {
  RowsSummary mine{{0, 0u}, 0, INT_MAX};
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
template <class MemorySpace>
__global__ void __launch_bounds__(kRowsThreads)
    rows_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out, const std::int64_t batch_size,
                const std::int64_t rows_per_block) {
  using BlockScan = cub::BlockScan<ScanPair, kRowsThreads>;
  using BlockReduce = cub::BlockReduce<RowsSummary, kRowsThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
  } storage;
  __shared__ RowsSummary before;
  __shared__ BlockStatus status;
  const std::int64_t first = std::int64_t(blockIdx.x) * rows_per_block;
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
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
    // carry already counts the earlier rows' lengths: only their status is added to this block's.
    const RowsSummary own{ScanPair{0, 0u}, status.error_bits, status.first_bad_row};
    const RowsSummary all = RowsSummarySum()(before, own);
    write_totals(out, batch_size, carry.verify, carry.write, all.error_bits, bad_row_or_none(all.first_bad_row));
  }
  zero_write_offsets_tail(out, batch_size);
}

// The entries stage after rows_kernel. Each tile's rows are found with a block-wide search of the
// offsets, and their offsets and inputs are staged in shared memory when there are few enough.
template <class MemorySpace>
__global__ void __launch_bounds__(kTileThreads)
    entries_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                   const std::int64_t batch_size) {
  __shared__ std::int64_t offsets[kStagedRows + 1];
  __shared__ RowFields rows[kStagedRows];
  wait_for_rows_kernel();
  if (out.enable() == 0) return;  // overflow: the verify arrays stay untouched
  const std::int64_t total = out.verify_offsets(batch_size);
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
      expand_tile<kEntriesPerThread>(in, out, StagedOffsets{offsets, span.first}, StagedRowFields{rows, span.first},
                                     span.first, span.last, begin, end);
    } else {
      expand_tile<kEntriesPerThread>(in, out, out.verify_offsets, GlobalRowFields<MemorySpace>{in}, span.first,
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

// The device's SM count, queried once per process; 0 when the query fails.
inline int sm_count(int device) {
  static const int sms = [device] {
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess ? n : 0;
  }();
  return sms;
}

// Blocks of `threads` that fit on the device at once (SM count x occupancy); 0 when the query
// fails, which sends the call to the portable path.
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, int device) {
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess) return 0;
  return sms * per_sm;
}

// Queried once per kernel and process (the first call, which must not be inside a graph capture).
template <class MemorySpace>
struct Kernels {
  static int fused_blocks(int device) {
    static const int blocks = resident_blocks(fused_plan_kernel<MemorySpace>, kTileThreads, device);
    return blocks;
  }
  template <int kPerThread>
  static int small_blocks(int device) {
    static const int blocks = resident_blocks(small_plan_kernel<MemorySpace, kPerThread>, kTileThreads, device);
    return blocks;
  }
  // Whether the entries kernel may be a programmatic dependent launch: its code for this device was
  // compiled for compute capability 9.0 or later, so it waits for the rows kernel (wait_for_rows_kernel).
  static bool dependent_launch() {
    static const bool yes = [] {
      cudaFuncAttributes attributes{};
      return cudaFuncGetAttributes(&attributes, entries_kernel<MemorySpace>) == cudaSuccess &&
             attributes.ptxVersion >= 90;
    }();
    return yes;
  }
  static int entries_blocks(int device) {
    static const int blocks = resident_blocks(entries_kernel<MemorySpace>, kTileThreads, device);
    return blocks;
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

// Tiles of tile_entries up to the capacity (the host's only bound on the total), at most as many
// blocks as fit on the device at once; at least one block.
inline unsigned grid_blocks(std::int64_t verify_capacity, int resident, std::int64_t tile_entries = kTileEntries) {
  const std::int64_t tiles = (verify_capacity + tile_entries - 1) / tile_entries;
  return static_cast<unsigned>(tiles < 1 ? 1 : (tiles < resident ? tiles : resident));
}

}  // namespace CudaPersistent

template <>
struct EntriesBackend<Kokkos::Cuda> {
  static constexpr bool has_cuda_persistent = true;

  // Launches the whole plan on `space`'s stream and returns true, or launches nothing and returns false.
  template <class MemorySpace>
  static bool plan(const Kokkos::Cuda& space, const DeviceInputs<MemorySpace>& in,
                   const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
    using namespace CudaPersistent;
    const int device = space.cuda_device();
    const cudaStream_t stream = space.cuda_stream();
    if (batch_size <= kSmallMaxRows) {
      // Fewer 4-entry tiles than SMs: one-entry tiles, spread over the SMs.
      const bool spread = grid_blocks(out.verify_capacity(), INT_MAX) < static_cast<unsigned>(sm_count(device));
      const int resident = spread ? Kernels<MemorySpace>::template small_blocks<kSpreadEntriesPerThread>(device)
                                  : Kernels<MemorySpace>::template small_blocks<kEntriesPerThread>(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan::entries[cuda_persistent_small]");
      if (spread)
        small_plan_kernel<MemorySpace, kSpreadEntriesPerThread>
            <<<grid_blocks(out.verify_capacity(), resident, std::int64_t(kTileThreads) * kSpreadEntriesPerThread),
               kTileThreads, 0, stream>>>(in, out, batch_size);
      else
        small_plan_kernel<MemorySpace, kEntriesPerThread>
            <<<grid_blocks(out.verify_capacity(), resident), kTileThreads, 0, stream>>>(in, out, batch_size);
    } else if (batch_size <= kFusedMaxRows) {
      const int resident = Kernels<MemorySpace>::fused_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan::entries[cuda_persistent_fused]");
      fused_plan_kernel<MemorySpace>
          <<<grid_blocks(out.verify_capacity(), resident), kTileThreads, 0, stream>>>(in, out, batch_size);
    } else {
      const int resident = Kernels<MemorySpace>::entries_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan::entries[cuda_persistent]");
      const std::int64_t per_block = rows_per_block(batch_size);
      const unsigned row_blocks = static_cast<unsigned>((batch_size + per_block - 1) / per_block);
      rows_kernel<MemorySpace><<<row_blocks, kRowsThreads, 0, stream>>>(in, out, batch_size, per_block);
      launch_after_previous(entries_kernel<MemorySpace>, grid_blocks(out.verify_capacity(), resident), stream,
                            Kernels<MemorySpace>::dependent_launch(), in, out, batch_size);
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
