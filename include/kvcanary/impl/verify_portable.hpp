#ifndef KVCANARY_IMPL_VERIFY_PORTABLE_HPP
#define KVCANARY_IMPL_VERIFY_PORTABLE_HPP

// The verify stage (SPEC-CANARY §5) as one Kokkos parallel_for over the plan's entries (a launch bounded
// by one wave: launch_canary_entries()), each entry read once and checked against every target buffer
// (the K and V halves share a plan).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

// clamp(verify_num_valid, 0, verify_capacity) of SPEC-CANARY §5: the entries a verify checks.
KOKKOS_INLINE_FUNCTION std::int64_t active_entries(const std::int32_t num_valid, const std::int64_t capacity) {
  const std::int64_t n = num_valid;
  return n < 0 ? 0 : (n > capacity ? capacity : n);
}

template <class MemorySpace>
struct DeviceVerifyPlan {
  using Array = Kokkos::View<const std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Scalar = Kokkos::View<const std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Array slots, expected_tokens, expected_positions, prev_slots;
  Array identities;  // SPEC-CANARY §11.7: read only when has_identities
  Scalar num_valid, enable;
  bool has_identities = false;

  DeviceVerifyPlan() = default;
  explicit DeviceVerifyPlan(const VerifyPlan<MemorySpace>& p)
      : slots(p.verify_slot_indices),
        expected_tokens(p.verify_expected_tokens),
        expected_positions(p.verify_expected_positions),
        prev_slots(p.verify_prev_slot_indices),
        num_valid(p.verify_num_valid),
        enable(p.enable),
        has_identities(p.verify_identities.has_value()) {
    if (has_identities) identities = Array(p.verify_identities->data(), p.verify_identities->extent(0));
  }

  KOKKOS_INLINE_FUNCTION std::int64_t capacity() const { return static_cast<std::int64_t>(slots.extent(0)); }
  KOKKOS_INLINE_FUNCTION std::int64_t active(std::int32_t num_valid_value) const {
    return active_entries(num_valid_value, capacity());
  }
};

template <class MemorySpace>
struct DeviceVerifyTarget {
  DeviceBuffer<MemorySpace> buffer;
  DeviceRealKv real_kv;
  std::int64_t kernel_kind = 0;
};

// One plan entry (SPEC-CANARY §5 step 3), the expected token already -1 when the check is off, and the
// mask of its request's identity (SPEC-CANARY §11.7; 0 without identities).
struct VerifyEntry {
  std::int64_t slot, expected_position, prev, expected_token, mask;
};

// Steps 3-4 of SPEC-CANARY §5 for one entry and one buffer, with the checks of §11.2-§11.3.
template <class MemorySpace>
KOKKOS_INLINE_FUNCTION void verify_entry(const DeviceVerifyTarget<MemorySpace>& t, const DeviceRing<MemorySpace>& ring,
                                         const VerifyEntry& e, const VerifyChecks& checks) {
  if (e.slot == 0) {  // the engine's padding slot: never read; with §11.3 on, a live position on it is a row
    if (checks.slot_zero) ring.push(t.kernel_kind, 0, e.expected_position, -1, e.expected_token, -1, e.prev, kVerifySlotZero);
    return;
  }
  const std::int64_t n = t.buffer.num_slots;
  const bool slot_out = e.slot < 0 || e.slot >= n;
  if (slot_out || e.prev >= n) {
    ring.push(t.kernel_kind, slot_out ? e.slot : e.prev, e.expected_position, -1, e.expected_token, -1, -1,
              kOutOfRange);
    return;
  }
  const std::int64_t token = t.buffer.field(e.slot, kToken);
  const std::int64_t position = t.buffer.field(e.slot, kPosition);
  const std::int64_t prev_hash = t.buffer.field(e.slot, kPrevHash);
  const std::int64_t real_kv_hash = t.buffer.field(e.slot, kRealKvHash);
  const bool prev_reachable = e.prev != 0;
  // §11.7: the link a request of this identity writes is its predecessor's hash XOR its mask.
  const std::int64_t expected_chain = prev_reachable ? (t.buffer.slot_hash(e.prev) ^ e.mask) : prev_hash;
  if (checks.freed && token == kFreedToken) {  // §11.2: the token is a marker, the fingerprint field the epoch
    const std::int64_t freed_bits = kVerifyFreed | (prev_reachable && prev_hash != expected_chain ? kVerifyChainHash : 0) |
                                    (position != e.expected_position ? kVerifyPosition : 0);
    ring.push(t.kernel_kind, e.slot, position, token, e.expected_token, prev_hash, real_kv_hash, freed_bits);
    return;
  }
  const std::int64_t bits = (prev_reachable && prev_hash != expected_chain ? kVerifyChainHash : 0) |
                            (e.expected_token != -1 && token != e.expected_token ? kVerifyToken : 0) |
                            (position != e.expected_position ? kVerifyPosition : 0) |
                            (real_kv_hash != t.real_kv.fold(e.slot) ? kVerifyRealKvHash : 0);
  if (bits != 0) ring.push(t.kernel_kind, e.slot, position, token, e.expected_token, prev_hash, expected_chain, bits);
}

