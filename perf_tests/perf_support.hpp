#ifndef KVCANARY_PERF_SUPPORT_HPP
#define KVCANARY_PERF_SUPPORT_HPP

// What every perf driver shares: the reference result of a workload (built once and cached), a plan
// call's device data (uploaded once, outputs preallocated), the one-time check against
// kvcanary::reference::plan, and the floors measured once per run (copy, launch, write chain).

#include "workloads.hpp"

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/kvcanary.hpp>
#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace kvcanary_perf {

using kvcanary::reference::Outputs;
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// A value no plan can produce (positions are >= 0; slots, LUT values and tokens are >= 0 here).
constexpr std::int64_t kPoison = -777777;

// A workload with its host reference result, computed from fully poisoned outputs.
struct ReferenceCase {
  Workload workload;
  Outputs expected;
};

// The benchmarks of one workload are registered next to each other, so caching the last case built
// keeps the host memory to one workload at a time (bs 256 × 32K is a few hundred MB with its outputs).
inline std::shared_ptr<const ReferenceCase> reference_case(const WorkloadShape& shape) {
  static std::shared_ptr<const ReferenceCase> cached;
  if (cached && cached->workload.name == shape.name) return cached;
  cached.reset();
  auto built = std::make_shared<ReferenceCase>();
  built->workload = build_workload(shape);
  built->expected =
      kvcanary::reference::make_outputs(built->workload.verify_capacity, built->workload.write_req_capacity, kPoison);
  kvcanary::reference::plan(built->workload.inputs, built->expected);
  cached = built;
  return cached;
}

// The first difference between the library's outputs and the reference's, or "" when they agree.
inline std::string first_difference(const Outputs& got, const Outputs& want) {
  std::ostringstream os;
  auto array = [&os](const char* name, const std::vector<std::int64_t>& g, const std::vector<std::int64_t>& w) {
    if (!os.str().empty()) return;
    if (g.size() != w.size()) {
      os << name << ": extent " << g.size() << " != " << w.size();
      return;
    }
    const auto m = std::mismatch(g.begin(), g.end(), w.begin());
    if (m.first != g.end())
      os << name << "[" << (m.first - g.begin()) << "] = " << *m.first << ", reference " << *m.second;
  };
  auto scalar = [&os](const char* name, std::int32_t g, std::int32_t w) {
    if (os.str().empty() && g != w) os << name << " = " << g << ", reference " << w;
  };
  scalar("verify_num_valid", got.verify_num_valid, want.verify_num_valid);
  scalar("enable", got.enable, want.enable);
  scalar("write_num_valid_reqs", got.write_num_valid_reqs, want.write_num_valid_reqs);
  scalar("input_error_bits", got.input_error_bits, want.input_error_bits);
  scalar("first_bad_row", got.first_bad_row, want.first_bad_row);
  array("verify_slot_indices", got.verify_slot_indices, want.verify_slot_indices);
  array("verify_expected_tokens", got.verify_expected_tokens, want.verify_expected_tokens);
  array("verify_expected_positions", got.verify_expected_positions, want.verify_expected_positions);
  array("verify_prev_slot_indices", got.verify_prev_slot_indices, want.verify_prev_slot_indices);
  array("write_offsets", got.write_offsets, want.write_offsets);
  array("write_seed_slot_indices", got.write_seed_slot_indices, want.write_seed_slot_indices);
  return os.str();
}

// The execution-space instance a benchmark runs on, and what it owns. Host backends: the default
// instance. CUDA (perf_cuda.hpp): an instance over a fresh non-blocking user stream.
template <class ExecutionSpace>
struct Instance {
  ExecutionSpace space() const { return ExecutionSpace(); }
};

// The device data of one plan call: inputs uploaded once, outputs and scratch allocated once,
// everything on `space` (on CUDA the instance of the user stream that is also captured).
template <class ExecutionSpace>
struct PlanCall {
  using MemorySpace = typename ExecutionSpace::memory_space;

  ExecutionSpace space;
  kvcanary::PlanOptions options;
  kvcanary::PlanInputs<MemorySpace> inputs;
  kvcanary::VerifyPlan<MemorySpace> verify_plan;
  kvcanary::WritePlan<MemorySpace> write_plan;
  kvcanary::PlanStatus<MemorySpace> status;
  kvcanary::PlanWorkspace<MemorySpace> workspace;

  PlanCall(const ExecutionSpace& space_, const Workload& workload, kvcanary::PlanOptions options_)
      : space(space_), options(options_) {
    inputs = kvcanary::upload_inputs(space, workload.inputs);
    verify_plan = kvcanary::allocate_verify_plan(space, workload.verify_capacity);
    write_plan = kvcanary::allocate_write_plan(space, workload.write_req_capacity);
    status = kvcanary::allocate_plan_status(space);
    workspace = kvcanary::allocate_plan_workspace(space, inputs.batch_size());
    space.fence();
  }

  // One call, enqueued on `space`; no fence.
  void run() const { kvcanary::plan(space, inputs, verify_plan, write_plan, status, workspace, options); }

