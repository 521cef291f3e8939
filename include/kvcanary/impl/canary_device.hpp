#ifndef KVCANARY_IMPL_CANARY_DEVICE_HPP
#define KVCANARY_IMPL_CANARY_DEVICE_HPP

// What the canary kernels hold (unmanaged handles and plain values, passed by value): a canary
// buffer, the violation ring, and the real-KV sources with their fold (SPEC-CANARY §1–§3).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/hash.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct DeviceBuffer {
  Kokkos::View<std::int64_t**, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> records;
  std::int64_t num_slots = 0;

  DeviceBuffer() = default;
  explicit DeviceBuffer(const CanaryBuffer<MemorySpace>& b) : records(b.records), num_slots(b.num_slots()) {}

  KOKKOS_INLINE_FUNCTION std::int64_t& field(std::int64_t slot, int f) const { return records(slot, f); }

  // slot_hash of SPEC-CANARY §2 for a slot < num_slots: anchor_hash when negative, else the record's hash.
  KOKKOS_INLINE_FUNCTION std::int64_t slot_hash(std::int64_t slot) const {
    if (slot < 0) return kAnchorHashInt64;
    return record_hash(records(slot, kPrevHash), records(slot, kToken), records(slot, kPosition));
  }
};

// An atomic add on an int64 counter, mod 2^64. Kokkos 3.4 adds to a signed 64-bit integer on CUDA
// with a compare-and-swap loop, which serializes under contention (write() measured 0.8 µs per request
// at 4096 requests on the H200, docs/perf-notes.md); CUDA's native add on the same 64 bits does not.
KOKKOS_INLINE_FUNCTION std::int64_t atomic_fetch_add_int64(std::int64_t* counter, std::int64_t value) {
#if defined(__CUDA_ARCH__)
  return as_int64(atomicAdd(reinterpret_cast<unsigned long long*>(counter), static_cast<unsigned long long>(value)));
#else
  return Kokkos::atomic_fetch_add(counter, value);
#endif
}

template <class MemorySpace>
struct DeviceRing {
  Kokkos::View<std::int64_t* [kRingFields], Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      rows;
  Kokkos::View<std::int64_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> count, slot_run_counter,
      kernel_run_counter;

  DeviceRing() = default;
  explicit DeviceRing(const ViolationRing<MemorySpace>& r)
      : rows(r.rows), count(r.count), slot_run_counter(r.slot_run_counter), kernel_run_counter(r.kernel_run_counter) {}

  // Fill once (SPEC-CANARY §1): every violation takes a sequence number; only the first `capacity` are kept.
  KOKKOS_INLINE_FUNCTION void push(std::int64_t kind, std::int64_t slot, std::int64_t position, std::int64_t stored_token,
                                   std::int64_t expected_token, std::int64_t stored_chain_hash,
                                   std::int64_t expected_aux, std::int64_t bits) const {
    // Compared as uint64: a count that wrapped past 2^63 (after 2^63 violations) keeps no row either.
    const std::int64_t seq = atomic_fetch_add_int64(&count(), 1);
    if (static_cast<std::uint64_t>(seq) >= static_cast<std::uint64_t>(rows.extent(0))) return;
    rows(seq, kRowKernelKind) = kind;
    rows(seq, kRowSlot) = slot;
    rows(seq, kRowPosition) = position;
    rows(seq, kRowStoredToken) = stored_token;
    rows(seq, kRowExpectedToken) = expected_token;
    rows(seq, kRowStoredChainHash) = stored_chain_hash;
    rows(seq, kRowExpectedAux) = expected_aux;
    // The fail-reason bits last, after a fence: a row whose bits are set is whole, for a reader inside the same
    // launch (the runtime's pump snapshot beside a checking plan, runtime/impl/pump_in_plan.hpp). Every row is
    // pushed with bits != 0, and a ring's rows are 0 until pushed (allocated zeroed, zeroed again by a rearm).
    Kokkos::memory_fence();
    *static_cast<volatile std::int64_t*>(&rows(seq, kRowFailReasonBits)) = bits;
  }

  KOKKOS_INLINE_FUNCTION void add_runs(std::int64_t slots, std::int64_t kernels) const {
    if (slots != 0) atomic_fetch_add_int64(&slot_run_counter(), slots);
    if (kernels != 0) atomic_fetch_add_int64(&kernel_run_counter(), kernels);
  }
};

// One source of SPEC-CANARY §3, checked on the host: rows hold page_size tokens, reads stay inside
// the row for every slot < num_slots, and every 16-byte read is 16-byte aligned.
struct DeviceRealKvSource {
  const std::uint8_t* bytes = nullptr;
  std::int64_t row_stride = 0, page_size = 1, bytes_per_token = 16, read_bytes = 16;
};

struct DeviceRealKv {
  DeviceRealKvSource sources[kMaxRealKvSources];
  int num_sources = 0;
  RealKvMode mode = RealKvMode::None;

  KOKKOS_INLINE_FUNCTION bool enabled() const { return mode != RealKvMode::None && num_sources > 0; }

  // fold(slot) of SPEC-CANARY §3, for 0 <= slot < num_slots.
  KOKKOS_INLINE_FUNCTION std::int64_t fold(std::int64_t slot) const {
    if (!enabled()) return 0;
    std::uint64_t total = 0;
    for (int k = 0; k < num_sources; ++k) {
      const DeviceRealKvSource& s = sources[k];
      const std::int64_t eff = mode == RealKvMode::Partial ? 16 : s.read_bytes;
      const std::uint8_t* token = s.bytes + (slot / s.page_size) * s.row_stride + (slot % s.page_size) * s.bytes_per_token;
      std::uint64_t acc = 0;
      for (std::int64_t o = 0; o < eff; o += 16) {
        // Little-endian words (x86 and NVIDIA GPUs): the 16 bytes as lo (0-7) and hi (8-15).
        const auto* words = reinterpret_cast<const std::uint64_t*>(token + o);
        acc = splitmix64(acc ^ words[0]);
        acc = splitmix64(acc ^ words[1]);
      }
      total = splitmix64(total ^ acc);
    }
    return as_int64(total);
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif
