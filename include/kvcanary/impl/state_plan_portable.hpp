#ifndef KVCANARY_IMPL_STATE_PLAN_PORTABLE_HPP
#define KVCANARY_IMPL_STATE_PLAN_PORTABLE_HPP

// state_plan (SPEC-CANARY §13.2) as one Kokkos parallel_scan over [0, n]: item i < n makes entry k (the
// entries made before it, the scanned value) or, for a pool row or position outside req_to_token, an
// OUT_OF_RANGE row; item n writes the counts, enable, the last offset and the run counters. Rows and stores
// happen in the final pass only (a backend may run the scan's body twice).

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/stages/canary_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct StatePlanFunctor {
  using value_type = std::int64_t;
  template <class T>
  using In = Kokkos::View<const T*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  template <class T>
  using InMatrix = Kokkos::View<const T**, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Out = Kokkos::View<std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Count = Kokkos::View<std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  In<std::int64_t> state_slots, req_pool_indices, positions, identities;  // identities: null when absent
  InMatrix<std::int32_t> req_to_token, token_pool;                        // token_pool: null when absent
  Out slots, tokens, entry_positions, prevs, entry_identities, offsets;
  Count verify_num_valid, enable, write_num_valid_reqs;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;
  std::int64_t n = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, std::int64_t& made, const bool final) const {
    if (i == n) {
      if (final) finish(made);
      return;
    }
    const std::int64_t slot = state_slots(i), rp = req_pool_indices(i), q = positions(i);
    if (slot < 0 || q < 0) return;  // padding, or a state that summarises nothing
    const std::int64_t max_reqs = static_cast<std::int64_t>(req_to_token.extent(0));
    const std::int64_t max_seq_len = static_cast<std::int64_t>(req_to_token.extent(1));
    if (rp < 0 || rp >= max_reqs) {
      if (final) ring.push(kind, rp, q, -1, -1, -1, i, kOutOfRange);
      return;
    }
    if (q >= max_seq_len) {
      if (final) ring.push(kind, q, q, -1, -1, -1, i, kOutOfRange);
      return;
    }
    if (final) {
      const std::int64_t k = made;
      slots(k) = slot;
      entry_positions(k) = q;
      prevs(k) = q >= 1 ? static_cast<std::int64_t>(req_to_token(rp, q - 1)) : -1;
      tokens(k) = expected_token(rp, q);
      if (identities.data() != nullptr) entry_identities(k) = identities(i);
      offsets(k) = k;
    }
    made += 1;
  }

  KOKKOS_INLINE_FUNCTION std::int64_t expected_token(std::int64_t rp, std::int64_t q) const {
    if (token_pool.data() == nullptr) return -1;
    if (rp >= static_cast<std::int64_t>(token_pool.extent(0)) || q >= static_cast<std::int64_t>(token_pool.extent(1)))
      return -1;
    return static_cast<std::int64_t>(token_pool(rp, q));
  }

  KOKKOS_INLINE_FUNCTION void finish(std::int64_t made) const {
    offsets(made) = made;
    verify_num_valid() = static_cast<std::int32_t>(made);  // made <= n <= capacity < 2^31 (checked on the host)
    write_num_valid_reqs() = static_cast<std::int32_t>(made);
    enable() = 1;
    ring.add_runs(made, 1);
  }
};

template <class ExecutionSpace, class MemorySpace>
void launch_state_plan_portable(const ExecutionSpace& space, const StatePlanFunctor<MemorySpace>& functor) {
  static_assert(sizeof(functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  Kokkos::parallel_scan(
      "kvcanary::state_plan[portable]",
      light_weight(Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, functor.n + 1)),
      functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
