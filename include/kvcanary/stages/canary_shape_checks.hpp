#ifndef KVCANARY_CANARY_SHAPE_CHECKS_HPP
#define KVCANARY_CANARY_SHAPE_CHECKS_HPP

// The host-side errors of the canary stages (SPEC-CANARY §3, §6) that depend on shapes and host values
// alone. reference::write/verify use them, and the device write()/verify() can describe their Views the
// same way, so both reject the same calls with the same messages. Every check runs before anything is
// launched or modified, and none forms a product that can overflow.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan_shape_checks.hpp>

#include <cstdint>

namespace kvcanary {

// One real-KV source as the host sees it: a byte view [pages, row_bytes] whose rows start row_stride_bytes
// apart (the reference's flat vectors have row_stride_bytes == row_bytes).
struct RealKvSourceShape {
  std::int64_t pages = 0;
  std::int64_t row_bytes = 0;
  std::int64_t row_stride_bytes = 0;
  std::int64_t page_size = 1;
  std::int64_t bytes_per_token = 16;
  std::int64_t read_bytes = 16;
};

namespace Impl {

inline void check_kernel_kind(const char* function, KernelKind kind) {
  const auto value = static_cast<std::int64_t>(kind);
  if (value < 0 || value >= kKernelKinds)
    throw_invalid_in(function, "kernel_kind is ", value, ", must be one of the ", kKernelKinds,
                     " launch tags of SPEC-CANARY §1 (0..", kKernelKinds - 1, ")");
}

inline void check_real_kv_mode(const char* function, RealKvMode mode) {
  const auto value = static_cast<std::int64_t>(mode);
  if (value < 0 || value > 2)
    throw_invalid_in(function, "real_kv.mode is ", value, ", must be 0 (none), 1 (partial) or 2 (all)");
}

inline void check_real_kv_source_count(const char* function, std::int64_t sources) {
  if (sources > kMaxRealKvSources)
    throw_invalid_in(function, "real_kv has ", sources, " sources, at most ", kMaxRealKvSources, " are allowed");
}

// SPEC-CANARY §3: the rules of one source and that it holds every slot of a buffer of num_slots records.
inline void check_real_kv_source(const char* function, std::int64_t index, const RealKvSourceShape& s,
                                 std::int64_t num_slots) {
  const auto fail = [&](const auto&... parts) {
    throw_invalid_in(function, "real_kv.sources[", index, "].", parts...);
  };
  if (s.page_size < 1) fail("page_size is ", s.page_size, ", must be >= 1");
  if (s.bytes_per_token < 16 || s.bytes_per_token % 16 != 0)
    fail("bytes_per_token is ", s.bytes_per_token, ", must be a positive multiple of 16");
  if (s.read_bytes < 16 || s.read_bytes % 16 != 0 || s.read_bytes > s.bytes_per_token)
    fail("read_bytes is ", s.read_bytes, ", must be a positive multiple of 16 and <= bytes_per_token (",
         s.bytes_per_token, ")");
  if (s.pages < 0 || s.row_bytes < 0) fail("bytes is ", s.pages, " x ", s.row_bytes, ", extents must be >= 0");
  if (s.row_stride_bytes < 0 || s.row_stride_bytes % 16 != 0)
    fail("bytes has a row stride of ", s.row_stride_bytes, " bytes, must be a multiple of 16");
  if (s.pages > 1 && s.row_stride_bytes < s.row_bytes)
    fail("bytes has a row stride of ", s.row_stride_bytes, " bytes, below its ", s.row_bytes,
         " bytes per row (rows overlap)");
  // page_size * bytes_per_token <= row_bytes, by division: bytes_per_token >= 16 here.
  if (s.page_size > s.row_bytes / s.bytes_per_token)
    fail("page_size * bytes_per_token is ", s.page_size, " x ", s.bytes_per_token, ", more than the ", s.row_bytes,
         " bytes of a row");
  // pages >= ceil(num_slots / page_size), without num_slots + page_size - 1.
  const std::int64_t slots = num_slots < 0 ? 0 : num_slots;
  const std::int64_t pages_needed = slots / s.page_size + (slots % s.page_size != 0 ? 1 : 0);
  if (s.pages < pages_needed)
    fail("bytes has ", s.pages, " rows, fewer than the ", pages_needed, " that ", slots, " slots need at page_size ",
         s.page_size);
}

// A ring's capacity as a host value.
inline void check_ring_capacity(const char* function, std::int64_t capacity) {
  if (capacity < 0) throw_invalid_in(function, "ring capacity is ", capacity, ", must be >= 0");
}

}  // namespace Impl
}  // namespace kvcanary

#endif
