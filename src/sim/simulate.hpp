#ifndef KVCANARY_SIM_SIMULATE_HPP
#define KVCANARY_SIM_SIMULATE_HPP

// kvcanary::sim::simulate(): run the engine model for options.steps steps with the canary on an
// execution space, inject the chosen faults, and report what the canary caught (docs/simulator.md).
//
//   auto report = kvcanary::sim::simulate(Kokkos::DefaultExecutionSpace{}, options);
//   std::cout << kvcanary::sim::format_table(report);   // report.ok(): no miss, no false positive
//
// simulate(options, "serial" | "openmp" | "cuda") picks the backend by name (the CLI's --backend).

#include "device_pipeline.hpp"
#include "engine.hpp"
#include "reference_pipeline.hpp"
#include "step_timer.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kvcanary {
namespace sim {

namespace Impl {

inline double microseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

inline std::vector<GroupRow> sorted(std::vector<GroupRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const GroupRow& a, const GroupRow& b) {
    return a.group != b.group ? a.group < b.group : a.row < b.row;
  });
  return rows;
}

#ifdef KOKKOS_ENABLE_CUDA
// run(Kokkos::Cuda(stream)) on a user stream of its own, destroyed after: CUDA graphs cannot be captured
// on the legacy default stream, which a default-constructed Kokkos::Cuda may use.
template <class Run>
auto on_user_stream(const Run& run) {
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    throw std::runtime_error("kvcanary simulate: cudaStreamCreate failed");
  try {
    auto result = run(Kokkos::Cuda(stream));
    cudaStreamDestroy(stream);
    return result;
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
}
#endif

}  // namespace Impl

// With `reference_shadow`, every step also runs on the host reference and the report counts the steps
// whose rings differ (report.reference_mismatches); it is slow and meant for tests.
template <class Space>
SimulationReport simulate(const Space& space, const SimulationOptions& options, bool reference_shadow = false) {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<Space, Kokkos::Cuda>::value) {
    const cudaStream_t stream = space.cuda_stream();
    if (options.use_graphs && (stream == nullptr || stream == cudaStreamLegacy))
      return Impl::on_user_stream([&](const Kokkos::Cuda& own) { return simulate(own, options, reference_shadow); });
  }
#endif
  Engine engine(options);
  DevicePipeline<Space> device(space, engine.shape(), options);
  std::optional<ReferencePipeline> reference;
  if (reference_shadow) reference.emplace(engine.shape(), options);
  std::int64_t mismatches = 0;
  double canary_us = 0, step_us = 0;
  StepTimer timer;  // per step: live batch size, prefill or not, canary and step µs (bounded: step_timer.hpp)

  const auto run_start = std::chrono::steady_clock::now();
  for (std::int64_t step = 0; step < options.steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    const StepData& data = engine.begin_step(step);
    device.upload(engine, data);
    device.fence();
    auto start = std::chrono::steady_clock::now();
    device.head(data);
    device.fence();
    double canary = Impl::microseconds_since(start);
    device.model_write(data);
    device.fence();
    start = std::chrono::steady_clock::now();
    device.tail(data);
    if (data.sweep) device.sweep(data);
    device.fence();
    canary += Impl::microseconds_since(start);
    std::vector<GroupRow> rows;
    const std::int64_t overflows = device.read(rows);
    if (reference) {
      std::vector<GroupRow> expected;
      reference->upload(engine, data);
      reference->head(data);
      reference->model_write(data);
      reference->tail(data);
      if (data.sweep) reference->sweep(data);
      reference->read(expected);
      const std::vector<GroupRow> got = Impl::sorted(rows), want = Impl::sorted(expected);
      if (!std::equal(got.begin(), got.end(), want.begin(), want.end(),
                      [](const GroupRow& a, const GroupRow& b) { return a.group == b.group && a.row == b.row; }))
        ++mismatches;
    }
    engine.end_step(rows, overflows);
    canary_us += canary;
    const double step_time = Impl::microseconds_since(step_start);
    step_us += step_time;
    timer.add({data.live, data.prefill_rows > 0, static_cast<float>(canary), static_cast<float>(step_time)});
  }
  const double total_us = Impl::microseconds_since(run_start);

  SimulationReport report = engine.report();
  report.backend = Space::name();
  const double steps = static_cast<double>(std::max<std::int64_t>(1, options.steps));
  report.canary_us_per_step = canary_us / steps;
  report.step_us_per_step = step_us / steps;
  report.steps_per_second = total_us > 0 ? static_cast<double>(options.steps) * 1e6 / total_us : 0;
  report.by_batch_size = timer.by_batch_size();
  if (reference) report.reference_mismatches = mismatches;
  return report;
}

// The backend by name: "serial", "openmp", "cuda" (those this build has), or "default". Throws
// std::invalid_argument for another name.
SimulationReport simulate(const SimulationOptions& options, const std::string& backend = "default");

}  // namespace sim
}  // namespace kvcanary

#endif
