#ifndef KVCANARY_PERF_WRITE_HPP
#define KVCANARY_PERF_WRITE_HPP

// The write benchmarks (SPEC-CANARY §4): write/<case>/<launch> (the K buffer) and write_kv/<case>/<launch>
// (K and V in one multi-buffer call) for decode (1 token for each of 1, 64,
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
#include "perf_write_mail.hpp"

#include <kvcanary/kvcanary.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kvcanary_perf {

// One write call of a case into one buffer (K), or into two in one call (K and V: the multi-buffer
// write(), one chain walk for both).
template <class ExecutionSpace>
struct WriteCall {
  using MemorySpace = typename ExecutionSpace::memory_space;

  ExecutionSpace space;
  kvcanary::WritePlan<MemorySpace> plan;
  kvcanary::StepTokens<MemorySpace> tokens;
  std::vector<kvcanary::WriteTarget<MemorySpace>> targets;
  kvcanary::ViolationRing<MemorySpace> ring;
  kvcanary::CanaryAlgorithm algorithm;

  WriteCall(const ExecutionSpace& space_, const WriteCase& c, kvcanary::CanaryAlgorithm algorithm_, int buffers)
      : space(space_),
        plan(kvcanary::upload_write_plan(space_, c.plan)),
        tokens(kvcanary::upload_step_tokens(space_, c.tokens)),
        ring(kvcanary::allocate_violation_ring(space_, c.expected_ring.capacity)),
        algorithm(algorithm_) {
    for (int b = 0; b < buffers; ++b)
      targets.push_back({kvcanary::upload_canary_buffer(space_, c.initial),
                         b == 0 ? kvcanary::KernelKind::HEAD_K_FULL : kvcanary::KernelKind::HEAD_V_FULL, {}});
    space.fence();
  }

  bool plain_multiply = false;  // the CUDA kernel with the chain's multiply as plain C++ (the earlier walk)
#ifdef KOKKOS_ENABLE_CUDA
  std::unique_ptr<MailTargets> mail;  // the CUDA kernel with a part of the in-graph snapshot folded in
#endif

  void run() const {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
      if (mail) {
        mail->write(space, plan, tokens, targets, ring);
        return;
      }
      if (plain_multiply) {
        kvcanary::Impl::with_write_functor<ExecutionSpace>(plan, tokens, targets, ring, [&](const auto& functor) {
          using Functor = std::remove_cv_t<std::remove_reference_t<decltype(functor)>>;
          using Backend = kvcanary::Impl::WriteBackend<Kokkos::Cuda>;
          if (!Backend::template write<Functor, kvcanary::Impl::CudaWrite::PlainMultiply>(space, functor))
            throw CheckFailure("the CUDA write kernel cannot run on this space");
        });
        return;
      }
    }
#endif
    if (targets.size() == 1)
      kvcanary::write(space, plan, tokens, targets[0].buffer, ring, {targets[0].kernel_kind, {}, algorithm});
    else
      kvcanary::write(space, plan, tokens, targets, ring, kvcanary::WriteCallOptions{algorithm});
  }

  // The buffers and ring after `calls` calls: the reference's records in every buffer, no row, the
  // counters moved (each buffer counts as one write call); with `mail`, its epilogue ran once a call.
  void expect_result(const WriteCase& c, std::int64_t calls, const std::string& when) const {
    for (std::size_t b = 0; b < targets.size(); ++b) {
      const canary::CanaryBuffer got = kvcanary::download_canary_buffer(space, targets[b].buffer);  // fences
      const auto m = std::mismatch(got.begin(), got.end(), c.expected.begin());
      expect(m.first == got.end(), when + ": buffer " + std::to_string(b) + ", record of slot " +
                                       std::to_string(m.first - got.begin()) + " differs from kvcanary::reference::write");
    }
    const canary::ViolationRing r = kvcanary::download_violation_ring(space, ring);
    const auto runs = calls * static_cast<std::int64_t>(targets.size());
    expect(r.count == 0, when + ": " + std::to_string(r.count) + " violations" + first_row(r));
    expect(r.kernel_run_counter == runs && r.slot_run_counter == runs * c.num_tokens(),
           when + ": counters " + std::to_string(r.kernel_run_counter) + " / " + std::to_string(r.slot_run_counter) +
               ", want " + std::to_string(runs) + " / " + std::to_string(runs * c.num_tokens()));
#ifdef KOKKOS_ENABLE_CUDA
    if (mail) mail->expect_ran(calls, when);
#endif
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

// `mail` (CUDA only): a part of the in-graph snapshot folded into the write (perf_write_mail.hpp).
template <class ExecutionSpace>
void bench_write(benchmark::State& state, const WriteShape& shape, kvcanary::CanaryAlgorithm algorithm, Launch launch,
                 int buffers, bool plain_multiply = false, std::optional<MailPart> mail = std::nullopt) {
  run_checked(state, [&] {
    const std::shared_ptr<const WriteCase> c = write_case(shape);
    Instance<ExecutionSpace> instance;  // outlives every View allocated on it
    WriteCall<ExecutionSpace> call(instance.space(), *c, algorithm, buffers);
    call.plain_multiply = plain_multiply;
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value)
      if (mail) call.mail = std::make_unique<MailTargets>(instance.space(), *mail, 64);
#endif
    (void)mail;

    call.run();  // eager, before any capture; checked
    call.expect_result(*c, 1, "eager call");
    const CallTotals totals = time_calls(state, instance, launch, [&] { call.run(); }, [&](auto replay) {
      replay();
      call.expect_result(*c, 1 + kCudaGraphCalls, "graph replay");
    });

    // Each further buffer: its records written (and its seeds read) once more.
    const std::int64_t bytes = c->bytes() + (buffers - 1) * c->buffer_bytes();
    const Floor& floor = measured_floor();
    const double chain_us = 1e-3 * floor.chain_ns_per_token * static_cast<double>(shape.tokens_per_request);
    set_time_counters(state, totals, bytes, std::max(floor.floor_us(bytes), chain_us), shape.regime);
    if (totals.calls <= 0) return;
    state.counters["copy_floor_us"] = floor.floor_us(bytes);
    state.counters["chain_floor_us"] = chain_us;
    state.counters["tokens"] = static_cast<double>(c->num_tokens());
    state.counters["longest_request"] = static_cast<double>(shape.tokens_per_request);
    state.counters["batch_size"] = static_cast<double>(shape.requests);
    state.counters["buffers"] = static_cast<double>(buffers);
    state.counters["ns_per_token_of_longest"] = 1e3 * totals.us_per_call() / static_cast<double>(shape.tokens_per_request);
  });
}