// What a verify call checks against, whatever the source of its entries (the VerifyPlan's arrays here,
// the plan's inputs in verify_from_inputs.hpp): the targets, the ring and the options, and the two steps
// every route must take alike, so that the routes cannot drift apart.
template <class MemorySpace>
struct VerifyCall {
  DeviceVerifyTarget<MemorySpace> targets[kMaxVerifyTargets];
  int num_targets;
  DeviceRing<MemorySpace> ring;
  bool check_expected_token;
  VerifyChecks checks;

  // SPEC-CANARY §5 steps 1-2 for work item i: item 0 counts the runs, every target as one verify call
  // (one call over K and V moves the counters as two calls would). Returns whether entry i is checked.
  KOKKOS_INLINE_FUNCTION bool count_runs(const std::int64_t i, const std::int32_t enable,
                                         const std::int64_t active) const {
    if (enable == 0) {
      if (i == 0) ring.add_runs(0, num_targets);
      return false;
    }
    if (i == 0) ring.add_runs(active * num_targets, num_targets);
    return i < active;
  }

  // Steps 3-4 for one active entry, against every target.
  KOKKOS_INLINE_FUNCTION void check(const VerifyEntry& e) const {
    for (int t = 0; t < num_targets; ++t) verify_entry(targets[t], ring, e, checks);
  }
};

template <class MemorySpace>
struct VerifyFunctor {
  DeviceVerifyPlan<MemorySpace> plan;
  VerifyCall<MemorySpace> call;

  // Entry i (launch_canary_entries()); whether it was active.
  KOKKOS_INLINE_FUNCTION bool item(const std::int64_t i) const {
    // Every read of the plan at once, before any branch on what they hold: the scalars and the entry
    // (i < capacity: in bounds, whatever the scalars say) cost one memory latency, not three.
    const std::int32_t enable = plan.enable(), num_valid = plan.num_valid();
    VerifyEntry e{0, 0, 0, -1, 0};
    if (i < plan.capacity())
      e = VerifyEntry{plan.slots(i), plan.expected_positions(i), plan.prev_slots(i),
                      call.check_expected_token ? plan.expected_tokens(i) : -1, 0};
    // A uniform branch: a plan without identities reads nothing more and its mask stays 0.
    if (plan.has_identities && i < plan.capacity()) e.mask = identity_mask(plan.identities(i));
    if (!call.count_runs(i, enable, plan.active(num_valid))) return false;
    call.check(e);
    return true;
  }
};

template <class ExecutionSpace, class MemorySpace>
void launch_verify_portable(const ExecutionSpace& space, const VerifyFunctor<MemorySpace>& functor) {
  launch_canary_entries(space, "kvcanary::verify[portable]", functor.plan.capacity(), functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
