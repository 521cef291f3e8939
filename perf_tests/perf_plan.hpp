#ifndef KVCANARY_PERF_PLAN_HPP
#define KVCANARY_PERF_PLAN_HPP

// The plan benchmarks, templated over the execution space. A backend's .cpp defines
// KVCANARY_PERF_EXECSPACE and KVCANARY_PERF_BACKEND and includes this header once; it then defines
// the hooks perf_main.cpp calls (backend_name, measure_floor, register_benchmarks).
//
// Every benchmark: inputs uploaded once, outputs preallocated, poisoned; one eager warm-up call whose
// result is compared with kvcanary::reference::plan (SkipWithError on any difference); then timed with
// manual time (fence, start, N calls, fence, stop). The iteration time given to Google Benchmark is the
// time PER CALL, so its "Time" column and us_per_call agree.

#include "perf_registry.hpp"
#include "perf_support.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include "perf_cuda.hpp"
#endif

#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvcanary_perf {

// Latency workloads first, then bandwidth ones (STYLE.md: keep them apart); SPEC order within each.
inline std::vector<WorkloadShape> shapes_by_regime() {
  std::vector<WorkloadShape> ordered;
  for (const Regime regime : {Regime::Latency, Regime::Bandwidth})
    for (const WorkloadShape& shape : workload_shapes())
      if (shape.regime == regime) ordered.push_back(shape);
  return ordered;
}

// N plan() calls back to back between two fences, per iteration.
template <class ExecutionSpace>
void bench_stream(benchmark::State& state, const WorkloadShape& shape, kvcanary::PlanOptions options,
                  std::int64_t calls_per_iteration) {
  try {
    const auto reference = reference_case(shape);
    const Workload& workload = reference->workload;
    Instance<ExecutionSpace> instance;  // outlives every View allocated on it
    PlanCall<ExecutionSpace> call(instance.space(), workload, options);

    call.poison(workload);
    call.run();  // eager warm-up, checked
    const std::string difference = call.compare(reference->expected);
    if (!difference.empty()) {
      state.SkipWithError(("result differs from kvcanary::reference::plan: " + difference).c_str());
      return;
    }

    double total_seconds = 0.0;
    std::int64_t total_calls = 0;
    for (auto _ : state) {
      call.space.fence();
      const auto start = Clock::now();
      for (std::int64_t c = 0; c < calls_per_iteration; ++c) call.run();
      call.space.fence();
      const double seconds = seconds_since(start);
      state.SetIterationTime(seconds / static_cast<double>(calls_per_iteration));
      total_seconds += seconds;
      total_calls += calls_per_iteration;
    }
    set_plan_counters(state, workload, total_seconds, total_calls, calls_per_iteration);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("exception: ") + e.what()).c_str());
  }
}

// Host backends: the portable path (CudaPersistent would fall back to it), one call per iteration.
template <class ExecutionSpace>
void register_host_benchmarks(const std::string& backend) {
  for (const WorkloadShape& shape : shapes_by_regime()) {
    benchmark::RegisterBenchmark(("plan/" + shape.name + "/" + backend).c_str(),
                                 [shape](benchmark::State& state) {
                                   bench_stream<ExecutionSpace>(
                                       state, shape, kvcanary::PlanOptions{kvcanary::EntriesAlgorithm::Portable}, 1);
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

#ifdef KOKKOS_ENABLE_CUDA
// CUDA: every workload for both entries algorithms, each timed two ways: N calls back to back on the
// user stream between fences ("stream"), and K calls captured in one graph, replayed ("graph").
constexpr std::int64_t kCudaStreamCalls = 20;
constexpr int kCudaGraphCalls = 20;
constexpr int kCudaGraphReplays = 10;

inline void register_cuda_benchmarks() {
  const std::pair<const char*, kvcanary::EntriesAlgorithm> algorithms[] = {
      {"portable", kvcanary::EntriesAlgorithm::Portable},
      {"persistent", kvcanary::EntriesAlgorithm::CudaPersistent},
  };
  for (const WorkloadShape& shape : shapes_by_regime()) {
    for (const auto& algorithm : algorithms) {
      const kvcanary::PlanOptions options{algorithm.second};
      const std::string prefix = "plan/" + shape.name + "/" + algorithm.first;
      benchmark::RegisterBenchmark((prefix + "/stream").c_str(),
                                   [shape, options](benchmark::State& state) {
                                     bench_stream<Kokkos::Cuda>(state, shape, options, kCudaStreamCalls);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((prefix + "/graph").c_str(),
                                   [shape, options](benchmark::State& state) {
                                     bench_graph(state, shape, options, kCudaGraphCalls, kCudaGraphReplays);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}
#endif

// ---- what a backend's .cpp forwards its hooks to ----

template <class ExecutionSpace>
Floor measure_backend_floor(const std::string& backend) {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
    return measure_cuda_floor();
  } else
#endif
  {
    return measure_host_floor(ExecutionSpace(), backend);
  }
}

template <class ExecutionSpace>
void register_backend_benchmarks(const std::string& backend) {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
    register_cuda_benchmarks();
  } else
#endif
  {
    register_host_benchmarks<ExecutionSpace>(backend);
  }
}

// Medians by default: 5 repetitions, aggregates only. On CUDA an iteration is 20-200 calls while Google
// Benchmark counts the per-call time against --benchmark_min_time, so a short min time keeps the run
// to about a second per repetition. The user's flags come after these and win.
template <class ExecutionSpace>
std::vector<std::string> backend_default_flags() {
  std::vector<std::string> flags = {"--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true"};
#ifdef KOKKOS_ENABLE_CUDA
  if (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) flags.push_back("--benchmark_min_time=0.005");
#endif
  return flags;
}

}  // namespace kvcanary_perf

#endif
