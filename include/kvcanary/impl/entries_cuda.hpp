#ifndef KVCANARY_IMPL_ENTRIES_CUDA_HPP
#define KVCANARY_IMPL_ENTRIES_CUDA_HPP

// The CUDA fast path (EntriesAlgorithm::CudaPersistent), chosen by EntriesBackend<Kokkos::Cuda>.
//
// * Batches of up to kFusedMaxRows rows: ONE kernel. Every block scans the rows' verify lengths into
//   shared memory (a few loads per thread, one CUB block scan), block 0 also writes the WritePlan,
//   the scalars and the status, and then all blocks expand their tiles of the verify array.
//   Recomputing a few thousand row lengths per block costs less than a second launch (~1 µs in a graph).
// * Larger batches: the portable offsets scan, then one persistent entries kernel over global offsets.
// Both kernels have a grid sized from the SM count and occupancy and walk tiles of kTileEntries
// with a grid stride; each thread loads the values of all its entries in a tile before storing any.

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

constexpr int kBlockThreads = 256;
constexpr int kEntriesPerThread = 8;
constexpr std::int64_t kTileEntries = std::int64_t(kBlockThreads) * kEntriesPerThread;
constexpr std::int64_t kFusedMaxRows = 4096;  // 32 KB of shared offsets per block

struct SharedOffsets {
  const std::int64_t* data;
  __device__ std::int64_t operator()(std::int64_t i) const { return data[i]; }
};

// Expands the tiles blockIdx.x, blockIdx.x + gridDim.x, ... of the flat verify array [0, total).
template <class MemorySpace, class Offsets>
__device__ void expand_tiles(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                             const Offsets& offsets, std::int64_t batch_size, std::int64_t total) {
  const std::int64_t stride = std::int64_t(gridDim.x) * kTileEntries;
  for (std::int64_t begin = std::int64_t(blockIdx.x) * kTileEntries; begin < total; begin += stride) {
    const std::int64_t end = begin + kTileEntries < total ? begin + kTileEntries : total;
    const std::int64_t first_row = owner_row(offsets, 0, batch_size - 1, begin);
    const std::int64_t last_row = owner_row(offsets, first_row, batch_size - 1, end - 1);
    // Loads for all of this thread's entries first, then the stores: the compiler cannot move a
    // load above a store to a possibly aliasing int64 array, so interleaving would serialize them.
    EntryValues values[kEntriesPerThread];
    std::int64_t row = first_row;
#pragma unroll
    for (int k = 0; k < kEntriesPerThread; ++k) {
      const std::int64_t i = begin + k * kBlockThreads + threadIdx.x;
      if (i < end) {
        row = owner_row(offsets, row, last_row, i);  // rows only grow with i
        values[k] = entry_values(in, row, i - offsets(row));
      }
    }
#pragma unroll
    for (int k = 0; k < kEntriesPerThread; ++k) {
      const std::int64_t i = begin + k * kBlockThreads + threadIdx.x;
      if (i < end) store_entry(out, i, values[k]);
    }
  }
}

struct ScanPair {
  std::int64_t verify;
  std::uint64_t write;  // wraps, like the portable scan
};

struct ScanPairSum {
  __device__ ScanPair operator()(const ScanPair& a, const ScanPair& b) const {
    return {a.verify + b.verify, a.write + b.write};
  }
};

