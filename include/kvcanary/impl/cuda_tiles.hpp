#ifndef KVCANARY_IMPL_CUDA_TILES_HPP
#define KVCANARY_IMPL_CUDA_TILES_HPP

// The CUDA persistent path's unit of work: one block expands one tile (up to kTileEntries entries)
// of the flat verify array, given the rows that own the tile's first and last entries.

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/entry_search.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

constexpr int kTileThreads = 256;     // blocks of the fused and the entries kernels
constexpr int kEntriesPerThread = 4;  // per tile; all loads of a tile are issued before any store
constexpr std::int64_t kTileEntries = std::int64_t(kTileThreads) * kEntriesPerThread;  // 4x larger was slower (perf-notes v3)

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

// Where one entry's values come from: its row's req_to_token and pool rows, the row's valid length,
// the entry's position, and whether it loads its predecessor's slot itself (own_prev) or takes it
// from the lane below, which holds the previous entry of the same row.
struct EntrySource {
  const std::int32_t* tokens;
  const std::int32_t* pool;
  std::int64_t valid_len, position;
  bool own_prev;
};

// Entries begin + k * kTileThreads + threadIdx.x (k < kEntriesPerThread) below `end`, each described
// by source(k), in phases unrolled over the entries so that their loads are in flight together:
// req_to_token and pool, then the LUT, then the stores (a store between loads would serialize them:
// the int64 outputs may alias the int64 inputs). Entries of a warp are consecutive, so the lane below
// holds the previous entry: one LUT gather per entry, not two. Dead lanes (past `end`) must describe
// a live entry (they repeat the last one) and store nothing.
template <class MemorySpace, class Sources>
__device__ void expand_entries(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                               std::int64_t begin, std::int64_t end, const Sources& source) {
  std::int64_t position[kEntriesPerThread], token[kEntriesPerThread];
  std::int32_t raw[kEntriesPerThread], raw_before[kEntriesPerThread];
  bool own_prev[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const EntrySource e = source(k);
    position[k] = e.position;
    own_prev[k] = e.own_prev;
    raw[k] = e.tokens[e.position];
    raw_before[k] = (e.own_prev & (e.position > 0)) ? e.tokens[e.position - 1] : -1;
    token[k] = in.expected_token(e.pool, e.valid_len, e.position);
  }
  std::int64_t slot[kEntriesPerThread], before[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    slot[k] = in.translate(raw[k]);
    before[k] = own_prev[k] ? in.translate(raw_before[k]) : 0;
  }
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t below = __shfl_up_sync(0xffffffffu, slot[k], 1);
    const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
    const EntryValues v{slot[k], token[k], position[k], own_prev[k] ? before[k] : below};
    if (i >= end) continue;
    if (in.has_lut) store_entry_streaming(out, i, v);
    else store_entry(out, i, v);
  }
}

// The live entry a lane stands for: its k-th entry, or the tile's last for dead lanes.
__device__ inline std::int64_t live_entry(std::int64_t begin, std::int64_t end, int k) {
  const std::int64_t i = begin + k * kTileThreads + threadIdx.x;
  return i < end ? i : end - 1;
}

// Expands entries [begin, end) of the flat verify array (at most kTileEntries) with one block;
// first_row and last_row own entries begin and end - 1. A tile inside one row (the common case when
// rows are longer than a tile) reads the row's inputs and base pointers once; otherwise each entry's
// row is found (owner search over `offsets`, all entries of a thread first) and its inputs read.
template <class MemorySpace, class Offsets, class Rows>
__device__ void expand_tile(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                            const Offsets& offsets, const Rows& rows, std::int64_t first_row,
                            std::int64_t last_row, std::int64_t begin, std::int64_t end) {
  const bool lane0 = threadIdx.x % 32 == 0;
  if (first_row == last_row) {  // block-uniform
    const RowFields f = rows(first_row);
    const std::int64_t first_position = in.window_start(f.prefix) + (begin - offsets(first_row));
    const std::int32_t* const tokens = &in.req_to_token(f.pool_row, 0);
    const std::int32_t* const pool = in.pool_row_data(f.pool_row);
    expand_entries(in, out, begin, end, [&](int k) {
      return EntrySource{tokens, pool, f.valid_len, first_position + (live_entry(begin, end, k) - begin), lane0};
    });
    return;
  }
  std::int64_t row[kEntriesPerThread], j[kEntriesPerThread];
  std::int64_t r = first_row;  // rows only grow with the entry index
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) {
    const std::int64_t live = live_entry(begin, end, k);
    r = owner_row(offsets, r, last_row, live);
    row[k] = r;
    j[k] = live - offsets(r);
  }
  RowFields fields[kEntriesPerThread];
#pragma unroll
  for (int k = 0; k < kEntriesPerThread; ++k) fields[k] = rows(row[k]);
  expand_entries(in, out, begin, end, [&](int k) {
    const RowFields& f = fields[k];
    return EntrySource{&in.req_to_token(f.pool_row, 0), in.pool_row_data(f.pool_row), f.valid_len,
                       in.window_start(f.prefix) + j[k], lane0 || j[k] == 0};
  });
}

// The rows that own entries `a` and `b` (a <= b < total) of the flat verify array, found by the
// whole block from offsets in global memory: each round samples the remaining range at an even
// stride, one sample a thread, and counts the samples <= the entry (a barrier each); bs <= 65536
// takes two rounds. Requires every thread of the block.
struct RowSpan {
  std::int64_t first, last;
};

struct OwnerRange {  // the owner of an entry lies in [lo, lo + span)
  std::int64_t lo, span;

  __device__ std::int64_t sample(std::int64_t stride) const {
    return lo + std::int64_t(threadIdx.x) * stride;
  }
  __device__ void narrow(std::int64_t stride, int at_or_below) {
    const std::int64_t end = lo + span;
    lo += std::int64_t(at_or_below - 1) * stride;  // sample 0 is lo itself, always <= the entry
    span = end - lo < stride ? end - lo : stride;
  }
};

template <class Offsets>
__device__ RowSpan block_owner_rows(const Offsets& offsets, std::int64_t batch_size, std::int64_t a,
                                    std::int64_t b) {
  OwnerRange ra{0, batch_size}, rb{0, batch_size};
  while (ra.span > 1 || rb.span > 1) {  // block-uniform
    const std::int64_t stride_a = (ra.span + kTileThreads - 1) / kTileThreads;
    const std::int64_t stride_b = (rb.span + kTileThreads - 1) / kTileThreads;
    const std::int64_t sa = ra.sample(stride_a), sb = rb.sample(stride_b);
    const bool below_a = sa < ra.lo + ra.span && offsets(sa) <= a;
    const bool below_b = sb < rb.lo + rb.span && offsets(sb) <= b;
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
