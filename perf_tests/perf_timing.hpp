#ifndef KVCANARY_PERF_TIMING_HPP
#define KVCANARY_PERF_TIMING_HPP

// How every benchmark (plan, verify, write) launches and times its calls, and the counters they share.
//
// * Host backends: one call per iteration (Launch::Host).
// * CUDA: 20 calls back to back on the user stream between fences (Launch::Stream), or 20 calls captured
//   in one CUDA graph, replayed 10 times per iteration (Launch::Graph; the first replay is checked).
// Manual time: fence, start, the calls, fence, stop. The iteration time given to Google Benchmark is the
// time PER CALL, so its "Time" column and the us_per_call counter agree.

#include "perf_support.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include "perf_cuda.hpp"
#endif

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvcanary_perf {

enum class Launch { Host, Stream, Graph };

constexpr std::int64_t kCudaStreamCalls = 20;
constexpr int kCudaGraphCalls = 20;
constexpr int kCudaGraphReplays = 10;

// A benchmark's one-time result check failed: the body turns it into SkipWithError(what()).
struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void expect(bool ok, const std::string& what) {
  if (!ok) throw CheckFailure(what);
}

// Runs a benchmark body; a failed check or any exception skips the benchmark with the reason.
template <class Body>
void run_checked(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const CheckFailure& e) {
    state.SkipWithError(e.what());
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("exception: ") + e.what()).c_str());
  }
}

template <class ExecutionSpace>
constexpr bool is_cuda() {
#ifdef KOKKOS_ENABLE_CUDA
  return std::is_same<ExecutionSpace, Kokkos::Cuda>::value;
#else
  return false;
#endif
}

// The launch modes of a backend, with the last component of their benchmark names.
template <class ExecutionSpace>
std::vector<std::pair<Launch, std::string>> launches(const std::string& backend) {
  if (is_cuda<ExecutionSpace>()) return {{Launch::Stream, "stream"}, {Launch::Graph, "graph"}};
  return {{Launch::Host, backend}};
}

// The implementations of a canary stage a backend times (the last-but-one name component on CUDA):
// on CUDA the raw kernel where the stage has one (write), and the portable one.
template <class ExecutionSpace>
std::vector<std::pair<std::string, kvcanary::CanaryAlgorithm>> canary_algorithms(bool has_cuda_path) {
  if (!is_cuda<ExecutionSpace>()) return {{"", kvcanary::CanaryAlgorithm::Portable}};
  if (has_cuda_path) return {{"/cuda", kvcanary::CanaryAlgorithm::Cuda}, {"/portable", kvcanary::CanaryAlgorithm::Portable}};
  return {{"/portable", kvcanary::CanaryAlgorithm::Portable}};
}

inline void register_timed(const std::string& name, std::function<void(benchmark::State&)> body) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(body))->UseManualTime()->Unit(benchmark::kMicrosecond);
}

struct CallTotals {
  double seconds = 0.0;
  std::int64_t calls = 0;
  std::int64_t calls_per_iteration = 1;
  double graph_nodes_per_call = 0.0;  // Launch::Graph only

  double us_per_call() const { return calls > 0 ? 1e6 * seconds / static_cast<double>(calls) : 0.0; }
};

// `calls` back-to-back calls per iteration between two fences of `space`.
template <class ExecutionSpace, class Enqueue>
CallTotals time_stream(benchmark::State& state, const ExecutionSpace& space, std::int64_t calls, Enqueue&& enqueue) {
  CallTotals totals;
  totals.calls_per_iteration = calls;
  for (auto _ : state) {
    space.fence();
    const auto start = Clock::now();
    for (std::int64_t c = 0; c < calls; ++c) enqueue();
    space.fence();
    const double seconds = seconds_since(start);
    state.SetIterationTime(seconds / static_cast<double>(calls));
    totals.seconds += seconds;
    totals.calls += calls;
  }
  return totals;
}

