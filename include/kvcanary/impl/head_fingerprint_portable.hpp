#ifndef KVCANARY_IMPL_HEAD_FINGERPRINT_PORTABLE_HPP
#define KVCANARY_IMPL_HEAD_FINGERPRINT_PORTABLE_HPP

// SPEC-CANARY §12.6 on the device: one work item per listed slot, the sum over the shard's heads of each
// head's mixed fold (head_fingerprints), and the comparison of two fingerprint arrays (check_fingerprints).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/impl/hash.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

// A shard's bytes as the kernels read them (checked on the host: every read in bounds and 16-byte aligned).
struct DeviceHeadShard {
  const std::uint8_t* bytes = nullptr;
  std::int64_t row_stride = 0, page_size = 1, token_stride = 0, head_stride = 0, head_bytes = 16;
  std::int64_t first_head = 0, num_heads = 1, capacity = 0;

  // Σ_j splitmix64(splitmix64(first_head + j + GOLDEN) ^ head_fold(slot, j)) mod 2^64, for 0 <= slot < capacity.
  KOKKOS_INLINE_FUNCTION std::int64_t partial(std::int64_t slot) const {
    std::uint64_t sum = 0;
    const std::uint8_t* token = bytes + (slot / page_size) * row_stride + (slot % page_size) * token_stride;
    for (std::int64_t j = 0; j < num_heads; ++j) {
      const std::uint8_t* head = token + j * head_stride;
      std::uint64_t acc = 0;
      for (std::int64_t o = 0; o < head_bytes; o += 16) {
        const auto* words = reinterpret_cast<const std::uint64_t*>(head + o);  // little-endian lo, hi
        acc = splitmix64(acc ^ words[0]);
        acc = splitmix64(acc ^ words[1]);
      }
      sum += splitmix64(splitmix64(static_cast<std::uint64_t>(first_head + j) + 0x9E3779B97F4A7C15ULL) ^ acc);
    }
    return as_int64(sum);
  }
};

template <class MemorySpace, class Index>
struct HeadFingerprintFunctor {
  Kokkos::View<const Index*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> slots;
  Kokkos::View<std::int64_t*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> out;
  DeviceHeadShard shard;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t n = static_cast<std::int64_t>(slots.extent(0));
    std::int64_t computed = 0;
    if (i < n) {
      const std::int64_t slot = slots(i);
      std::int64_t value = 0;
      if (slot >= shard.capacity) ring.push(kind, slot, -1, -1, -1, -1, i, kOutOfRange);
      else if (slot >= 0) {
        value = shard.partial(slot);
        computed = 1;
      }
      out(i) = value;
    }
    ring.add_runs(computed, i == 0 ? 1 : 0);
  }
};

template <class MemorySpace, class Index>
struct CheckFingerprintsFunctor {
  Kokkos::View<const Index*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> slots;
  Kokkos::View<const std::int64_t*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> expected,
      actual;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t n = static_cast<std::int64_t>(slots.extent(0));
    std::int64_t compared = 0;
    if (i < n && slots(i) >= 0) {
      compared = 1;
      if (expected(i) != actual(i)) ring.push(kind, slots(i), -1, -1, -1, actual(i), expected(i), kVerifyRealKvHash);
    }
    ring.add_runs(compared, i == 0 ? 1 : 0);
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif
