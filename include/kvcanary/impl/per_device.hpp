#ifndef KVCANARY_IMPL_PER_DEVICE_HPP
#define KVCANARY_IMPL_PER_DEVICE_HPP

// PerDevice: one int per GPU, computed on that device's first use and kept for the process. The CUDA
// path sizes its grids from per-device facts (SM count, resident blocks): a process that drives
// several GPUs must get each device's own value, not the first device's.

#include <atomic>
#include <climits>

namespace kvcanary {
namespace Impl {

class PerDevice {
 public:
  static constexpr int kDevices = 64;  // devices past this are queried on every call

  PerDevice() {
    for (auto& value : values_) value.store(kUnknown, std::memory_order_relaxed);
  }

  // The cached value of `device`, or query() on its first use. Two threads meeting a device's first
  // use may both query; they store the same value.
  template <class Query>
  int get(int device, Query&& query) {
    if (device < 0 || device >= kDevices) return query();
    int value = values_[device].load(std::memory_order_acquire);
    if (value == kUnknown) {
      value = query();
      values_[device].store(value, std::memory_order_release);
    }
    return value;
  }

 private:
  static constexpr int kUnknown = INT_MIN;
  std::atomic<int> values_[kDevices];
};

}  // namespace Impl
}  // namespace kvcanary

#endif