// The whole plan in one launch, for batch_size <= kFusedMaxRows.
template <class MemorySpace>
__global__ void __launch_bounds__(kBlockThreads)
    fused_plan_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                      const std::int64_t batch_size) {
  using BlockScan = cub::BlockScan<ScanPair, kBlockThreads>;
  __shared__ std::int64_t offsets[kFusedMaxRows + 1];
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int error_bits;
  __shared__ int first_bad_row;
  const bool leader = blockIdx.x == 0;  // writes the WritePlan, the scalars and the status
  if (threadIdx.x == 0) {
    error_bits = 0;
    first_bad_row = INT_MAX;
  }
  __syncthreads();

  // Each thread owns a run of consecutive rows: lengths and a local exclusive scan, then a block scan.
  const std::int64_t rows_per_thread = (batch_size + kBlockThreads - 1) / kBlockThreads;
  const std::int64_t row_begin =
      threadIdx.x * rows_per_thread < batch_size ? threadIdx.x * rows_per_thread : batch_size;
  const std::int64_t row_end = row_begin + rows_per_thread < batch_size ? row_begin + rows_per_thread : batch_size;
  ScanPair mine{0, 0u};
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const RowGeometry g = in.row_geometry(r);
    offsets[r] = mine.verify;
    mine.verify += g.verify_len;
    mine.write += static_cast<std::uint64_t>(g.write_len);
    if (leader && g.error_bits != 0) {
      atomicOr(&error_bits, g.error_bits);
      atomicMin(&first_bad_row, static_cast<int>(r));
    }
  }
  ScanPair base, totals;
  BlockScan(scan_storage).ExclusiveScan(mine, base, ScanPair{0, 0u}, ScanPairSum(), totals);
  for (std::int64_t r = row_begin; r < row_end; ++r) offsets[r] += base.verify;
  if (threadIdx.x == 0) offsets[batch_size] = totals.verify;
  __syncthreads();

  if (leader) {
    std::uint64_t write = base.write;
    for (std::int64_t r = row_begin; r < row_end; ++r) {
      const RowGeometry g = in.row_geometry(r);
      out.write_offsets(r) = static_cast<std::int64_t>(write);
      write += static_cast<std::uint64_t>(g.write_len);
      out.write_seed_slot_indices(r) = in.seed_slot(g);
    }
    if (threadIdx.x == 0)
      write_totals(out, batch_size, totals.verify, totals.write, error_bits,
                   first_bad_row == INT_MAX ? -1 : first_bad_row);
  }
  // SPEC §4: write_offsets after [bs] are zeroed, every call.
  const std::int64_t last = out.write_req_capacity();
  for (std::int64_t r = batch_size + 1 + std::int64_t(blockIdx.x) * kBlockThreads + threadIdx.x; r <= last;
       r += std::int64_t(gridDim.x) * kBlockThreads)
    out.write_offsets(r) = 0;

  if (totals.verify > out.verify_capacity()) return;  // overflow: the verify arrays stay untouched
  expand_tiles(in, out, SharedOffsets{offsets}, batch_size, totals.verify);
}

// The entries stage alone, after the offsets scan wrote verify_offsets and enable.
template <class MemorySpace>
__global__ void __launch_bounds__(kBlockThreads)
    entries_kernel(const DeviceInputs<MemorySpace> in, const DeviceOutputs<MemorySpace> out,
                   const std::int64_t batch_size) {
  if (out.enable() == 0) return;
  expand_tiles(in, out, out.verify_offsets, batch_size, out.verify_offsets(batch_size));
}

// Blocks that fit on the device at once (SM count x occupancy), queried once per kernel;
// 0 when the query fails, which sends the call to the portable path.
template <class Kernel>
int resident_blocks(Kernel kernel, int device) {
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlockThreads, 0) != cudaSuccess) return 0;
  return sms * per_sm;
}

template <class MemorySpace>
struct Kernels {
  static int fused_blocks(int device) {
    static const int blocks = resident_blocks(fused_plan_kernel<MemorySpace>, device);
    return blocks;
  }
  static int entries_blocks(int device) {
    static const int blocks = resident_blocks(entries_kernel<MemorySpace>, device);
    return blocks;
  }
};

inline unsigned grid_size(std::int64_t verify_capacity, int resident) {
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
    if (batch_size <= kFusedMaxRows) {
      const int resident = Kernels<MemorySpace>::fused_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan[cuda_persistent_fused]");
      fused_plan_kernel<MemorySpace><<<grid_size(out.verify_capacity(), resident), kBlockThreads, 0,
                                       space.cuda_stream()>>>(in, out, batch_size);
    } else {
      const int resident = Kernels<MemorySpace>::entries_blocks(device);
      if (resident <= 0) return false;
      Kokkos::Profiling::pushRegion("kvcanary::plan[cuda_persistent]");
      launch_offsets(space, in, out, batch_size);
      entries_kernel<MemorySpace><<<grid_size(out.verify_capacity(), resident), kBlockThreads, 0,
                                    space.cuda_stream()>>>(in, out, batch_size);
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
