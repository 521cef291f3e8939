#ifndef KVCANARY_PERF_PLAN_HPP
#define KVCANARY_PERF_PLAN_HPP

// The plan benchmarks, templated over the execution space, and the per-backend floor and flags.
// perf_backend.hpp (included once by a backend's .cpp) forwards the hooks of perf_registry.hpp here.
//
// Every benchmark: inputs uploaded once, outputs preallocated, poisoned; one eager warm-up call whose
// result is compared with kvcanary::reference::plan (SkipWithError on any difference); then timed as
// perf_timing.hpp says (per call: its "Time" column and us_per_call agree).

#include "perf_registry.hpp"
#include "perf_timing.hpp"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvcanary_perf {

inline void set_plan_counters(benchmark::State& state, const Workload& workload, const CallTotals& totals) {
  if (totals.calls <= 0) return;
  const double us = totals.us_per_call();
  set_time_counters(state, totals, workload.bytes, measured_floor().floor_us(workload.bytes), workload.regime);
  state.counters["entries"] = static_cast<double>(workload.entries);
  state.counters["entries_per_s"] = static_cast<double>(workload.entries) / (us * 1e-6);
  state.counters["batch_size"] = static_cast<double>(workload.inputs.req_pool_indices.size());
}

// One plan benchmark: inputs uploaded once, outputs poisoned, one eager call checked against the
// reference, then timed as `launch` says (a graph's first replay, on poisoned outputs, checked too).
template <class ExecutionSpace>
void bench_plan(benchmark::State& state, const WorkloadShape& shape, kvcanary::PlanOptions options, Launch launch) {
  run_checked(state, [&] {
    const auto reference = reference_case(shape);
    const Workload& workload = reference->workload;
    Instance<ExecutionSpace> instance;  // outlives every View allocated on it
    PlanCall<ExecutionSpace> call(instance.space(), workload, options);

    call.poison(workload);
    call.run();  // eager warm-up at this (the largest) size on this instance, before any capture; checked
    const std::string difference = call.compare(reference->expected);  // fences
    expect(difference.empty(), "result differs from kvcanary::reference::plan: " + difference);

    const CallTotals totals = time_calls(state, instance, launch, [&] { call.run(); }, [&](auto replay) {
      call.poison(workload);
      replay();
      const std::string replayed = call.compare(reference->expected);
      expect(replayed.empty(), "graph replay differs from kvcanary::reference::plan: " + replayed);
    });
    set_plan_counters(state, workload, totals);
  });
}

// Host backends: the portable path (CudaPersistent would fall back to it), one call per iteration.
// CUDA: every workload for both entries algorithms, on the stream and in a graph.
template <class ExecutionSpace>
void register_plan_benchmarks(const std::string& backend) {
  std::vector<std::pair<std::string, kvcanary::EntriesAlgorithm>> algorithms = {
      {"", kvcanary::EntriesAlgorithm::Portable}};
  if (is_cuda<ExecutionSpace>())
    algorithms = {{"/portable", kvcanary::EntriesAlgorithm::Portable},
                  {"/persistent", kvcanary::EntriesAlgorithm::CudaPersistent}};
  for (const WorkloadShape& shape : shapes_by_regime())
    for (const auto& algorithm : algorithms)
      for (const auto& launch : launches<ExecutionSpace>(backend)) {
        const kvcanary::PlanOptions options{algorithm.second};
        const Launch mode = launch.first;
        register_timed("plan/" + shape.name + algorithm.first + "/" + launch.second,
                       [shape, options, mode](benchmark::State& state) {
                         bench_plan<ExecutionSpace>(state, shape, options, mode);
                       });
      }
}

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
