#ifndef KVCANARY_CANARY_CHECKS_HPP
#define KVCANARY_CANARY_CHECKS_HPP

// The host-side checks of the canary stages (SPEC-CANARY §1, §3, §6) on shapes alone: no device data is
// read. The library's write()/verify() and the host reference describe their arguments with these
// structs, so both reject the same calls with the same messages.

#include <kvcanary/canary_types.hpp>
#include <kvcanary/shape_checks.hpp>

#include <cstddef>
#include <cstdint>

namespace kvcanary {

// One real-KV source as SPEC-CANARY §3 sees it; sizes in bytes.
struct RealKvSourceShape {
  std::int64_t pages = 0;       // rows of the byte view
  std::int64_t row_bytes = 0;   // bytes of a row that belong to the view
  std::int64_t row_stride = 0;  // bytes from one row to the next
  std::int64_t page_size = 1;
  std::int64_t bytes_per_token = 16;
  std::int64_t read_bytes = 16;
  bool contiguous_rows = true;  // bytes of a row are adjacent (column stride 1)
  bool aligned = true;          // the first byte is 16-byte aligned
};

namespace Impl {

// ceil(a / b) for a >= 0, b >= 1, without a + b - 1 (which could overflow).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace Impl

// SPEC-CANARY §3's rules for the sources of a buffer of num_slots records, checked whenever sources are
// given, whatever the mode (at most kMaxRealKvSources). `function` names the entry point in the message ("write", "verify").
inline void check_real_kv_count(const char* function, std::size_t count) {
  if (count > static_cast<std::size_t>(kMaxRealKvSources))
    Impl::throw_invalid_in(function, "real_kv has ", count, " sources, at most ", kMaxRealKvSources);
}

inline void check_real_kv_shapes(const char* function, const RealKvSourceShape* sources, std::size_t count,
                                 std::int64_t num_slots) {
  check_real_kv_count(function, count);
  for (std::size_t k = 0; k < count; ++k) {
    using Impl::throw_invalid_in;
    const RealKvSourceShape& s = sources[k];
    const auto fail = [&](const auto&... parts) { throw_invalid_in(function, "real_kv source ", k, ": ", parts...); };
    if (s.page_size < 1) fail("page_size is ", s.page_size, ", must be >= 1");
    if (s.bytes_per_token < 16 || s.bytes_per_token % 16 != 0)
      fail("bytes_per_token is ", s.bytes_per_token, ", must be a positive multiple of 16");
    if (s.read_bytes < 16 || s.read_bytes % 16 != 0 || s.read_bytes > s.bytes_per_token)
      fail("read_bytes is ", s.read_bytes, ", must be a positive multiple of 16 and <= bytes_per_token (",
           s.bytes_per_token, ")");
    if (!s.contiguous_rows) fail("the bytes of a row are not contiguous (column stride must be 1)");
    if (s.pages > 1 && s.row_stride % 16 != 0) fail("row stride is ", s.row_stride, " bytes, must be a multiple of 16");
    if (!s.aligned) fail("the first byte is not 16-byte aligned");
    if (s.pages < Impl::ceil_div(num_slots, s.page_size))
      fail("has ", s.pages, " rows, fewer than ceil(num_slots / page_size) = ", Impl::ceil_div(num_slots, s.page_size));
    if (s.bytes_per_token > s.row_bytes / s.page_size)
      fail("page_size x bytes_per_token = ", s.page_size, " x ", s.bytes_per_token, " exceeds the row's ", s.row_bytes,
           " bytes");
  }
}

// The canary buffer's layout: records of 4 int64, a record stride >= 32 bytes (a multiple of 8 by type).
inline void check_buffer_shape(const char* function, const char* name, std::int64_t num_slots, std::int64_t fields,
                               std::int64_t field_stride, std::int64_t record_stride, bool allocated) {
  using Impl::throw_invalid_in;
  if (fields != kRecordFields) throw_invalid_in(function, name, " has ", fields, " fields per record, must be 4");
  if (num_slots > 0 && !allocated) throw_invalid_in(function, name, " has ", num_slots, " slots but no memory");
  if (field_stride != 1) throw_invalid_in(function, name, " has field stride ", field_stride, ", must be 1");
  if (num_slots > 1 && record_stride < kRecordFields)
    throw_invalid_in(function, name, " has a record stride of ", record_stride * 8, " bytes, must be >= 32");
}

}  // namespace kvcanary

#endif
