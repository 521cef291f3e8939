#ifndef KVCANARY_RUNTIME_IMPL_SIDE_CHANNEL_HPP
#define KVCANARY_RUNTIME_IMPL_SIDE_CHANNEL_HPP

// Where the report pump's device-to-host copies run (docs/runtime.md, "The report pump"). On CUDA: a
// non-blocking side stream that waits on an event of the engine's stream (no host wait), copies into
// pinned memory and records a second event, which the host waits on one step later; or, for the kernel
// route, that event recorded on the engine's stream after the snapshot kernel. The beside-forward route
// runs its snapshot kernel on the same side stream as a branch: forked from the engine's stream (follow())
// and joined back into it (join()), captured as two graph edges when the engine captures both. Elsewhere
// the host backends run everything on the engine's instance and wait() fences it.

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
class SideChannel {
 public:
  using host_space = Kokkos::HostSpace;
  explicit SideChannel(const ExecutionSpace& space) : space_(space) {}
  // Orders the side copies after everything issued on the engine's instance so far.
  void follow() {}
  const ExecutionSpace& space() const { return space_; }
  // After the side copies were issued.
  void record() {}
  // After a snapshot kernel on the engine's instance (PumpSnapshot::Kernel): wait() then waits for it.
  void record_on_engine() {}
  // The engine's instance waits for what the side ran so far (the end of a branch).
  void join() {}
  void wait() { space_.fence(); }
  // What the side runs has finished (a destructor's wait: never throws).
  void drain() noexcept {}

 private:
  ExecutionSpace space_;
};

#ifdef KOKKOS_ENABLE_CUDA
inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("kvcanary::Canary: ") + what + ": " + cudaGetErrorString(error));
}

template <>
class SideChannel<Kokkos::Cuda> {
 public:
  using host_space = Kokkos::CudaHostPinnedSpace;
  explicit SideChannel(const Kokkos::Cuda& space) : engine_(space.cuda_stream()) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    side_ = Kokkos::Cuda(stream_);
  }
  SideChannel(const SideChannel&) = delete;
  SideChannel& operator=(const SideChannel&) = delete;
  ~SideChannel() {
    cudaStreamSynchronize(stream_);
    side_ = Kokkos::Cuda();  // drop the instance before its stream
    cudaEventDestroy(joined_);
    cudaEventDestroy(copied_);
    cudaEventDestroy(issued_);
    cudaStreamDestroy(stream_);
  }
  void follow() {
    check_cuda(cudaEventRecord(issued_, engine_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, issued_, 0), "cudaStreamWaitEvent");
  }
  const Kokkos::Cuda& space() const { return side_; }
  void record() { check_cuda(cudaEventRecord(copied_, stream_), "cudaEventRecord"); }
  void record_on_engine() { check_cuda(cudaEventRecord(copied_, engine_), "cudaEventRecord"); }
  void join() {
    check_cuda(cudaEventRecord(joined_, stream_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(engine_, joined_, 0), "cudaStreamWaitEvent");
  }
  void wait() { check_cuda(cudaEventSynchronize(copied_), "cudaEventSynchronize"); }
  void drain() noexcept { cudaStreamSynchronize(stream_); }

 private:
  cudaStream_t engine_ = nullptr, stream_ = nullptr;
  cudaEvent_t issued_ = nullptr, copied_ = nullptr, joined_ = nullptr;
  Kokkos::Cuda side_;
};
#endif

}  // namespace Impl
}  // namespace kvcanary

#endif
