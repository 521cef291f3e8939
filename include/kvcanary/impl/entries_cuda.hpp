#ifndef KVCANARY_IMPL_ENTRIES_CUDA_HPP
#define KVCANARY_IMPL_ENTRIES_CUDA_HPP

// The CUDA fast path (EntriesAlgorithm::CudaPersistent), chosen by EntriesBackend<Kokkos::Cuda>.
//
// * Batches of up to kFusedMaxRows (256) rows: ONE kernel. Every block scans the rows into shared
//   memory (one row per thread, one CUB block scan), block 0 also writes the WritePlan, the scalars
//   and the status, then all blocks expand their tiles of the verify array. Recomputing 256 rows per
//   block costs less than a second launch (~1 µs in a graph).
// * Larger batches: two kernels, a one-block rows kernel (offsets, WritePlan, scalars, status) and a
//   persistent entries kernel that stages the offsets in shared memory when they fit.
// Entries kernels have a grid sized from the SM count and occupancy and walk tiles of 1024 entries
// with a grid stride; a thread's loads for a whole tile are in flight together.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/entry_search.hpp>
#include <kvcanary/impl/offsets.hpp>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <climits>
#include <stdexcept>
#include <string>

#define KVCANARY_CUDA_CHECK(call) ::kvcanary::Impl::cuda_check((call), #call, __FILE__, __LINE__)

namespace kvcanary {
namespace Impl {

inline void cuda_check(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("kvcanary: ") + call + " failed at " + file + ":" + std::to_string(line) +
                             ": " + cudaGetErrorString(error));
}

namespace CudaPersistent {

constexpr int kTileThreads = 256;       // blocks of the fused and the entries kernels
constexpr int kEntriesPerThread = 4;    // per tile; all loads of a tile are issued before any store
constexpr std::int64_t kTileEntries = std::int64_t(kTileThreads) * kEntriesPerThread;  // 4x larger was slower (perf-notes v3)
constexpr std::int64_t kFusedMaxRows = kTileThreads;  // the fused kernel gives each row one thread
constexpr int kRowsThreads = 512;       // the rows kernel: one block (128 registers a thread)
constexpr int kRowsPerThread = 4;
constexpr std::int64_t kRowsChunk = std::int64_t(kRowsThreads) * kRowsPerThread;
constexpr std::int64_t kSharedOffsetsRows = 4096;  // the entries kernel stages offsets in shared memory

struct SharedOffsets {
  const std::int64_t* data;
  __device__ std::int64_t operator()(std::int64_t i) const { return data[i]; }
};

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

// Row inputs for the tile phase: read from global memory, or from the shared copy a kernel staged.
template <class MemorySpace>
struct GlobalRowFields {
  const DeviceInputs<MemorySpace>& in;
  __device__ RowFields operator()(std::int64_t r) const { return in.row_fields(r); }
};

struct SharedRowFields {
  const RowFields* data;
  __device__ RowFields operator()(std::int64_t r) const { return data[r]; }
};

// A tile inside one row, the common case when rows are longer than a tile: the row's inputs and
// base pointers once, then per entry one req_to_token load, one pool load and the stores. Entries of
// a warp have consecutive positions, so an entry's predecessor slot is the slot of the lane below
// (one LUT gather per entry, not two); lane 0 loads its own.
template <class MemorySpace>
__device__ void expand_row_tile(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                                const RowFields& f, std::int64_t row_begin, std::int64_t begin,
                                std::int64_t end) {
  const std::int64_t first_position = in.window_start(f.prefix) + (begin - row_begin);
  const std::int32_t* const tokens = &in.req_to_token(f.pool_row, 0);
  const std::int32_t* const pool = in.has_pool ? &in.pool(f.pool_row, 0) : nullptr;
  const std::int64_t pool_end = in.has_pool ? f.valid_len : 0;  // expected tokens at [0, valid_len) of the pool row
  const bool lane0 = threadIdx.x % 32 == 0;
  std::int64_t position[kEntriesPerThread];
  std::int32_t raw[kEntriesPerThread], raw_before[kEntriesPerThread], token[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    position[k] = first_position + ((i < end ? i : end - 1) - begin);  // dead lanes repeat the last entry
    const std::int64_t s = position[k] + in.token_offset;
    raw[k] = tokens[position[k]];
    raw_before[k] = (lane0 & (position[k] > 0)) ? tokens[position[k] - 1] : -1;
    token[k] = (s >= 0 && s < pool_end) ? pool[s] : -1;
  }
  std::int64_t slot[kEntriesPerThread], before[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    slot[k] = in.translate(raw[k]);
    before[k] = lane0 ? in.translate(raw_before[k]) : 0;
  }
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t below = __shfl_up_sync(0xffffffffu, slot[k], 1);
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    if (i < end) store_entry(out, i, EntryValues{slot[k], token[k], position[k], lane0 ? before[k] : below});
  }
}

// Expands entries [begin, end) of the flat verify array (at most kTileEntries) with one block. A tile
// inside one row goes to expand_row_tile; otherwise each thread's entries go in phases unrolled
// over the entries so that their loads are in flight together: owners (offsets only), row inputs,
// entry values (req_to_token, pool, LUT), then the stores. A store between loads would serialize
// them: the int64 outputs may alias the int64 inputs.
template <class MemorySpace, class Offsets, class Rows>
__device__ void expand_tile(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                            const Offsets& offsets, const Rows& rows, std::int64_t batch_size,
                            std::int64_t begin, std::int64_t end) {
  const std::int64_t first_row = owner_row(offsets, 0, batch_size - 1, begin);
  const std::int64_t last_row = owner_row(offsets, first_row, batch_size - 1, end - 1);
  if (first_row == last_row) {  // block-uniform
    expand_row_tile(in, out, rows(first_row), offsets(first_row), begin, end);
    return;
  }
  std::int64_t row[kEntriesPerThread], j[kEntriesPerThread];
  std::int64_t r = first_row;  // rows only grow with the entry index
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    const std::int64_t live = i < end ? i : end - 1;  // dead lanes repeat the last entry, never stored
    r = owner_row(offsets, r, last_row, live);
    row[k] = r;
    j[k] = live - offsets(r);
  }
  RowFields fields[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) fields[k] = rows(row[k]);
  EntryValues values[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) values[k] = entry_values(in, fields[k], j[k]);
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    if (i < end) store_entry(out, i, values[k]);
  }
}

