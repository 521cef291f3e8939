#ifndef KVCANARY_IMPL_WRITE_PORTABLE_HPP
#define KVCANARY_IMPL_WRITE_PORTABLE_HPP

// The write stage (SPEC-CANARY §4) as one Kokkos parallel_for: a request a work item, its tokens in
// order (each record's prev_hash is the running hash of the tokens before it: a serial chain).

#include <kvcanary/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct DeviceWritePlan {
  using Array = Kokkos::View<const std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Array offsets, seeds;
  Kokkos::View<const std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> num_valid_reqs;

  DeviceWritePlan() = default;
  explicit DeviceWritePlan(const WritePlan<MemorySpace>& p)
      : offsets(p.write_offsets), seeds(p.write_seed_slot_indices), num_valid_reqs(p.write_num_valid_reqs) {}

  KOKKOS_INLINE_FUNCTION std::int64_t capacity() const { return static_cast<std::int64_t>(seeds.extent(0)); }
  // clamp(write_num_valid_reqs, 0, write_req_capacity) of SPEC-CANARY §4.
  KOKKOS_INLINE_FUNCTION std::int64_t requests() const {
    const std::int64_t n = num_valid_reqs();
    return n < 0 ? 0 : (n > capacity() ? capacity() : n);
  }
};

template <class MemorySpace, class Index>
struct DeviceStepTokens {
  using Vector = Kokkos::View<const Index*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Vector input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
  Kokkos::View<const std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> chain_position_assert;
  std::int64_t num_tokens = 0;
  bool input_assert = false;

  DeviceStepTokens() = default;
  explicit DeviceStepTokens(const StepTokens<MemorySpace, Index>& t)
      : input_ids(t.input_ids),
        positions(t.positions),
        out_cache_loc(t.out_cache_loc),
        chain_position_assert(t.chain_position_assert),
        num_tokens(t.num_tokens()),
        input_assert(t.expected_input_ids.has_value()) {
    if (input_assert) {
      expected_input_ids = *t.expected_input_ids;
      expected_positions = *t.expected_positions;
    }
  }
};

template <class MemorySpace, class Index>
struct WriteFunctor {
  DeviceWritePlan<MemorySpace> plan;
  DeviceStepTokens<MemorySpace, Index> tokens;
  DeviceBuffer<MemorySpace> buffer;
  DeviceRealKv real_kv;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t r) const {
    if (r == 0) ring.add_runs(0, 1);  // every call, even with nothing to write
    if (r >= plan.requests()) return;
    const std::int64_t begin = plan.offsets(r), end = plan.offsets(r + 1);
    if (begin >= end) return;  // nothing at all, seed included
    const std::int64_t n = buffer.num_slots;
    const std::int64_t seed = plan.seeds(r);
    std::int64_t running = kAnchorHashInt64;
    bool position_assert = false;
    std::uint64_t prev_position = 0;
    if (seed >= n) {
      ring.push(kind, seed, -1, -1, -1, kAnchorHashInt64, -1, kOutOfRange);
    } else {
      running = buffer.slot_hash(seed);
      position_assert = seed >= 0 && tokens.chain_position_assert() != 0;
      if (position_assert) prev_position = as_uint64(buffer.field(seed, kPosition));
    }
    std::int64_t stored = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      if (i < 0 || i >= tokens.num_tokens) {  // a WritePlan that does not match the token arrays
        ring.push(kind, i, -1, -1, -1, running, -1, kOutOfRange);
        break;
      }
      const std::int64_t slot = tokens.out_cache_loc(i);
      if (slot < 0) continue;
      const std::int64_t token = tokens.input_ids(i);
      const std::int64_t position = tokens.positions(i);
      if (slot >= n) {
        ring.push(kind, slot, position, token, -1, running, -1, kOutOfRange);
        continue;
      }
      if (tokens.input_assert) {
        const std::int64_t expected_token = tokens.expected_input_ids(i);
        const std::int64_t expected_position = tokens.expected_positions(i);
        const std::int64_t bits =
            (token != expected_token ? kWriteToken : 0) | (position != expected_position ? kWritePosition : 0);
        if (bits != 0) ring.push(kind, slot, position, token, expected_token, running, expected_position, bits);
      }
      if (position_assert) {
        const std::uint64_t next = prev_position + 1u;  // mod 2^64
        if (as_uint64(position) != next) ring.push(kind, slot, position, token, token, running, as_int64(next), kWritePosition);
        prev_position = as_uint64(position);
      }
      buffer.field(slot, kToken) = token;
      buffer.field(slot, kPosition) = position;
      buffer.field(slot, kPrevHash) = running;
      buffer.field(slot, kRealKvHash) = real_kv.fold(slot);
      running = record_hash(running, token, position);
      ++stored;
    }
    ring.add_runs(stored, 0);
  }
};

template <class ExecutionSpace, class MemorySpace, class Index>
void launch_write_portable(const ExecutionSpace& space, const WriteFunctor<MemorySpace, Index>& functor) {
  launch_canary_items(space, "kvcanary::write[portable]", functor.plan.capacity(), functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
