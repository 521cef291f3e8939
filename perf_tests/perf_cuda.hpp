#ifndef KVCANARY_PERF_CUDA_HPP
#define KVCANARY_PERF_CUDA_HPP

// CUDA-only pieces of the perf drivers (compiled only when Kokkos has CUDA):
// * Instance<Kokkos::Cuda>: a Kokkos::Cuda instance over a fresh non-blocking user stream;
// * CudaGraph: global-mode capture of what a callable enqueues on that stream, instantiate, replay;
// * the floor on the GPU: a >= 1 GiB device-to-device deep_copy, and an empty kernel replayed in a graph
// (perf_timing.hpp times the benchmarks' graphs).
// The capture rules of KOKKOS34-CUDA.md are followed: an eager call on the plan's own instance (its
// largest size) before any capture, one instance per (plan, stream), no fence inside the capture.

#include "perf_support.hpp"

#ifdef KOKKOS_ENABLE_CUDA

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>

// Every CUDA runtime call of the perf drivers goes through this (throws; the benchmark body turns it
// into SkipWithError).
#define KVCANARY_PERF_CUDA_CHECK(call) ::kvcanary_perf::cuda_check((call), #call, __FILE__, __LINE__)

namespace kvcanary_perf {

inline void cuda_check(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                             cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

class CudaStream {
 public:
  CudaStream() { KVCANARY_PERF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);  // destructor: nothing to report to
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Declared stream first: the Kokkos instance (and every View a PlanCall allocated on it, which the
// caller declares after this object) is gone before the stream is destroyed.
template <>
struct Instance<Kokkos::Cuda> {
  CudaStream stream;
  Kokkos::Cuda instance{stream.get()};
  Kokkos::Cuda space() const { return instance; }
  cudaStream_t cuda_stream() const { return stream.get(); }
};

class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }

  // Captures, in cudaStreamCaptureModeGlobal, everything `enqueue` launches on `stream`, and instantiates it.
  template <class Enqueue>
  void capture(cudaStream_t stream, Enqueue&& enqueue) {
    KVCANARY_PERF_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);  // leave the stream usable; the first error is the one thrown
      if (broken != nullptr) cudaGraphDestroy(broken);
      throw;
    }
    KVCANARY_PERF_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    KVCANARY_PERF_CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec_, graph_, 0));
  }

  void launch(cudaStream_t stream) const { KVCANARY_PERF_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

  std::size_t node_count() const {
    std::size_t nodes = 0;
    KVCANARY_PERF_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes));
    return nodes;
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The chain as raw CUDA kernels (nvcc straight, no Kokkos launch): the seed by value (GPU-FLOORS.md's
// tools/chain_floor.cu) or loaded from memory. One thread. Templates: this header is in several TUs.
template <int kFromMemory>
__global__ void chain_kernel(std::uint64_t seed, const std::uint64_t* seed_in_memory, std::int64_t steps, std::uint64_t* out) {
  *out = chain_steps(kFromMemory ? *seed_in_memory : seed, steps);
}

// The same with the write walk's split multiply (impl/write_cuda.hpp, CudaWrite::SplitMultiply).
template <int kFromMemory>
__global__ void split_chain_kernel(std::uint64_t seed, const std::uint64_t* seed_in_memory, std::int64_t steps,
                                   std::uint64_t* out) {
  using Split = kvcanary::Impl::CudaWrite::SplitMultiply;
  std::uint64_t h = kFromMemory ? *seed_in_memory : seed;
  for (std::int64_t k = 0; k < steps; ++k)
    h = Split::splitmix64(Split::splitmix64(Split::splitmix64(h) ^ static_cast<std::uint64_t>(k)) ^
                          (static_cast<std::uint64_t>(k) + 1u));
  *out = h;
}

// The write floor per token on the GPU: the fastest of the Kokkos and raw CUDA chain variants (seed in
// memory as a write has it, or by value; the multiply as C++ or as the write walk's split multiply).
inline void measure_cuda_chain_floor(const Kokkos::Cuda& space, std::int64_t steps, Floor& floor) {
  std::vector<ChainVariant> variants = kokkos_chain_variants(space, steps);
  Kokkos::View<std::uint64_t, Kokkos::CudaSpace> seed(Kokkos::view_alloc(space, "kvcanary_perf::chain_seed"));
  Kokkos::View<std::uint64_t, Kokkos::CudaSpace> out(Kokkos::view_alloc(space, "kvcanary_perf::chain_out"));
  Kokkos::deep_copy(space, seed, kChainSeed);
  variants.push_back(time_chain(space, "raw CUDA kernel, seed in memory", steps, out, [&](std::int64_t n) {
    chain_kernel<1><<<1, 1, 0, space.cuda_stream()>>>(0, seed.data(), n, out.data());
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
  }));
  variants.push_back(time_chain(space, "raw CUDA kernel, seed by value", steps, out, [&](std::int64_t n) {
    chain_kernel<0><<<1, 1, 0, space.cuda_stream()>>>(kChainSeed, nullptr, n, out.data());
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
  }));
  variants.push_back(time_chain(space, "raw CUDA kernel, seed in memory, split multiply", steps, out, [&](std::int64_t n) {
    split_chain_kernel<1><<<1, 1, 0, space.cuda_stream()>>>(0, seed.data(), n, out.data());
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
  }));
  variants.push_back(time_chain(space, "raw CUDA kernel, seed by value, split multiply", steps, out, [&](std::int64_t n) {
    split_chain_kernel<0><<<1, 1, 0, space.cuda_stream()>>>(kChainSeed, nullptr, n, out.data());
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
  }));
  set_chain_floor(floor, std::move(variants), steps, "cuda");
}

// SPEC §7 floor on the GPU, on a user-stream instance like the benchmarks:
// * copy: Kokkos::deep_copy between two 1 GiB device Views (bytes read + written), median of 7;
// * launch: 20 empty Kokkos parallel_for(1) captured in one graph, replayed 50 times; µs per node, median of 7;
// * chain: ns per dependent mix3 step of one GPU thread (8,192 and 16,384 steps), the fastest of six
//   formulations (GPU-FLOORS.md: ~75 ns for the seed by value).
inline Floor measure_cuda_floor() {
  using View = Kokkos::View<std::int64_t*, Kokkos::CudaSpace>;
  using Policy = Kokkos::RangePolicy<Kokkos::Cuda, Kokkos::IndexType<std::int64_t>>;
  Floor floor;
  Instance<Kokkos::Cuda> instance;
  const Kokkos::Cuda space = instance.space();
  const cudaStream_t stream = instance.cuda_stream();
  {
    const std::int64_t n = (std::int64_t{1} << 30) / 8;
    floor.copy_bytes_per_s =
        copy_bandwidth(space, n, [&](const View& src, const View& dst) { Kokkos::deep_copy(space, dst, src); });
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
    floor.copy_method = "Kokkos::deep_copy between two 1 GiB CudaSpace Views on a user stream, read+write bytes, median of 7";
  }
  {
    constexpr int kNodes = 20;
    constexpr int kReplays = 50;
    Kokkos::parallel_for("kvcanary_perf::empty", Policy(space, 0, 1), EmptyFunctor{});  // eager first (rule 1)
    space.fence();
    CudaGraph graph;
    graph.capture(stream, [&] {
      for (int k = 0; k < kNodes; ++k)
        Kokkos::parallel_for("kvcanary_perf::empty", Policy(space, 0, 1), EmptyFunctor{});
    });
    graph.launch(stream);
    KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> trials;
    for (int t = 0; t < 7; ++t) {
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto start = Clock::now();
      for (int r = 0; r < kReplays; ++r) graph.launch(stream);
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      trials.push_back(seconds_since(start) / (kReplays * kNodes));
    }
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
    floor.launch_us = 1e6 * median(trials);
    floor.launch_method = "empty Kokkos parallel_for(1), 20 nodes in one CUDA graph, 50 replays, per node, median of 7 (" +
                          std::to_string(graph.node_count()) + " nodes captured)";
  }
  measure_cuda_chain_floor(space, 8192, floor);
  return floor;
}

}  // namespace kvcanary_perf

#endif  // KOKKOS_ENABLE_CUDA
#endif