// Tiles blockIdx.x, blockIdx.x + gridDim.x, ... of [0, total).
template <class MemorySpace, class Offsets, class Rows>
__device__ void expand_tiles(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                             const Offsets& offsets, const Rows& rows, std::int64_t batch_size,
                             std::int64_t total) {
  for (std::int64_t begin = std::int64_t(blockIdx.x) * kTileEntries; begin < total;
       begin += std::int64_t(gridDim.x) * kTileEntries)
    expand_tile(in, out, offsets, rows, batch_size, begin, begin + kTileEntries < total ? begin + kTileEntries : total);
}

// SPEC §4: write_offsets after [bs] are zeroed, every call; spread over the grid.
template <class MemorySpace>
__device__ void zero_write_offsets_tail(const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
  const std::int64_t last = out.write_req_capacity();
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t r = batch_size + 1 + std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r <= last; r += stride)
    out.write_offsets(r) = 0;
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
  __device__ int first_bad_row_or_none() const { return first_bad_row == INT_MAX ? -1 : first_bad_row; }
};

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
  // The seed's req_to_token load is issued now and used after the scan, so it overlaps the scan.
  const std::int32_t seed_raw =
      (leader && g.seed_position >= 0) ? in.req_to_token(g.pool_row, g.seed_position) : std::int32_t(-1);
  ScanPair base, totals;
  BlockScan(scan_storage).ExclusiveScan(lengths(g), base, ScanPair{0, 0u}, ScanPairSum(), totals);
  if (r < batch_size) offsets[r] = base.verify;
  if (r == 0) offsets[batch_size] = totals.verify;
  if (leader && mine_row) {
    out.write_offsets(r) = static_cast<std::int64_t>(base.write);
    out.write_seed_slot_indices(r) = g.seed_position >= 0 ? in.translate(seed_raw) : -1;
  }
  __syncthreads();
  if (leader && threadIdx.x == 0)
    write_totals(out, batch_size, totals.verify, totals.write, status.error_bits, status.first_bad_row_or_none());
  zero_write_offsets_tail(out, batch_size);

  if (totals.verify > out.verify_capacity()) return;  // overflow: the verify arrays stay untouched
  expand_tiles(in, out, SharedOffsets{offsets}, SharedRowFields{rows}, batch_size, totals.verify);
}

