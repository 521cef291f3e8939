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

// Writes verify entry `i`, owned by `row` (SPEC §4, "Verify entries").
template <class MemorySpace>
KOKKOS_INLINE_FUNCTION void write_entry(const DeviceInputs<MemorySpace>& in, const DeviceOutputs<MemorySpace>& out,
                                        std::int64_t row, std::int64_t i) {
  const std::int64_t prefix = in.prefix_lens(row);
  const int window = in.swa_window_size;
  const std::int64_t window_start = (window > 0 && prefix > window) ? prefix - window : 0;
  const std::int64_t pool_row = in.req_pool_indices(row);
  const std::int64_t position = window_start + (i - out.verify_offsets(row));
  out.verify_expected_positions(i) = position;
  out.verify_slot_indices(i) = in.slot_at(pool_row, position);
  out.verify_prev_slot_indices(i) = position > 0 ? in.slot_at(pool_row, position - 1) : -1;
  out.verify_expected_tokens(i) = in.expected_token(row, pool_row, position);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