  void poison(const Workload& workload) const {
    kvcanary::upload_outputs(space,
                             kvcanary::reference::make_outputs(workload.verify_capacity,
                                                               workload.write_req_capacity, kPoison),
                             verify_plan, write_plan, status);
  }

  // Downloads every output (fences) and compares it with the reference; "" when equal.
  std::string compare(const Outputs& expected) const {
    Outputs got;
    kvcanary::download_outputs(space, verify_plan, write_plan, status, got);
    return first_difference(got, expected);
  }
};

// ---- the floor of SPEC §7 ----

// One formulation of the write chain timed for the floor: ns per dependent mix3 step, and whether its
// result matched the host's chain.
struct ChainVariant {
  std::string name;
  double ns_per_step = 0.0;
  bool correct = false;
};

struct Floor {
  double copy_bytes_per_s = 0.0;  // bytes read + written per second
  double launch_us = 0.0;         // one kernel launch
  double chain_ns_per_token = 0.0;  // one dependent mix3 step (the write chain, SPEC-CANARY §4): the fastest variant
  std::string copy_method;
  std::string launch_method;
  std::string chain_method;
  std::vector<ChainVariant> chain_variants;  // every formulation timed, the floor's among them

  double floor_us(std::int64_t bytes) const {
    const double copy_us = copy_bytes_per_s > 0 ? 1e6 * static_cast<double>(bytes) / copy_bytes_per_s : 0.0;
    return std::max(copy_us, launch_us);
  }
};

// Measured once in main() before any benchmark runs, by the backend's measure_floor().
inline Floor& measured_floor() {
  static Floor floor;
  return floor;
}

struct CopyFunctor {
  // Plain pointers keep the functor small; the Views outlive every launch.
  const std::int64_t* src;
  std::int64_t* dst;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { dst[i] = src[i]; }
};

struct IotaFunctor {
  std::int64_t* data;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { data[i] = i * 2654435761LL; }
};

struct EmptyFunctor {
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {}
};

// The write chain: `steps` dependent mix3 steps from `seed`, with b and c from the step counter (off the
// dependent path), as write() runs one per token of a request (running = mix3(running, token, position)).
KOKKOS_INLINE_FUNCTION std::uint64_t chain_steps(std::uint64_t seed, std::int64_t steps) {
  std::uint64_t h = seed;
  for (std::int64_t k = 0; k < steps; ++k)
    h = kvcanary::Impl::mix3(h, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(k) + 1u);
  return h;
}

// One work item running the chain from a seed it loads from memory, as write() starts from a seed record.
struct ChainFromMemoryFunctor {
  const std::uint64_t* seed;
  std::uint64_t* out;
  std::int64_t steps;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const { *out = chain_steps(*seed, steps); }
};

// The same chain from a seed passed by value: on a GPU the compiler can prove every value warp-uniform
// and run the whole chain on the uniform datapath (docs/perf-notes.md), which no write can do.
struct ChainFromArgumentFunctor {
  std::uint64_t seed;
  std::uint64_t* out;
  std::int64_t steps;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const { *out = chain_steps(seed, steps); }
};

constexpr std::uint64_t kChainSeed = 0x0123456789ABCDEFull;

// ns per step of `run(steps)` (which launches one chain of `steps` steps and writes it to `out`): (time of
// 2 × steps - time of steps) / steps, so the launch cancels out; medians of 7 after a warm-up. The
// variant is correct when the last result equals the host's chain.
template <class ExecutionSpace, class Run>
ChainVariant time_chain(const ExecutionSpace& space, const std::string& name, std::int64_t steps,
                        const Kokkos::View<std::uint64_t, typename ExecutionSpace::memory_space>& out, Run&& run) {
  const auto run_us = [&](std::int64_t n) {
    std::vector<double> trials;
    for (int t = 0; t < 8; ++t) {
      space.fence();
      const auto start = Clock::now();
      run(n);
      space.fence();
      if (t > 0) trials.push_back(1e6 * seconds_since(start));
    }
    return median(trials);
  };
  ChainVariant variant;
  variant.name = name;
  const double single_us = run_us(steps), double_us = run_us(2 * steps);
  variant.ns_per_step = 1e3 * (double_us - single_us) / static_cast<double>(steps);
  space.fence();
  std::uint64_t got = 0;
  Kokkos::deep_copy(got, out);
  variant.correct = got == chain_steps(kChainSeed, 2 * steps);
  return variant;
}

// Sets the chain floor to the fastest correct variant of `variants`, and says how it was measured.
inline void set_chain_floor(Floor& floor, std::vector<ChainVariant> variants, std::int64_t steps, const std::string& backend) {
  floor.chain_variants = std::move(variants);
  const ChainVariant* best = nullptr;
  for (const ChainVariant& v : floor.chain_variants)
    if (v.correct && (best == nullptr || v.ns_per_step < best->ns_per_step)) best = &v;
  floor.chain_ns_per_token = best != nullptr ? best->ns_per_step : 0.0;
  floor.chain_method = "fastest of " + std::to_string(floor.chain_variants.size()) + " chain formulations on " +
                       backend + " (" + (best != nullptr ? best->name : std::string("none correct")) +
                       "): one work item, dependent kvcanary::Impl::mix3 steps, (time of " + std::to_string(2 * steps) +
                       " - time of " + std::to_string(steps) + ") / " + std::to_string(steps) + ", medians of 7";
}

