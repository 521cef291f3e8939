#ifndef KVCANARY_SRC_REFERENCE_RING_HPP
#define KVCANARY_SRC_REFERENCE_RING_HPP

// What every stage of the host reference does with its ring (SPEC-CANARY §1): the consistency check of a
// host ring and "fill once" appends, with the counters' mod-2^64 arithmetic. Internal to src/.

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/impl/hash.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace reference {
namespace detail {

inline std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
  return Impl::as_int64(Impl::as_uint64(a) + Impl::as_uint64(b));
}

inline std::int64_t size_of(const std::vector<std::int64_t>& values) {
  return static_cast<std::int64_t>(values.size());
}

using Impl::rows_held;  // the ring's rows as the count says they should be (canary_types.hpp)

inline void check_ring(const char* function, const ViolationRing& ring) {
  Impl::check_ring_capacity(function, ring.capacity);
  if (static_cast<std::uint64_t>(ring.rows.size()) != rows_held(ring.count, ring.capacity))
    Impl::throw_invalid_in(function, "ring holds ", ring.rows.size(), " rows but its count ", ring.count,
                           " and capacity ", ring.capacity, " say ", rows_held(ring.count, ring.capacity));
}

// SPEC-CANARY §1: seq = count++; the row is kept only when seq < capacity (fill once, never wraps).
inline void record_violation(ViolationRing& ring, KernelKind kind, std::int64_t slot, std::int64_t position,
                             std::int64_t stored_token, std::int64_t expected_token, std::int64_t stored_chain_hash,
                             std::int64_t expected_aux, std::int64_t fail_reason_bits) {
  const std::uint64_t seq = Impl::as_uint64(ring.count);
  ring.count = wrapping_add(ring.count, 1);
  if (seq < Impl::as_uint64(ring.capacity))
    ring.rows.push_back(RingRow{static_cast<std::int64_t>(kind), slot, position, stored_token, expected_token,
                                stored_chain_hash, expected_aux, fail_reason_bits});
}

}  // namespace detail
}  // namespace reference
}  // namespace kvcanary

#endif
