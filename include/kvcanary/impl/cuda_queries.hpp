#ifndef KVCANARY_IMPL_CUDA_QUERIES_HPP
#define KVCANARY_IMPL_CUDA_QUERIES_HPP

// What the raw CUDA paths ask the runtime before they launch: errors turned into exceptions, the SM
// count and how many blocks of a kernel fit on a device, each cached per device (per_device.hpp).

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/per_device.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#define KVCANARY_CUDA_CHECK(call) ::kvcanary::Impl::cuda_check((call), #call, __FILE__, __LINE__)

namespace kvcanary {
namespace Impl {

inline void cuda_check(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("kvcanary: ") + call + " failed at " + file + ":" + std::to_string(line) +
                             ": " + cudaGetErrorString(error));
}

namespace CudaPersistent {

// <<<>>> launches on the current device: a space on another one takes the portable path (whose
// launches Kokkos makes on the space's own device).
inline bool is_current_device(int device) {
  int current = -1;
  return cudaGetDevice(&current) == cudaSuccess && current == device;
}

// ceil(items / per_block) blocks, at most `resident` (blocks then stride), at least one.
inline unsigned capped_blocks(std::int64_t items, std::int64_t per_block, int resident) {
  const std::int64_t wanted = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < resident ? wanted : resident));
}

// The device's SM count, queried on each device's first use; 0 when the query fails.
inline int sm_count(int device) {
  static PerDevice cache;
  return cache.get(device, [device] {
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess ? n : 0;
  });
}

// query() run with `device` as the current device (occupancy and function attributes are queried on
// the current one, which need not be the space's), the caller's device restored after; 0 on failure.
template <class Query>
int on_device(int device, Query&& query) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) return 0;
  if (current == device) return query();
  if (cudaSetDevice(device) != cudaSuccess) return 0;
  const int value = query();
  return cudaSetDevice(current) == cudaSuccess ? value : 0;
}

// Blocks of `threads` that fit on the device at once (SM count x occupancy); 0 when the query
// fails, which sends the call to the portable path.
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, int device) {
  const int per_sm = on_device(device, [&] {
    int n = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) == cudaSuccess ? n : 0;
  });
  return sm_count(device) * per_sm;
}

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
