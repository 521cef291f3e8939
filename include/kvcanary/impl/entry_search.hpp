#ifndef KVCANARY_IMPL_ENTRY_SEARCH_HPP
#define KVCANARY_IMPL_ENTRY_SEARCH_HPP

// Expanding one flat verify entry: find the row that owns it, then fill its four values.
// Shared by the portable and the CUDA persistent entries paths.

#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/row_rules.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

// The largest row r in [lo, hi] with offsets(r) <= entry: the owner of `entry`, skipping empty rows.
// Requires offsets(lo) <= entry.
template <class Offsets>
KOKKOS_INLINE_FUNCTION std::int64_t owner_row(const Offsets& offsets, std::int64_t lo, std::int64_t hi,
                                              std::int64_t entry) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (offsets(mid) <= entry)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The four values of one verify entry: the j-th entry of `row` (SPEC §4, "Verify entries").
struct EntryValues {
  std::int64_t slot, expected_token, position, prev_slot;
};

template <class MemorySpace>
KOKKOS_INLINE_FUNCTION EntryValues entry_values(const DeviceInputs<MemorySpace>& in, const RowFields& f,
                                                std::int64_t j) {
  const std::int64_t position = in.window_start(f.prefix) + j;
  EntryValues v;
  v.position = position;
  v.slot = in.slot_at(f.pool_row, position);
  // A sliding window does not restart the chain: the first entry points at its real predecessor.
  v.prev_slot = position > 0 ? in.slot_at(f.pool_row, position - 1) : -1;
  v.expected_token = in.expected_token(in.pool_row_data(f.pool_row), f.valid_len, position);
  return v;
}

template <class MemorySpace>
KOKKOS_INLINE_FUNCTION void store_entry(const DeviceOutputs<MemorySpace>& out, std::int64_t i, const EntryValues& v) {
  out.verify_slot_indices(i) = v.slot;
  out.verify_expected_tokens(i) = v.expected_token;
  out.verify_expected_positions(i) = v.position;
  out.verify_prev_slot_indices(i) = v.prev_slot;
}

// Entries [begin, end) of one row, by one thread in order (host backends, whose teams are one
// thread): each slot is also the next entry's prev_slot, so every LUT gather happens once, and the
// LUT line of an entry a few positions ahead is prefetched (SWA LUT reads are random cache misses).
template <class MemorySpace>
KOKKOS_INLINE_FUNCTION void expand_row_run(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                                           const RowFields& f, std::int64_t row_begin, std::int64_t begin,
                                           std::int64_t end) {
  if (begin >= end) return;  // empty rows (padding, bad rows) read nothing
  std::int64_t position = in.window_start(f.prefix) + (begin - row_begin);
  std::int64_t prev = position > 0 ? in.slot_at(f.pool_row, position - 1) : -1;
  const std::int32_t* const pool = in.pool_row_data(f.pool_row);
  for (std::int64_t i = begin; i < end; ++i, ++position) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
    // Into L2 only (locality 1): more misses in flight than L1's fill buffers allow (perf-notes, host v3).
    constexpr std::int64_t kPrefetchDistance = 32;
    if (in.has_lut && position + kPrefetchDistance < in.max_seq_len) {
      const std::int32_t ahead = in.req_to_token(f.pool_row, position + kPrefetchDistance);
      if (ahead >= 0) __builtin_prefetch(&in.lut(ahead < in.lut_len ? ahead : in.lut_len - 1), 0, 1);
    }
#endif
    const std::int64_t slot = in.slot_at(f.pool_row, position);
    store_entry(out, i, EntryValues{slot, in.expected_token(pool, f.valid_len, position), position, prev});
    prev = slot;
  }
}

}  // namespace Impl
}  // namespace kvcanary

#endif
