#ifndef KVCANARY_IMPL_CUDA_TILES_HPP
#define KVCANARY_IMPL_CUDA_TILES_HPP

// The CUDA persistent path's unit of work: one block expands one tile (up to kTileEntries entries)
// of the flat verify array, given the rows that own the tile's first and last entries, and hands each
// entry to a sink: StoreEntries writes the VerifyPlan's arrays (plan()); a sink may instead consume the
// entry where it is made (plan_and_verify(), SPEC-CANARY §5.1).

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/entry_search.hpp>
#include <kvcanary/impl/offsets.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

constexpr int kTileThreads = 256;     // blocks of the fused and the entries kernels
constexpr int kEntriesPerThread = 4;  // per tile; all loads of a tile are issued before any store
constexpr std::int64_t kTileEntries =
    std::int64_t(kTileThreads) * kEntriesPerThread;  // 4x larger was slower (perf-notes v3)
// Tiles of one entry a thread, for small batches whose 4-entry tiles would leave SMs idle: one SM
// stores only ~14-24 bytes a cycle to L2 (perf-notes v7), so small tiles on many SMs finish sooner.
// Larger totals keep kEntriesPerThread (bs 4 x 128K: 7.8 us with it, 9.1 us with one entry a thread).
constexpr int kSpreadEntriesPerThread = 1;

// Offsets and row inputs of rows [first, first + n), copied to shared memory by the kernel.
struct StagedOffsets {
  const std::int64_t* data;
  std::int64_t first;
  __device__ std::int64_t operator()(std::int64_t r) const { return data[r - first]; }
};

struct StagedRowFields {
  const RowFields* data;
  std::int64_t first;
  __device__ RowFields operator()(std::int64_t r) const { return data[r - first]; }
};

template <class MemorySpace>
struct GlobalRowFields {
  const DeviceInputs<MemorySpace>& in;
  __device__ RowFields operator()(std::int64_t r) const { return in.row_fields(r); }
};

// Evict-first stores: with a LUT, the outputs would otherwise push the LUT's lines out of L2
// between calls (perf-notes v5: SWA 22.0 -> 18.1 us; without a LUT they cost 3-6%).
template <class MemorySpace>
__device__ void store_entry_streaming(const DeviceOutputs<MemorySpace>& out, std::int64_t i, const EntryValues& v) {
  __stcs(reinterpret_cast<long long*>(&out.verify_slot_indices(i)), static_cast<long long>(v.slot));
  __stcs(reinterpret_cast<long long*>(&out.verify_expected_tokens(i)), static_cast<long long>(v.expected_token));
  __stcs(reinterpret_cast<long long*>(&out.verify_expected_positions(i)), static_cast<long long>(v.position));
  __stcs(reinterpret_cast<long long*>(&out.verify_prev_slot_indices(i)), static_cast<long long>(v.prev_slot));
}

// The plan's sink: each entry into the VerifyPlan's four arrays. `streaming` (a tile of one row with a LUT)
// stores evict-first; the row is not needed.
template <class MemorySpace>
struct StoreEntries {
  DeviceOutputs<MemorySpace> out;
  __device__ void put(std::int64_t i, std::int64_t /*row*/, const EntryValues& v, bool streaming) const {
    if (streaming)
      store_entry_streaming(out, i, v);
    else
      store_entry(out, i, v);
  }
  // Called once per call (one thread) with the plan's verify total: a consuming sink counts its runs here.
  __device__ void count_runs(std::int64_t /*total*/, std::int64_t /*capacity*/) const {}
};

// The sink of an offsets-only plan (plan_and_verify() with its verify after the plan's kernels): no tile is
// expanded, so the plan's kernels write the offsets, the WritePlan, the scalars and the status only.
struct SkipEntries {
  __device__ void put(std::int64_t, std::int64_t, const EntryValues&, bool) const {}
  __device__ void count_runs(std::int64_t, std::int64_t) const {}
};

template <class Sink>
constexpr bool expands_entries = !std::is_same<Sink, SkipEntries>::value;

