#ifndef KVCANARY_PERF_WRITE_HPP
#define KVCANARY_PERF_WRITE_HPP

// The write benchmarks (SPEC-CANARY §4): write/<case>/<launch> for decode (1 token for each of 1, 64,
// 256, 4096 requests) and prefill chunks (32 × 2K tokens, 1 × 8K tokens; a first chunk without a seed and
// a next chunk with one), distinct slots, input assert and chain-position assert on
// (canary_workloads.hpp). Checked once before timing (SkipWithError otherwise): after the eager call the
// buffer equals kvcanary::reference::write's, no violation, the counters moved by the tokens; a graph's
// first replay rewrites the same records (seeds are never targets) and is checked the same way.
//
// Floor: max(bytes / copy bandwidth, one launch, longest request × the measured mix3 chain step): a
// request's tokens are a dependent chain of three splitmix64 each (GPU-FLOORS.md).

#include "canary_workloads.hpp"
#include "perf_timing.hpp"

#include <kvcanary/kvcanary.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

namespace kvcanary_perf {

template <class ExecutionSpace>
struct WriteCall {
  using MemorySpace = typename ExecutionSpace::memory_space;

  ExecutionSpace space;
  kvcanary::WritePlan<MemorySpace> plan;
  kvcanary::StepTokens<MemorySpace> tokens;
  kvcanary::CanaryBuffer<MemorySpace> buffer;
  kvcanary::ViolationRing<MemorySpace> ring;
  kvcanary::WriteOptions<MemorySpace> options;

  WriteCall(const ExecutionSpace& space_, const WriteCase& c, kvcanary::CanaryAlgorithm algorithm)
      : space(space_),
        plan(kvcanary::upload_write_plan(space_, c.plan)),
        tokens(kvcanary::upload_step_tokens(space_, c.tokens)),
        buffer(kvcanary::upload_canary_buffer(space_, c.initial)),
        ring(kvcanary::allocate_violation_ring(space_, c.expected_ring.capacity)) {
    options.algorithm = algorithm;
    space.fence();
  }

  void run() const { kvcanary::write(space, plan, tokens, buffer, ring, options); }

  // The buffer and ring after `calls` calls: the reference's records, no row, the counters moved.
  void expect_result(const WriteCase& c, std::int64_t calls, const std::string& when) const {
    const canary::CanaryBuffer got = kvcanary::download_canary_buffer(space, buffer);  // fences
    const auto m = std::mismatch(got.begin(), got.end(), c.expected.begin());
    expect(m.first == got.end(), when + ": record of slot " + std::to_string(m.first - got.begin()) +
                                     " differs from kvcanary::reference::write");
    const canary::ViolationRing r = kvcanary::download_violation_ring(space, ring);
    expect(r.count == 0, when + ": " + std::to_string(r.count) + " violations" + first_row(r));
    expect(r.kernel_run_counter == calls && r.slot_run_counter == calls * c.num_tokens(),
           when + ": counters " + std::to_string(r.kernel_run_counter) + " / " + std::to_string(r.slot_run_counter) +
               ", want " + std::to_string(calls) + " / " + std::to_string(calls * c.num_tokens()));
  }
};

// The benchmarks of one case are registered next to each other: keep the last one built.
inline std::shared_ptr<const WriteCase> write_case(const WriteShape& shape) {
  static std::shared_ptr<const WriteCase> cached;
  if (cached && cached->shape.name == shape.name) return cached;
  cached.reset();
  cached = std::make_shared<const WriteCase>(build_write_case(shape));
  return cached;
}

template <class ExecutionSpace>
void bench_write(benchmark::State& state, const WriteShape& shape, kvcanary::CanaryAlgorithm algorithm, Launch launch) {
  run_checked(state, [&] {
    const std::shared_ptr<const WriteCase> c = write_case(shape);
    Instance<ExecutionSpace> instance;  // outlives every View allocated on it
    const WriteCall<ExecutionSpace> call(instance.space(), *c, algorithm);

    call.run();  // eager, before any capture; checked
    call.expect_result(*c, 1, "eager call");
    const CallTotals totals = time_calls(state, instance, launch, [&] { call.run(); }, [&](auto replay) {
      replay();
      call.expect_result(*c, 1 + kCudaGraphCalls, "graph replay");
    });

    const std::int64_t bytes = c->bytes();
    const Floor& floor = measured_floor();
    const double chain_us = 1e-3 * floor.chain_ns_per_token * static_cast<double>(shape.tokens_per_request);
    set_time_counters(state, totals, bytes, std::max(floor.floor_us(bytes), chain_us), shape.regime);
    if (totals.calls <= 0) return;
    state.counters["copy_floor_us"] = floor.floor_us(bytes);
    state.counters["chain_floor_us"] = chain_us;
    state.counters["tokens"] = static_cast<double>(c->num_tokens());
    state.counters["longest_request"] = static_cast<double>(shape.tokens_per_request);
    state.counters["batch_size"] = static_cast<double>(shape.requests);
    state.counters["ns_per_token_of_longest"] = 1e3 * totals.us_per_call() / static_cast<double>(shape.tokens_per_request);
  });
}

template <class ExecutionSpace>
void register_write_benchmarks(const std::string& backend) {
  for (const Regime regime : {Regime::Latency, Regime::Chain})
    for (const WriteShape& shape : write_shapes())
      if (shape.regime == regime)
        for (const auto& algorithm : canary_algorithms<ExecutionSpace>(true))
          for (const auto& launch : launches<ExecutionSpace>(backend)) {
            const kvcanary::CanaryAlgorithm path = algorithm.second;
            const Launch mode = launch.first;
            register_timed("write/" + shape.name + algorithm.first + "/" + launch.second,
                           [shape, path, mode](benchmark::State& state) {
                             bench_write<ExecutionSpace>(state, shape, path, mode);
                           });
          }
}

}  // namespace kvcanary_perf

#endif
