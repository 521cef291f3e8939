#ifndef KVCANARY_CANARY_VALIDATE_HPP
#define KVCANARY_CANARY_VALIDATE_HPP

// The host-side checks of write() and verify() on their Views (SPEC-CANARY §6): shapes only, no device
// data read, thrown as std::invalid_argument naming the argument before anything is launched.

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class View>
std::int64_t extent_of(const View& view, int dim = 0) {
  return static_cast<std::int64_t>(view.extent(dim));
}

// The canary buffer's layout: records of 4 contiguous int64 at least 32 bytes apart (a multiple of 8 by type).
template <class MemorySpace>
void check_buffer(const char* function, const CanaryBuffer<MemorySpace>& buffer) {
  const auto& r = buffer.records;
  const std::int64_t slots = extent_of(r, 0);
  if (extent_of(r, 1) != kRecordFields)
    throw_invalid_in(function, "the canary buffer has ", extent_of(r, 1), " fields per record, must be 4");
  if (slots > 0 && r.data() == nullptr) throw_invalid_in(function, "the canary buffer has ", slots, " slots but no memory");
  if (r.stride(1) != 1) throw_invalid_in(function, "the canary buffer has field stride ", r.stride(1), ", must be 1");
  if (slots > 1 && r.stride(0) < static_cast<std::size_t>(kRecordFields))
    throw_invalid_in(function, "the canary buffer has a record stride of ", r.stride(0) * 8, " bytes, must be >= 32");
}

template <class MemorySpace>
void check_ring(const char* function, const ViolationRing<MemorySpace>& ring) {
  if (ring.count.data() == nullptr || ring.slot_run_counter.data() == nullptr ||
      ring.kernel_run_counter.data() == nullptr)
    throw_invalid_in(function, "the violation ring's count or run counters are not allocated");
  if (ring.capacity() > 0 && ring.rows.data() == nullptr)
    throw_invalid_in(function, "the violation ring has capacity ", ring.capacity(), " but no rows");
}

// The device form of sources checked against SPEC-CANARY §3 (canary_shape_checks.hpp, as the reference
// checks its own) and against what the kernels' 16-byte reads need: contiguous, 16-byte aligned rows.
template <class MemorySpace>
DeviceRealKv device_real_kv(const char* function, const RealKv<MemorySpace>& real_kv, std::int64_t num_slots) {
  check_real_kv_mode(function, real_kv.mode);
  check_real_kv_source_count(function, static_cast<std::int64_t>(real_kv.sources.size()));
  DeviceRealKv device;
  device.mode = real_kv.mode;
  device.num_sources = static_cast<int>(real_kv.sources.size());
  for (int k = 0; k < device.num_sources; ++k) {
    const RealKvSource<MemorySpace>& s = real_kv.sources[k];
    RealKvSourceShape shape;
    shape.pages = extent_of(s.bytes, 0);
    shape.row_bytes = extent_of(s.bytes, 1);
    // One page has no row stride to check: 0 stands for "none" (only row 0 is ever read).
    shape.row_stride_bytes = shape.pages > 1 ? static_cast<std::int64_t>(s.bytes.stride(0)) : 0;
    shape.page_size = s.page_size;
    shape.bytes_per_token = s.bytes_per_token;
    shape.read_bytes = s.read_bytes;
    check_real_kv_source(function, k, shape, num_slots);
    if (shape.row_bytes > 1 && s.bytes.stride(1) != 1)
      throw_invalid_in(function, "real_kv.sources[", k, "].bytes has column stride ", s.bytes.stride(1), ", must be 1");
    if (reinterpret_cast<std::uintptr_t>(s.bytes.data()) % 16 != 0)
      throw_invalid_in(function, "real_kv.sources[", k, "].bytes does not start at a 16-byte aligned address");
    device.sources[k] = DeviceRealKvSource{s.bytes.data(), shape.row_stride_bytes, s.page_size, s.bytes_per_token,
                                           s.read_bytes};
  }
  return device;
}

// The bytes [first, last) a 2-D View's elements span (first == last when it has none).
struct ByteRange {
  std::uintptr_t first = 0, last = 0;
  bool overlaps(const ByteRange& other) const {
    return first < last && other.first < other.last && first < other.last && other.first < last;
  }
};

template <class View>
ByteRange byte_range(const View& view) {
  if (view.extent(0) == 0 || view.extent(1) == 0 || view.data() == nullptr) return {};
  const std::size_t span = (view.extent(0) - 1) * view.stride(0) + (view.extent(1) - 1) * view.stride(1) + 1;
  const auto first = reinterpret_cast<std::uintptr_t>(view.data());
  return {first, first + span * sizeof(typename View::value_type)};
}

// A canary buffer inside the bytes of a real-KV source it fingerprints would stamp and then overwrite
// them (every later verify: bit 4 on every slot): the address ranges must be apart.
template <class MemorySpace>
void check_buffer_apart_from_sources(const char* function, const CanaryBuffer<MemorySpace>& buffer,
                                     const RealKv<MemorySpace>& real_kv) {
  const ByteRange records = byte_range(buffer.records);
  for (std::size_t k = 0; k < real_kv.sources.size(); ++k) {
    const ByteRange bytes = byte_range(real_kv.sources[k].bytes);
    if (records.overlaps(bytes))
      throw_invalid_in(function, "the canary buffer's bytes [", reinterpret_cast<const void*>(records.first), ", ",
                       reinterpret_cast<const void*>(records.last), ") overlap real_kv.sources[", k, "].bytes [",
                       reinterpret_cast<const void*>(bytes.first), ", ", reinterpret_cast<const void*>(bytes.last),
                       "): the canary must not live inside the KV bytes it fingerprints");
  }
}

}  // namespace Impl
}  // namespace kvcanary

#endif