// What a launch that carries a rider does to the ring beside it, for ride() (below). NoAppends: nothing (an
// offsets-only plan). A plan that checks its entries (RiderCountsRuns, cuda_single_launch.hpp) appends rows
// and leaves the counting of its runs to the rider: part(thread) is row `thread`'s share of the verify total
// (loaded by every rider thread beside its own loads), count(total) adds the runs, by one thread after the
// barrier that follows every rider thread's loads, so that the rider reads the counters as they were before
// the launch.
struct NoAppends {
  static constexpr bool kAppends = false;
  __device__ std::int64_t part(int /*thread*/) const { return 0; }
  __device__ void count(std::int64_t /*total*/) const {}
};

// A second job a plan may carry in one extra block of its first launch (the runtime's pump snapshot,
// runtime/impl/pump_in_plan.hpp), so that the job costs the stream no launch of its own. The extra block is
// the grid's first, so that a block tells whether it is the rider's from its index alone (the grid's last
// would need gridDim, a parameter load every plan block waited for before its first loads): it calls
// ride(thread, threads, appends) with all its threads and does nothing else. The
// thread that writes the plan's scalars calls token = before_scalars() at the start of its kernel and
// after_scalars(token, the verify scalars it wrote) after them; those scalars, the ring rows its checks append
// and the run counters it leaves to the rider (`appends`) are the only device words the plan's launch writes
// that a rider may read. NoRider: none.
struct NoRider {
  static constexpr bool kActive = false;
  __device__ std::int64_t before_scalars() const { return 0; }
  __device__ void after_scalars(std::int64_t /*token*/, const VerifyScalars& /*scalars*/) const {}
  template <class Appends>
  __device__ void ride(int /*thread*/, int /*threads*/, const Appends& /*appends*/) const {}
};

// The blocks of a launch that carries `Rider` which are the plan's: all but the rider's.
template <class Rider>
__device__ unsigned plan_blocks() {
  return gridDim.x - (Rider::kActive ? 1u : 0u);
}
// This block's index among the plan's blocks (the rider's block, the grid's first, returns before it asks).
template <class Rider>
__device__ unsigned plan_block() {
  return blockIdx.x - (Rider::kActive ? 1u : 0u);
}

// A tile inside one row, the common case when rows are longer than a tile: the row's inputs and
// base pointers once, then per entry one req_to_token load, one pool load and the stores. Entries of
// a warp have consecutive positions, so an entry's predecessor slot is the slot of the lane below
// (one LUT gather per entry, not two); lane 0 loads its own.
template <int kPerThread, class MemorySpace, class Sink>
__device__ void expand_row_tile(const DeviceInputs<MemorySpace>& in, const Sink& sink, const RowFields& f,
                                std::int64_t row, std::int64_t row_begin, std::int64_t begin, std::int64_t end) {
  const std::int64_t first_position = in.window_start(f.prefix) + (begin - row_begin);
  const std::int32_t* const tokens = &in.req_to_token(f.pool_row, 0);
  const std::int32_t* const pool = in.pool_row_data(f.pool_row);
  const bool lane0 = threadIdx.x % 32 == 0;
  std::int64_t position[kPerThread], token[kPerThread];
  std::int32_t raw[kPerThread], raw_before[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    position[k] = first_position + ((i < end ? i : end - 1) - begin);  // dead lanes repeat the last entry
    raw[k] = tokens[position[k]];
    raw_before[k] = (lane0 & (position[k] > 0)) ? tokens[position[k] - 1] : -1;
    token[k] = in.expected_token(pool, f.valid_len, position[k]);
  }
  std::int64_t slot[kPerThread], before[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    slot[k] = in.translate(raw[k]);
    before[k] = lane0 ? in.translate(raw_before[k]) : 0;
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const std::int64_t below = __shfl_up_sync(0xffffffffu, slot[k], 1);
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    const EntryValues v{slot[k], token[k], position[k], lane0 ? before[k] : below};
    if (i >= end) continue;
    sink.put(i, row, v, in.has_lut);
  }
}

