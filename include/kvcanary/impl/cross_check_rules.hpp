#ifndef KVCANARY_IMPL_CROSS_CHECK_RULES_HPP
#define KVCANARY_IMPL_CROSS_CHECK_RULES_HPP

// The arithmetic of SPEC-CANARY §11.4 that the kernel and the host reference share: overflow-free
// lengths and page counts. Plain functions on int64, callable on the host and the device.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

// L = prefix + max(0, extend), clamped to max_seq_len, for 0 <= prefix <= max_seq_len (no overflow).
KOKKOS_INLINE_FUNCTION std::int64_t cross_check_length(std::int64_t prefix, std::int64_t extend, std::int64_t max_seq_len) {
  const std::int64_t e = extend > 0 ? extend : 0;
  return e > max_seq_len - prefix ? max_seq_len : prefix + e;
}

// ceil(max(0, tokens) / page_size) for page_size >= 1, without tokens + page_size - 1.
KOKKOS_INLINE_FUNCTION std::int64_t pages_for(std::int64_t tokens, std::int64_t page_size) {
  if (tokens <= 0) return 0;
  return tokens / page_size + (tokens % page_size != 0 ? 1 : 0);
}

// floor(slot / page_size) for page_size >= 1 (C++ division truncates towards zero).
KOKKOS_INLINE_FUNCTION std::int64_t page_of(std::int64_t slot, std::int64_t page_size) {
  const std::int64_t q = slot / page_size;
  return (slot % page_size != 0 && slot < 0) ? q - 1 : q;
}

// Whether batch row r is checked: active (pool row != 0) and good for the cross-check.
KOKKOS_INLINE_FUNCTION bool cross_check_row(std::int64_t pool_row, std::int64_t prefix, std::int64_t max_reqs,
                                            std::int64_t max_seq_len) {
  return pool_row > 0 && pool_row < max_reqs && prefix >= 0 && prefix <= max_seq_len;
}

}  // namespace Impl
}  // namespace kvcanary

#endif