// The chain variants every backend runs (Kokkos functors); the CUDA floor adds raw kernels.
template <class ExecutionSpace>
std::vector<ChainVariant> kokkos_chain_variants(const ExecutionSpace& space, std::int64_t steps) {
  using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  using Memory = typename ExecutionSpace::memory_space;
  Kokkos::View<std::uint64_t, Memory> seed(Kokkos::view_alloc(space, "kvcanary_perf::chain_seed"));
  Kokkos::View<std::uint64_t, Memory> out(Kokkos::view_alloc(space, "kvcanary_perf::chain_out"));
  Kokkos::deep_copy(space, seed, kChainSeed);
  std::vector<ChainVariant> variants;
  variants.push_back(time_chain(space, "Kokkos functor, seed in memory", steps, out, [&](std::int64_t n) {
    Kokkos::parallel_for("kvcanary_perf::chain", Policy(space, 0, 1), ChainFromMemoryFunctor{seed.data(), out.data(), n});
  }));
  variants.push_back(time_chain(space, "Kokkos functor, seed by value", steps, out, [&](std::int64_t n) {
    Kokkos::parallel_for("kvcanary_perf::chain", Policy(space, 0, 1), ChainFromArgumentFunctor{kChainSeed, out.data(), n});
  }));
  return variants;
}

// The write floor per token on a host backend: the fastest chain variant.
template <class ExecutionSpace>
void measure_chain_floor(const ExecutionSpace& space, std::int64_t steps, const std::string& backend, Floor& floor) {
  set_chain_floor(floor, kokkos_chain_variants(space, steps), steps, backend);
}

// Bytes per second (read + written) of `copy(src, dst)` between two n-element int64 Views of `space`,
// first touched by the space's own threads (so NUMA/OpenMP placement matches); median of 7 after a warm-up.
template <class ExecutionSpace, class Copy>
double copy_bandwidth(const ExecutionSpace& space, std::int64_t n, Copy&& copy) {
  using View = Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space>;
  using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  View src(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kvcanary_perf::copy_src"), n);
  View dst(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kvcanary_perf::copy_dst"), n);
  Kokkos::parallel_for("kvcanary_perf::iota", Policy(space, 0, n), IotaFunctor{src.data()});
  Kokkos::parallel_for("kvcanary_perf::iota", Policy(space, 0, n), IotaFunctor{dst.data()});
  space.fence();
  std::vector<double> trials;
  for (int t = 0; t < 8; ++t) {
    space.fence();
    const auto start = Clock::now();
    copy(src, dst);
    space.fence();
    if (t > 0) trials.push_back(seconds_since(start));  // trial 0 is the warm-up
  }
  return 2.0 * 8.0 * static_cast<double>(n) / median(trials);
}

// Host backends: a parallel_for copy of 256 MiB on the backend (so the OpenMP threads count), one
// eager empty parallel_for of one element as the launch floor, and the mix3 chain (2^20 steps). Medians.
template <class ExecutionSpace>
Floor measure_host_floor(const ExecutionSpace& space, const std::string& backend) {
  using View = Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space>;
  using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t n = (std::int64_t{256} << 20) / 8;
  Floor floor;
  {
    floor.copy_bytes_per_s = copy_bandwidth(space, n, [&](const View& src, const View& dst) {
      Kokkos::parallel_for("kvcanary_perf::copy", Policy(space, 0, n), CopyFunctor{src.data(), dst.data()});
    });
    floor.copy_method = "parallel_for copy of 256 MiB int64 on " + backend + " (" +
                        std::to_string(space.concurrency()) + " threads), read+write bytes, median of 7";
  }
  {
    // Each launch timed alone and the median taken: on a loaded machine a fork-join that waits for a
    // descheduled thread costs a scheduler time slice, which a mean over many calls would fold in.
    std::vector<double> calls;
    constexpr int kCalls = 2000;
    for (int c = 0; c < kCalls + 100; ++c) {
      space.fence();
      const auto start = Clock::now();
      Kokkos::parallel_for("kvcanary_perf::empty", Policy(space, 0, 1), EmptyFunctor{});
      space.fence();
      if (c >= 100) calls.push_back(seconds_since(start));  // the first 100 are the warm-up
    }
    floor.launch_us = 1e6 * median(calls);
    floor.launch_method = "eager empty parallel_for(1) + fence on " + backend + ", median of 2000 single calls";
  }
  measure_chain_floor(space, std::int64_t{1} << 20, backend, floor);
  return floor;
}

}  // namespace kvcanary_perf

#endif