// write/<case>/<path>/<launch>: the K buffer alone; write_kv/...: the K and V buffers in one call.
template <class ExecutionSpace>
void register_write_benchmarks(const std::string& backend) {
  for (const int buffers : {1, 2})
    for (const Regime regime : {Regime::Latency, Regime::Chain})
      for (const WriteShape& shape : write_shapes())
        if (shape.regime == regime)
          for (const auto& algorithm : canary_algorithms<ExecutionSpace>(true))
            for (const auto& launch : launches<ExecutionSpace>(backend)) {
              const kvcanary::CanaryAlgorithm path = algorithm.second;
              const Launch mode = launch.first;
              register_timed(std::string(buffers == 1 ? "write/" : "write_kv/") + shape.name + algorithm.first + "/" +
                                 launch.second,
                             [shape, path, mode, buffers](benchmark::State& state) {
                               bench_write<ExecutionSpace>(state, shape, path, mode, buffers);
                             });
            }
  // The in-graph pump's snapshot in parts (perf_write_mail.hpp), decode batches, K and V in one call.
  if (is_cuda<ExecutionSpace>())
    for (const WriteShape& shape : write_shapes())
      if (shape.regime == Regime::Latency)
        for (const auto& part : mail_parts()) {
          const MailPart mail = part.first;
          const std::string name = "write_kv_mail/" + shape.name + "/" + part.second + "/graph";
          register_timed(name, [shape, mail](benchmark::State& state) {
            bench_write<ExecutionSpace>(state, shape, kvcanary::CanaryAlgorithm::Cuda, Launch::Graph, 2, false, mail);
          });
        }
  // The CUDA kernel with the earlier walk (the chain's multiply as plain C++), prefill chunks, K alone.
  if (is_cuda<ExecutionSpace>())
    for (const WriteShape& shape : write_shapes())
      if (shape.regime == Regime::Chain)
        register_timed("write/" + shape.name + "/cuda_plain_multiply/graph", [shape](benchmark::State& state) {
          bench_write<ExecutionSpace>(state, shape, kvcanary::CanaryAlgorithm::Cuda, Launch::Graph, 1, true);
        });
}

}  // namespace kvcanary_perf

#endif
