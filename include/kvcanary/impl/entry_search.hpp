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
    if (offsets(mid) <= entry) lo = mid;
    else hi = mid - 1;
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
  v.expected_token = in.expected_token(f.pool_row, f.valid_len, position);
  return v;
}

template <class MemorySpace>
KOKKOS_INLINE_FUNCTION void store_entry(const DeviceOutputs<MemorySpace>& out, std::int64_t i, const EntryValues& v) {
  out.verify_slot_indices(i) = v.slot;
  out.verify_expected_tokens(i) = v.expected_token;
  out.verify_expected_positions(i) = v.position;
  out.verify_prev_slot_indices(i) = v.prev_slot;
}

}  // namespace Impl
}  // namespace kvcanary

#endif