// The offsets stage for larger batches, in one block: chunks of kRowsChunk rows, each thread loading
// kRowsPerThread consecutive rows at once, a block scan per chunk with a running carry. Writes the
// workspace's verify_offsets, the WritePlan, the scalars and the status.
template <class MemorySpace>
__global__ void __launch_bounds__(kRowsThreads)
    rows_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                const std::int64_t batch_size) {
  using BlockScan = cub::BlockScan<ScanPair, kRowsThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ BlockStatus status;
  if (threadIdx.x == 0) status.reset();
  __syncthreads();

  ScanPair carry{0, 0u};
  for (std::int64_t chunk = 0; chunk < batch_size; chunk += kRowsChunk) {
    const std::int64_t first = chunk + std::int64_t(threadIdx.x) * kRowsPerThread;
    RowGeometry g[kRowsPerThread];
    ScanPair mine{0, 0u};
#pragma unroll
    for (int q = 0; q < kRowsPerThread; ++q) {
      // Rows past the batch read the last row (in bounds, so all loads are unconditional) and count for nothing.
      const std::int64_t r = first + q;
      g[q] = in.row_geometry(r < batch_size ? r : batch_size - 1);
      if (r >= batch_size) g[q] = RowGeometry{};
      mine = ScanPairSum()(mine, lengths(g[q]));
    }
    ScanPair base, aggregate;
    BlockScan(scan_storage).ExclusiveScan(mine, base, ScanPair{0, 0u}, ScanPairSum(), aggregate);
    ScanPair running = ScanPairSum()(carry, base);
    std::int64_t seeds[kRowsPerThread];
#pragma unroll
    for (int q = 0; q < kRowsPerThread; ++q) seeds[q] = in.seed_slot(g[q]);
#pragma unroll
    for (int q = 0; q < kRowsPerThread; ++q) {
      const std::int64_t r = first + q;
      if (r < batch_size) {
        status.add(g[q], r);
        out.verify_offsets(r) = running.verify;
        out.write_offsets(r) = static_cast<std::int64_t>(running.write);
        out.write_seed_slot_indices(r) = seeds[q];
      }
      running = ScanPairSum()(running, lengths(g[q]));
    }
    carry = ScanPairSum()(carry, aggregate);
    __syncthreads();  // scan_storage is reused by the next chunk
  }
  if (threadIdx.x == 0)
    write_totals(out, batch_size, carry.verify, carry.write, status.error_bits, status.first_bad_row_or_none());
  zero_write_offsets_tail(out, batch_size);
}

// The entries stage after rows_kernel: offsets staged in shared memory when they fit.
template <class MemorySpace>
__global__ void __launch_bounds__(kTileThreads)
    entries_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                   const std::int64_t batch_size) {
  __shared__ std::int64_t offsets[kSharedOffsetsRows + 1];
  if (out.enable() == 0) return;  // overflow: the verify arrays stay untouched
  const std::int64_t total = out.verify_offsets(batch_size);
  if (batch_size <= kSharedOffsetsRows) {
    for (std::int64_t r = threadIdx.x; r <= batch_size; r += kTileThreads) offsets[r] = out.verify_offsets(r);
    __syncthreads();
    expand_tiles(in, out, SharedOffsets{offsets}, GlobalRowFields<MemorySpace>{in}, batch_size, total);
  } else {
    expand_tiles(in, out, out.verify_offsets, GlobalRowFields<MemorySpace>{in}, batch_size, total);
  }
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
  static int entries_blocks(int device) {
    static const int blocks = resident_blocks(entries_kernel<MemorySpace>, kTileThreads, device);
    return blocks;
  }
};

// Tiles of kTileEntries up to the capacity (the host's only bound on the total), at most as many
// blocks as fit on the device at once; at least one block.
inline unsigned grid_blocks(std::int64_t verify_capacity, int resident) {
  const std::int64_t tiles = (verify_capacity + kTileEntries - 1) / kTileEntries;
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
    if (batch_size <= kFusedMaxRows) {
      const int resident = Kernels<MemorySpace>::fused_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan::entries[cuda_persistent_fused]");
      fused_plan_kernel<MemorySpace>
          <<<grid_blocks(out.verify_capacity(), resident), kTileThreads, 0, stream>>>(in, out, batch_size);
    } else {
      const int resident = Kernels<MemorySpace>::entries_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan::entries[cuda_persistent]");
      rows_kernel<MemorySpace><<<1, kRowsThreads, 0, stream>>>(in, out, batch_size);
      entries_kernel<MemorySpace>
          <<<grid_blocks(out.verify_capacity(), resident), kTileThreads, 0, stream>>>(in, out, batch_size);
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
