#ifndef KVCANARY_IMPL_HASH_HPP
#define KVCANARY_IMPL_HASH_HPP

// The hashes of SPEC-CANARY §2, on uint64 (mod 2^64), callable on the host and in kernels. Records
// store the same 64 bits as int64. Pinned by unit_tests/test_hash.hpp.

#include <Kokkos_Macros.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

// The SplitMix64 finaliser alone (no gamma add): splitmix64(0) == 0.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

constexpr std::uint64_t kAnchor = 0xC0FFEE1234567890ull;
constexpr std::uint64_t kAnchorHash = splitmix64(kAnchor);  // 0xDE7FAE23A9A1B716
static_assert(kAnchorHash == 0xDE7FAE23A9A1B716ull, "SPEC-CANARY §2: anchor_hash");

// mix3(a, b, c) of SPEC-CANARY §2; int64 arguments convert as two's complement.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t mix3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c);
}

KOKKOS_INLINE_FUNCTION constexpr std::int64_t as_int64(std::uint64_t x) {
  // Two's complement without implementation-defined conversion: values >= 2^63 map to x - 2^64.
  return x <= 0x7FFFFFFFFFFFFFFFull ? static_cast<std::int64_t>(x)
                                    : -static_cast<std::int64_t>(~x) - 1;
}

KOKKOS_INLINE_FUNCTION constexpr std::uint64_t as_uint64(std::int64_t x) { return static_cast<std::uint64_t>(x); }

// The chain hash of a record whose fields are given: mix3(prev_hash, token, position).
KOKKOS_INLINE_FUNCTION constexpr std::int64_t record_hash(std::int64_t prev_hash, std::int64_t token,
                                                          std::int64_t position) {
  return as_int64(mix3(as_uint64(prev_hash), as_uint64(token), as_uint64(position)));
}

constexpr std::int64_t kAnchorHashInt64 = as_int64(kAnchorHash);  // -2414019407054260458

// SPEC-CANARY §11.7: the mask a request's identity puts on every chain link it writes and verify
// expects: splitmix64(id), 0 for identity 0 (so identity 0 is the original's format, byte for byte).
KOKKOS_INLINE_FUNCTION constexpr std::int64_t identity_mask(std::int64_t identity) {
  return as_int64(splitmix64(as_uint64(identity)));
}
static_assert(identity_mask(0) == 0, "SPEC-CANARY §11.7: identity 0 masks nothing");
static_assert(kAnchorHashInt64 == -2414019407054260458LL, "SPEC-CANARY §2: anchor_hash as int64");

}  // namespace Impl
}  // namespace kvcanary

#endif
