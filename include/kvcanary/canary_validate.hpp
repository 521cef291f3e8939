#ifndef KVCANARY_CANARY_VALIDATE_HPP
#define KVCANARY_CANARY_VALIDATE_HPP

// The host-side checks of write() and verify() on their Views (SPEC-CANARY §6): shapes only, no device
// data read, thrown as std::invalid_argument naming the argument before anything is launched.

#include <kvcanary/canary_checks.hpp>
#include <kvcanary/canary_types.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/plan_types.hpp>

#include <array>
#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class View>
std::int64_t extent_of(const View& view, int dim = 0) {
  return static_cast<std::int64_t>(view.extent(dim));
}

template <class MemorySpace>
void check_buffer(const char* function, const char* name, const CanaryBuffer<MemorySpace>& buffer) {
  const auto& r = buffer.records;
  check_buffer_shape(function, name, extent_of(r, 0), extent_of(r, 1), static_cast<std::int64_t>(r.stride(1)),
                     static_cast<std::int64_t>(r.stride(0)), r.data() != nullptr);
}

template <class MemorySpace>
void check_ring(const char* function, const ViolationRing<MemorySpace>& ring) {
  if (ring.count.data() == nullptr || ring.slot_run_counter.data() == nullptr ||
      ring.kernel_run_counter.data() == nullptr)
    throw_invalid_in(function, "the violation ring's count or run counters are not allocated");
  if (ring.capacity() > 0 && ring.rows.data() == nullptr)
    throw_invalid_in(function, "the violation ring has capacity ", ring.capacity(), " but no rows");
}

// The device form of checked sources (SPEC-CANARY §3), after check_real_kv_shapes.
template <class MemorySpace>
DeviceRealKv device_real_kv(const char* function, const RealKv<MemorySpace>& real_kv, std::int64_t num_slots) {
  check_real_kv_count(function, real_kv.sources.size());
  std::array<RealKvSourceShape, kMaxRealKvSources> shapes{};
  DeviceRealKv device;
  device.mode = real_kv.mode;
  device.num_sources = static_cast<int>(real_kv.sources.size());
  for (int k = 0; k < device.num_sources; ++k) {
    const RealKvSource<MemorySpace>& s = real_kv.sources[k];
    RealKvSourceShape& shape = shapes[k];
    shape.pages = extent_of(s.bytes, 0);
    shape.row_bytes = extent_of(s.bytes, 1);
    shape.row_stride = static_cast<std::int64_t>(s.bytes.stride(0));
    shape.page_size = s.page_size;
    shape.bytes_per_token = s.bytes_per_token;
    shape.read_bytes = s.read_bytes;
    shape.contiguous_rows = shape.row_bytes <= 1 || s.bytes.stride(1) == 1;
    shape.aligned = reinterpret_cast<std::uintptr_t>(s.bytes.data()) % 16 == 0;
    device.sources[k] = DeviceRealKvSource{s.bytes.data(), shape.row_stride, s.page_size, s.bytes_per_token,
                                           s.read_bytes};
  }
  check_real_kv_shapes(function, shapes.data(), real_kv.sources.size(), num_slots);
  if (real_kv.mode != RealKvMode::None && real_kv.mode != RealKvMode::Partial && real_kv.mode != RealKvMode::All)
    throw_invalid_in(function, "real_kv mode is ", static_cast<int>(real_kv.mode), ", must be 0, 1 or 2");
  return device;
}

inline void check_kernel_kind(const char* function, KernelKind kind) {
  const auto k = static_cast<std::int32_t>(kind);
  if (k < 0 || k >= kKernelKinds) throw_invalid_in(function, "kernel_kind is ", k, ", must be in [0, 12)");
}

}  // namespace Impl
}  // namespace kvcanary

#endif