// Expands entries [begin, end) of the flat verify array (at most kTileThreads * kPerThread) with one block;
// first_row and last_row own entries begin and end - 1. A tile inside one row goes to
// expand_row_tile; otherwise each thread's entries go in phases unrolled over the entries so that
// their loads are in flight together: owners (offsets only), row inputs, entry values
// (req_to_token, pool, LUT), then the stores. A store between loads would serialize them: the int64
// outputs may alias the int64 inputs.
template <int kPerThread, class MemorySpace, class Sink, class Offsets, class Rows>
__device__ void expand_tile(const DeviceInputs<MemorySpace>& in, const Sink& sink, const Offsets& offsets,
                            const Rows& rows, std::int64_t first_row, std::int64_t last_row, std::int64_t begin,
                            std::int64_t end) {
  if (first_row == last_row) {  // block-uniform
    expand_row_tile<kPerThread>(in, sink, rows(first_row), first_row, offsets(first_row), begin, end);
    return;
  }
  std::int64_t row[kPerThread], j[kPerThread];
  std::int64_t r = first_row;  // rows only grow with the entry index
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    const std::int64_t live = i < end ? i : end - 1;  // dead lanes repeat the last entry, never stored
    r = owner_row(offsets, r, last_row, live);
    row[k] = r;
    j[k] = live - offsets(r);
  }
  RowFields fields[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) fields[k] = rows(row[k]);
  EntryValues values[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) values[k] = entry_values(in, fields[k], j[k]);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    if (i < end) sink.put(i, row[k], values[k], false);
  }
}

// Tiles (of kTileThreads * kPerThread entries) block, block + blocks, ... of [0, total), `blocks` the plan's
// blocks of the grid (plan_blocks()) and `block` this one's index among them (plan_block()), with the offsets
// and row inputs of every row at hand (the fused and small kernels' shared memory).
template <int kPerThread, class MemorySpace, class Sink, class Offsets, class Rows>
__device__ void expand_tiles(const DeviceInputs<MemorySpace>& in, const Sink& sink, const Offsets& offsets,
                             const Rows& rows, std::int64_t batch_size, std::int64_t total, unsigned blocks,
                             unsigned block) {
  constexpr std::int64_t tile = std::int64_t(kTileThreads) * kPerThread;
  for (std::int64_t begin = std::int64_t(block) * tile; begin < total; begin += std::int64_t(blocks) * tile) {
    const std::int64_t end = begin + tile < total ? begin + tile : total;
    const std::int64_t first_row = owner_row(offsets, 0, batch_size - 1, begin);
    const std::int64_t last_row = owner_row(offsets, first_row, batch_size - 1, end - 1);
    expand_tile<kPerThread>(in, sink, offsets, rows, first_row, last_row, begin, end);
  }
}

struct RowSpan {
  std::int64_t first, last;
};

struct OwnerRange {  // the owner of an entry lies in [lo, lo + span)
  std::int64_t lo, span;

  __device__ std::int64_t end() const { return lo + span; }
  __device__ std::int64_t sample(std::int64_t stride) const { return lo + std::int64_t(threadIdx.x) * stride; }
  __device__ void narrow(std::int64_t stride, int at_or_below) {
    const std::int64_t old_end = end();
    lo += std::int64_t(at_or_below - 1) * stride;  // sample 0 is lo itself, always <= the entry
    span = old_end - lo < stride ? old_end - lo : stride;
  }
};

// The rows that own entries `a` and `b` (a <= b < total) of the flat verify array, found by the
// whole block from offsets in global memory: each round samples the remaining range at an even
// stride, one sample a thread, and counts the samples <= the entry (a barrier each); bs <= 65536
// takes two rounds. Requires every thread of the block.
template <class Offsets>
__device__ RowSpan block_owner_rows(const Offsets& offsets, std::int64_t batch_size, std::int64_t a, std::int64_t b) {
  OwnerRange ra{0, batch_size}, rb{0, batch_size};
  while (ra.span > 1 || rb.span > 1) {  // block-uniform
    const std::int64_t stride_a = (ra.span + kTileThreads - 1) / kTileThreads;
    const std::int64_t stride_b = (rb.span + kTileThreads - 1) / kTileThreads;
    const std::int64_t sa = ra.sample(stride_a), sb = rb.sample(stride_b);
    const bool below_a = sa < ra.end() && offsets(sa) <= a;
    const bool below_b = sb < rb.end() && offsets(sb) <= b;
    ra.narrow(stride_a, __syncthreads_count(below_a));
    rb.narrow(stride_b, __syncthreads_count(below_b));
  }
  return {ra.lo, rb.lo};
}

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