// Times `enqueue` (one call on the instance's space, no fence) the way `launch` says. The caller has
// made (and checked) an eager call on this instance first. With Launch::Graph, `check_replay(replay)`
// runs once after the capture: it gets a callable that replays the graph once and synchronizes, and
// throws CheckFailure when the replayed result is wrong.
template <class ExecutionSpace, class Enqueue, class CheckReplay>
CallTotals time_calls(benchmark::State& state, const Instance<ExecutionSpace>& instance, Launch launch,
                      Enqueue&& enqueue, CheckReplay&& check_replay) {
  const ExecutionSpace space = instance.space();
  if (launch == Launch::Host) return time_stream(state, space, 1, enqueue);
  if (launch == Launch::Stream) return time_stream(state, space, kCudaStreamCalls, enqueue);
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
    const cudaStream_t stream = instance.cuda_stream();
    CudaGraph graph;
    graph.capture(stream, [&] {
      for (int k = 0; k < kCudaGraphCalls; ++k) enqueue();
    });
    check_replay([&] {
      graph.launch(stream);
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
    CallTotals totals;
    totals.calls_per_iteration = std::int64_t{kCudaGraphCalls} * kCudaGraphReplays;
    for (auto _ : state) {
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto start = Clock::now();
      for (int r = 0; r < kCudaGraphReplays; ++r) graph.launch(stream);
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      const double seconds = seconds_since(start);
      state.SetIterationTime(seconds / static_cast<double>(totals.calls_per_iteration));
      totals.seconds += seconds;
      totals.calls += totals.calls_per_iteration;
    }
    KVCANARY_PERF_CUDA_CHECK(cudaGetLastError());
    // The execution contract: a fixed number of launches per call; memcpy/memset nodes would show here.
    totals.graph_nodes_per_call = static_cast<double>(graph.node_count()) / kCudaGraphCalls;
    return totals;
  } else
#endif
  {
    (void)check_replay;
    throw std::logic_error("kvcanary_perf: CUDA graphs need Kokkos::Cuda");
  }
}

// The time of one call of `enqueue` on `instance`, in µs, for floors measured in the benchmark's own run
// (after a warm-up call):
// * CUDA: 20 calls captured in one graph, replayed 5 times per trial; median of 7 trials;
// * host: single calls each timed alone between fences, median of up to 201 (at least 9, about 50 ms):
//   on a loaded machine a fork-join that waits for a descheduled thread costs a scheduler time slice,
//   which a mean over back-to-back calls would fold into the floor.
template <class ExecutionSpace, class Enqueue>
double floor_call_us(const Instance<ExecutionSpace>& instance, Enqueue&& enqueue) {
  const ExecutionSpace space = instance.space();
  enqueue();  // warm-up, outside any capture
  space.fence();
  std::vector<double> trials;
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
    constexpr int kReplays = 5;
    const cudaStream_t stream = instance.cuda_stream();
    CudaGraph graph;
    graph.capture(stream, [&] {
      for (int k = 0; k < kCudaGraphCalls; ++k) enqueue();
    });
    for (int t = 0; t < 8; ++t) {
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto start = Clock::now();
      for (int r = 0; r < kReplays; ++r) graph.launch(stream);
      KVCANARY_PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (t > 0) trials.push_back(seconds_since(start) / (kReplays * kCudaGraphCalls));  // trial 0 warms the graph
    }
  } else
#endif
  {
    const auto begin = Clock::now();
    while (trials.size() < 201 && (trials.size() < 9 || seconds_since(begin) < 0.05)) {
      const auto start = Clock::now();
      enqueue();
      space.fence();
      trials.push_back(seconds_since(start));
    }
  }
  return 1e6 * median(trials);
}

// The counters of every benchmark: us_per_call, GB_per_s (bytes / time), bytes, floor_us,
// pct_of_floor (100 × floor / time: 100 = at the floor), calls_per_iter, graph_nodes_per_call
// (graphs), and the regime as the label.
inline void set_time_counters(benchmark::State& state, const CallTotals& totals, std::int64_t bytes, double floor_us,
                              Regime regime) {
  if (totals.calls <= 0) return;
  const double us = totals.us_per_call();
  state.counters["us_per_call"] = us;
  state.counters["GB_per_s"] = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["floor_us"] = floor_us;
  state.counters["pct_of_floor"] = 100.0 * floor_us / us;
  state.counters["calls_per_iter"] = static_cast<double>(totals.calls_per_iteration);
  if (totals.graph_nodes_per_call > 0) state.counters["graph_nodes_per_call"] = totals.graph_nodes_per_call;
  state.SetLabel(regime_name(regime));
}

}  // namespace kvcanary_perf

#endif
