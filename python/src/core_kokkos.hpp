#ifndef KVCANARY_PY_CORE_KOKKOS_HPP
#define KVCANARY_PY_CORE_KOKKOS_HPP

// The Kokkos side shared by core*.cpp (never included by module*.cpp): where a call runs (lazy
// initialization, the CUDA instance cache, the device guard) and unmanaged Views over core.hpp's plain
// pointers.

#include "core.hpp"

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/report.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION >= 40000
#include <omp.h>
#endif

namespace kvcanary {
namespace python {

// A ViolationReport as core.hpp's plain Report (core_report.cpp).
Report flatten(const ViolationReport& report);

namespace detail {

[[noreturn]] void runtime(const std::string& what);  // std::runtime_error("kvcanary: " + what)

// Lazy initialization: starts Kokkos (on `device_id` in CUDA builds) unless it runs; throws after finalize().
void require_running(int device_id);

// Destroys every live kvcanary.Canary's Kokkos state (finalize(), before Kokkos goes).
void release_canaries();

#ifdef KOKKOS_ENABLE_CUDA
inline void cuda_check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) runtime(std::string(what) + " failed: " + cudaGetErrorString(error));
}

// The oldest compute capability the build's kernels run on (Kokkos aborts on an older device).
constexpr int build_arch() {
#if defined(KOKKOS_ARCH_HOPPER90)
  return 90;
#elif defined(KOKKOS_ARCH_AMPERE86)
  return 86;
#elif defined(KOKKOS_ARCH_AMPERE80)
  return 80;
#elif defined(KOKKOS_ARCH_VOLTA70)
  return 70;
#else
  return 0;
#endif
}

// Kokkos sets the current device at init and around its launches; the caller's current device (torch's
// too) is the same after every call.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device >= 0 && device != previous_) cuda_check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// One Kokkos::Cuda instance per (device, stream), made outside graph capture only: creating one
// allocates and queries the device, which a capture would record or refuse.
bool capturing(std::uintptr_t stream);
Kokkos::Cuda instance(int device, std::uintptr_t stream);
#endif

// Whether this process is a child forked after kvcanary started Kokkos: it inherits Kokkos' state but
// not OpenMP's threads (a launch there waits for them forever) or a usable CUDA context. Serial runs.
bool forked_child();

// Kokkos 3.4's host backends keep process-wide state (Serial's team scratch, OpenMP's thread pool), and
// host calls release the GIL: host work from several Python threads runs one call at a time.
std::mutex& host_mutex();

#ifdef KOKKOS_ENABLE_OPENMP
// Whether this thread may launch on Kokkos::OpenMP: Kokkos 3.4 ties its pool to the thread that started
// Kokkos (anywhere else a scan throws "in parallel or not initialized"), and no version launches from
// inside the caller's own OpenMP parallel region. An engine's worker thread (HF transformers runs its
// continuous batching in one) is such a thread.
inline bool openmp_here() {
  if (forked_child()) return false;
#if KOKKOS_VERSION < 40000
  return !Kokkos::OpenMP::in_parallel();
#else
  return omp_in_parallel() == 0;
#endif
}

inline void require_openmp_here(const std::string& who, const std::string& remedy) {
  if (forked_child())
    throw std::invalid_argument(who + " runs on OpenMP, whose threads did not survive the fork of this process (kvcanary "
                                "had started Kokkos in the parent); " + remedy);
  if (!openmp_here())
    throw std::invalid_argument(who + " runs on OpenMP, which only the thread that started kvcanary's Kokkos can drive (Kokkos " +
                                kokkos_version() + " ties its pool to that thread), outside an OpenMP parallel region; " +
                                remedy);
}
#endif

template <class Space, class F>
void on_host(const Space& space, F& f) {
  std::lock_guard<std::mutex> lock(host_mutex());
  f(space, Kokkos::HostSpace{});
  space.fence();
}

// Backend::Default on the host: the default host space, unless that is OpenMP and this thread cannot
// launch on it (openmp_here), then Serial.
inline Backend host_backend(Backend asked) {
  if (asked != Backend::Default) return asked;
#if defined(KOKKOS_ENABLE_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
  if (std::is_same<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>::value)
    return openmp_here() ? Backend::OpenMP : Backend::Serial;
#endif
  return Backend::Default;
}

// Runs f(space, memory_space) on the place's backend. Host backends fence before returning (the caller's
// numpy arrays hold the results when the call returns); CUDA calls stay asynchronous on their stream.
template <class F>
void on_place(const Place& place, F&& f) {
  if (place.cuda && forked_child())
    runtime("this process was forked after kvcanary started Kokkos, and CUDA cannot run in a forked child; start "
            "workers with multiprocessing's 'spawn', or let kvcanary start after the fork");
#ifdef KOKKOS_ENABLE_CUDA
  // Starting Kokkos allocates and queries the device: never inside a capture.
  if (place.cuda && !Kokkos::is_initialized() && !is_finalized()) {
    DeviceGuard guard(place.device_id);
    if (capturing(place.stream))
      runtime("first use of kvcanary during CUDA-graph capture; run one call on the capture stream before capturing");
  }
#endif
  require_running(place.cuda ? place.device_id : -1);
  if (place.cuda) {
#ifdef KOKKOS_ENABLE_CUDA
    if (place.device_id != initialized_device())
      throw std::invalid_argument("kvcanary: the arrays are on CUDA device " + std::to_string(place.device_id) +
                                  " but kvcanary runs on device " + std::to_string(initialized_device()) +
                                  " (Kokkos " + kokkos_version() + " drives one device per process)");
    DeviceGuard guard(place.device_id);
    f(instance(place.device_id, place.stream), Kokkos::CudaSpace{});
    return;
#else
    throw std::invalid_argument("kvcanary: CUDA arrays given, but this kvcanary was built without CUDA");
#endif
  }
  switch (host_backend(place.backend)) {
    case Backend::Serial:
#ifdef KOKKOS_ENABLE_SERIAL
      return on_host(Kokkos::Serial(), f);
#else
      break;
#endif
    case Backend::OpenMP:
#ifdef KOKKOS_ENABLE_OPENMP
      require_openmp_here("kvcanary: backend 'openmp'",
                          "use backend='serial' (backend=None picks serial where OpenMP cannot run)");
      return on_host(Kokkos::OpenMP(), f);
#else
      break;
#endif
    case Backend::Default:
      return on_host(Kokkos::DefaultHostExecutionSpace(), f);
    case Backend::Cuda:
      throw std::invalid_argument("kvcanary: backend 'cuda' needs CUDA arrays, got host arrays");
  }
  throw std::invalid_argument("kvcanary: this kvcanary was built without that host backend");
}

template <class Mem, class T>
Kokkos::View<const T*, Kokkos::LayoutRight, Mem> in_vec(const Vec<const T>& v) {
  return Kokkos::View<const T*, Kokkos::LayoutRight, Mem>(v.data, static_cast<std::size_t>(v.size));
}
template <class Mem, class T>
Kokkos::View<T*, Mem> out_vec(const Vec<T>& v) {
  return Kokkos::View<T*, Mem>(v.data, static_cast<std::size_t>(v.size));
}
template <class Mem, class T>
Kokkos::View<const T**, Kokkos::LayoutStride, Mem> in_mat(const Mat<const T>& m) {
  return Kokkos::View<const T**, Kokkos::LayoutStride, Mem>(
      m.data, Kokkos::LayoutStride(static_cast<std::size_t>(m.rows), static_cast<std::size_t>(m.row_stride),
                                   static_cast<std::size_t>(m.cols), 1));
}

template <class Mem>
CanaryBuffer<Mem> buffer_of(const BufferArgs& b) {
  return wrap_canary_buffer<Mem>(b.data, b.num_slots, b.stride_bytes);
}

template <class Mem>
ViolationRing<Mem> ring_of(const RingArgs& r) {
  ViolationRing<Mem> ring;
  ring.rows = decltype(ring.rows)(r.rows, static_cast<std::size_t>(r.capacity));
  ring.count = decltype(ring.count)(r.count);
  ring.slot_run_counter = decltype(ring.count)(r.slot_run_counter);
  ring.kernel_run_counter = decltype(ring.count)(r.kernel_run_counter);
  return ring;
}

template <class Mem>
RealKv<Mem> real_kv_of(const RealKvArgs& a) {
  RealKv<Mem> real_kv;
  real_kv.mode = static_cast<RealKvMode>(a.mode);
  for (const SourceArgs& s : a.sources) {
    RealKvSource<Mem> source;
    // One page: any stride will do (only row 0 is read); LayoutStride wants one >= the row.
    const std::int64_t stride = s.pages > 1 ? s.row_stride_bytes : (s.row_bytes > 0 ? s.row_bytes : 1);
    source.bytes = decltype(source.bytes)(
        s.data, Kokkos::LayoutStride(static_cast<std::size_t>(s.pages), static_cast<std::size_t>(stride),
                                     static_cast<std::size_t>(s.row_bytes), 1));
    source.page_size = s.page_size;
    source.bytes_per_token = s.bytes_per_token;
    source.read_bytes = s.read_bytes;
    real_kv.sources.push_back(source);
  }
  return real_kv;
}

}  // namespace detail
}  // namespace python
}  // namespace kvcanary

#endif
