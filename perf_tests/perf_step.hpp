#ifndef KVCANARY_PERF_STEP_HPP
#define KVCANARY_PERF_STEP_HPP

// The whole canary step of a batch through kvcanary::Canary (docs/runtime.md):
//   step/<workload>/<launch>   Canary::before_forward() = plan + head verify of K and V (one call) + head
//                              write of K and V, on the SPEC §7 workloads without a window (the target group)
// The K and V buffers are the workload's prefixes stamped (canary_workloads.hpp), wrapped by the Canary; the
// step's tokens are each request's extend, at its page-table slots, with the expected-token pool's tokens.
// Checked before timing (SkipWithError otherwise): the eager step reports no violation through flush(), and
// leaves the K buffer equal to kvcanary::reference::write of the same step over the stamped records; a graph's
// first replay reports no violation either.
//
//   step_id/<workload>/<launch>   the same step with a request identity per row (CanaryConfig::
//                              request_identities, SPEC-CANARY §11.7): the plan's extra launch and the masks
//
//   step_fused/<workload>/<launch>   the same step with CanaryConfig::head_verify = HeadVerify::FromInputs
//                              (plan_and_verify(), SPEC-CANARY §5.1: the head verify computes its entries
//                              from the batch; the plan stores none); the same checks, and the same bytes
//                              counted as step/ (the SPEC §7 work of the step), so the two read side by side
//
//   step_kv_interleaved/<workload>/<launch>   the step/ step with the K and V records interleaved in one
//                              allocation (CanaryConfig::kv_records = KvRecords::Interleaved: a slot's K then
//                              its V, stride 64), so that a slot's two gathers and two stores share a 64-byte
//                              segment; the same checks and bytes counted as step/
//
//   step_after_plan/<workload>/<launch>   the step_kv_interleaved/ step with CanaryConfig::head_verify =
//                              HeadVerify::FromInputsAfterPlan: the plan's kernels make its offsets only, and a
//                              verify kernel of its own computes and checks the entries (verify[from_inputs]);
//                              the same checks and bytes counted as step/
//
//   step_derived_capacity/<workload>/<launch>   the step_kv_interleaved/ step with the verify capacity the Canary
//                              derives from the engine's dimensions (3 x pool slots, about 6 x the workload's
//                              entries) instead of the workload's exact total, as an engine that sets no capacity
//                              runs it; the same checks and bytes counted as step/ (6f6cb39 ran it on separate records)
//
//   step_pump/<workload>/<launch>   the same step followed by Canary::end_step() (the asynchronous report
//                              pump); time per step with the pump, and pump_us_per_step = that minus the same
//                              steps without end_step(), measured alternately in each iteration (on CUDA the
//                              loops are GPU-bound, bs 1 included: what the pump costs the stream)
//   step_pump_kernel/<workload>/<launch>   the same with PumpSnapshot::Kernel (one snapshot kernel on the
//                              engine's stream writing pinned host memory, one event) instead of the
//                              side-stream copies
//   step_pump_in_graph/<workload>/<launch>   the same with PumpSnapshot::InGraph: the snapshot is part of the
//                              step (captured in its graph; on CUDA in the last write's last block) and
//                              end_step() reads host memory only; its steps without the pump are a second
//                              Canary's on the copies route (no snapshot in its step), so pump_us_per_step is
//                              the in-step snapshot plus end_step()
//   step_pump_beside/<workload>/<launch>   the same with PumpSnapshot::BesideForward: the snapshot kernel on a
//                              branch forked after before_forward()'s passes, joined by after_forward()
//   step_pump_next_plan/<workload>/<launch>   the same with PumpSnapshot::WithNextPlan: the previous forward's
//                              snapshot in one extra block of the step's first head plan (CUDA; the snapshot
//                              kernel before the plan elsewhere), the head route Default's
//   step_pump_control(_with_model)?/<decode_bs1|decode_bs64>/graph   (CUDA) the copies route measured as the
//                              mailbox routes are, against a second Canary over the same memory:
//                              pump_step_us_without_end_step is then what the second Canary's own buffers alone
//                              move a step by (0 when the mailbox routes' column is the route's cost alone)
//   step_pump*_with_model/<workload>/graph   (CUDA) each route with a stand-in for the model's forward between
//                              before_forward() and after_forward() in the step, in both loops: a device copy
//                              of kModelStandInBytes (a decode forward streams the model's weights, 2.5 GB for a
//                              1B model in bf16), so that what the pump costs an engine's stream shows, the
//                              beside-forward branch overlapping that copy
// Side by side: original_step_us, the original system's same step (plan + 2 x verify + 2 x write, µs, H200
// graph replay, /work/shared/GPU-FLOORS.md "Re-measured side by side, 2026-12-04") where that table has the
// write of the workload, and speedup_vs_original = original_step_us / us_per_call.

#include "canary_workloads.hpp"
#include "perf_timing.hpp"
#include "perf_verify.hpp"  // kHostMaxCanarySlots

#include <kvcanary/kvcanary.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kvcanary_perf {

// GPU-FLOORS.md, 2026-12-04 table: the original's plan + 2 x verify (K) + 2 x write, µs.
inline const std::map<std::string, double>& original_step_us() {
  static const std::map<std::string, double> steps = {
      {"decode_bs1", 6.61 + 2 * 3.13 + 2 * 3.59},
      {"decode_bs64", 17.85 + 2 * 13.04 + 2 * 3.52},
      {"decode_bs256", 95.11 + 2 * 245.69 + 2 * 3.52},
      {"decode_bs4096", 57.04 + 2 * 28.78 + 2 * 6.17},
  };
  return steps;
}

// The stand-in for the model's forward of step_pump*_with_model/: one device copy of 32 MiB (16.5 µs at the
// H200's copy floor), far less than a real model's forward, so that the overlap it leaves the pump is a lower bound.
constexpr std::int64_t kModelStandInBytes = std::int64_t(32) << 20;

template <class ExecutionSpace>
struct ModelStandIn {
  using Memory = typename ExecutionSpace::memory_space;
  Kokkos::View<std::int64_t*, Memory> from, to;
  explicit ModelStandIn(const ExecutionSpace& space)
      : from(Kokkos::view_alloc(space, "kvcanary_perf::model_stand_in_from"), kModelStandInBytes / 8),
        to(Kokkos::view_alloc(space, "kvcanary_perf::model_stand_in_to"), kModelStandInBytes / 8) {}
  void run(const ExecutionSpace& space) const {
    Kokkos::parallel_for(
        "kvcanary_perf::model_stand_in",
        Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, kModelStandInBytes / 8),
        CopyFunctor{from.data(), to.data()});
  }
};

template <class ExecutionSpace>
struct StepCall {
  using Memory = typename ExecutionSpace::memory_space;
  ExecutionSpace space;
  kvcanary::PlanInputs<Memory> inputs;
  Kokkos::View<std::int64_t*, Memory> input_ids, positions, out_cache_loc;
  kvcanary::ForwardBatch<Memory> batch;
  std::unique_ptr<kvcanary::Canary<ExecutionSpace>> canary;
  canary::StepTokens tokens;                            // host copy, for the reference
  const ModelStandIn<ExecutionSpace>* model = nullptr;  // between the two passes when set

  // `same_memory`: a call whose inputs, tokens and target K and V records this one uses too (a second Canary
  // over the same memory, so that two routes compare with the same placement of what their kernels read).
  StepCall(const ExecutionSpace& space_, const VerifyCase& c,
           kvcanary::PumpSnapshot pump = kvcanary::PumpSnapshot::Default,
           kvcanary::HeadVerify head_verify = kvcanary::HeadVerify::Default,
           kvcanary::KvRecords records = kvcanary::KvRecords::Default, bool derived_capacity = false,
           const StepCall* same_memory = nullptr)
      : space(space_) {
    const Inputs& in = c.workload.inputs;
    inputs = same_memory ? same_memory->inputs : kvcanary::upload_inputs(space, in);
    for (std::size_t r = 0; r < in.req_pool_indices.size(); ++r) {
      const std::int64_t rp = in.req_pool_indices[r];
      for (std::int64_t j = 0; j < in.extend_seq_lens[r]; ++j) {
        const std::int64_t p = in.prefix_lens[r] + j;
        const auto cell = static_cast<std::size_t>(rp * in.max_seq_len + p);
        tokens.input_ids.push_back(in.req_to_verify_expected_tokens ? (*in.req_to_verify_expected_tokens)[cell]
                                                                    : (p * 7919 + rp) % 151936);
        tokens.positions.push_back(p);
        tokens.out_cache_loc.push_back(in.req_to_token[cell]);
      }
    }
    tokens.chain_position_assert = 1;
    if (same_memory) {
      input_ids = same_memory->input_ids;
      positions = same_memory->positions;
      out_cache_loc = same_memory->out_cache_loc;
    } else {
      input_ids = kvcanary::Impl::upload<std::int64_t, Memory>(space, "kvcanary_perf::input_ids", tokens.input_ids);
      positions = kvcanary::Impl::upload<std::int64_t, Memory>(space, "kvcanary_perf::positions", tokens.positions);
      out_cache_loc =
          kvcanary::Impl::upload<std::int64_t, Memory>(space, "kvcanary_perf::out_cache_loc", tokens.out_cache_loc);
    }

    kvcanary::CanaryConfig config;
    config.report_mode = kvcanary::ReportMode::None;
    config.health_check_every_n_steps = 0;
    config.pump_snapshot = pump;
    config.head_verify = head_verify;
    config.verify_token_assert = in.req_to_verify_expected_tokens.has_value();
    config.request_identities = in.req_identities.has_value();
    config.dimensions.pool_slots = num_canary_slots(in);
    config.dimensions.max_running_requests = in.max_reqs;
    config.dimensions.max_context_len = in.max_seq_len;
    if (!derived_capacity) config.capacities.verify_capacity = c.workload.verify_capacity;
    config.capacities.write_req_capacity = c.workload.write_req_capacity;
    kvcanary::EngineTables<Memory> tables;
    tables.req_to_token = inputs.req_to_token;
    if (config.verify_token_assert) tables.expected_tokens = *inputs.req_to_verify_expected_tokens;
    if (same_memory) {
      config.kv_records = records;
      tables.target.k = same_memory->canary->k_buffer(kvcanary::GroupKind::Target);
      tables.target.v = same_memory->canary->v_buffer(kvcanary::GroupKind::Target);
    } else {
      tables.target.k = kvcanary::upload_canary_buffer(space, c.stamped);
      tables.target.v = kvcanary::upload_canary_buffer(space, c.stamped);
    }
    if (records == kvcanary::KvRecords::Interleaved && !same_memory) {
      // The layout the Canary gives the records it owns with KvRecords::Interleaved (a slot's K, then its V;
      // stride 64), holding the workload's stamped records.
      config.kv_records = records;
      const auto kv = kvcanary::Impl::allocate_interleaved_kv_buffers(
          space, static_cast<std::int64_t>(c.stamped.size()), "kvcanary_perf::kv_canary");
      Kokkos::deep_copy(space, kv[0].records, tables.target.k->records);
      Kokkos::deep_copy(space, kv[1].records, tables.target.v->records);
      tables.target.k = kv[0];
      tables.target.v = kv[1];
    }
    canary = std::make_unique<kvcanary::Canary<ExecutionSpace>>(space, config, tables);

    batch.req_pool_indices = inputs.req_pool_indices;
    batch.prefix_lens = inputs.prefix_lens;
    batch.extend_seq_lens = inputs.extend_seq_lens;
    if (config.verify_token_assert) batch.expected_tokens_valid_lens = *inputs.req_to_verify_expected_tokens_valid_lens;
    if (config.request_identities) batch.identities = *inputs.req_identities;
    batch.tokens = kvcanary::ForwardTokens<Memory>{input_ids, positions, out_cache_loc, std::nullopt, std::nullopt};
    space.fence();
  }

  // before_forward(), the model's forward (a stand-in, when set), after_forward(): nothing without a tail pass,
  // but the join of PumpSnapshot::BesideForward's branch.
  void run() const {
    canary->before_forward(batch);
    if (model != nullptr) model->run(space);
    canary->after_forward(batch);
  }
};

inline void expect_clean_step(const kvcanary::RuntimeReport& report, const std::string& when) {
  expect(report.violations.count == 0 && report.violations.rows.empty(),
         when + ": " + std::to_string(report.violations.count) + " violations" +
             (report.violations.lines.empty() ? "" : "; first: " + report.violations.lines.front()));
  expect(report.warnings.empty(), when + ": " + (report.warnings.empty() ? "" : report.warnings.front()));
}

template <class ExecutionSpace>
void bench_step(benchmark::State& state, const WorkloadShape& shape, bool identities, Launch launch,
                kvcanary::HeadVerify head_verify = kvcanary::HeadVerify::Default,
                kvcanary::KvRecords records = kvcanary::KvRecords::Default, bool derived_capacity = false) {
  run_checked(state, [&] {
    const std::shared_ptr<VerifyCase> c = verify_case(shape, identities);
    Instance<ExecutionSpace> instance;
    // The step's passes alone: the copies route takes its snapshot in end_step(), which these loops do not call
    // (CUDA's Default, the next plan, takes it in the head plan; its cost is step_pump_next_plan's row).
    StepCall<ExecutionSpace> call(instance.space(), *c, kvcanary::PumpSnapshot::SideStreamCopies, head_verify, records,
                                  derived_capacity);

    call.run();  // eager, checked
    expect_clean_step(call.canary->flush(), "eager step");
    {
      const canary::Outputs plan = reference_plan(c->workload, 0);
      canary::CanaryBuffer expected = c->stamped;
      canary::ViolationRing ring;
      ring.capacity = 16;
      canary::write(plan, call.tokens, kvcanary::KernelKind::HEAD_K_FULL, {}, expected, ring);
      expect(ring.count == 0, "reference::write of the step reports a violation");
      expect(kvcanary::download_canary_buffer(call.space, call.canary->k_buffer(kvcanary::GroupKind::Target)) == expected,
             "the K buffer after the step differs from kvcanary::reference::write");
    }
    const CallTotals totals = time_calls(state, instance, launch, [&] { call.run(); }, [&](auto replay) {
      replay();
      expect_clean_step(call.canary->flush(), "graph replay");
    });
    set_time_counters(state, totals, c->bytes(2), measured_floor().floor_us(c->bytes(2)), c->workload.regime);
    if (totals.calls <= 0) return;
    const auto original = original_step_us().find(shape.name);
    if (original != original_step_us().end() && is_cuda<ExecutionSpace>()) {
      state.counters["original_step_us"] = original->second;
      state.counters["speedup_vs_original"] = original->second / totals.us_per_call();
    }
    state.counters["batch_size"] = static_cast<double>(c->workload.inputs.req_pool_indices.size());
    state.counters["tokens"] = static_cast<double>(call.tokens.input_ids.size());
  });
}

template <class ExecutionSpace>
void bench_step_pump(benchmark::State& state, const WorkloadShape& shape, Launch launch, kvcanary::PumpSnapshot route,
                     bool with_model, bool control = false) {
  run_checked(state, [&] {
    constexpr int kSteps = 50;
    const std::shared_ptr<VerifyCase> c = verify_case(shape);
    Instance<ExecutionSpace> instance;
    std::optional<ModelStandIn<ExecutionSpace>> model;
    if (with_model) model.emplace(instance.space());
    StepCall<ExecutionSpace> call(instance.space(), *c, route);
    call.model = model ? &*model : nullptr;
    call.run();
    expect_clean_step(call.canary->flush(), "eager step");
    std::unique_ptr<StepCall<ExecutionSpace>> bare_call;
    if (control || route == kvcanary::PumpSnapshot::InGraph || route == kvcanary::PumpSnapshot::BesideForward ||
        route == kvcanary::PumpSnapshot::WithNextPlan) {
      // The same memory as the pump's call: the steps differ by the route alone, not by where their data lie.
      bare_call = std::make_unique<StepCall<ExecutionSpace>>(
          instance.space(), *c, kvcanary::PumpSnapshot::SideStreamCopies, kvcanary::HeadVerify::Default,
          kvcanary::KvRecords::Default, false, &call);
      bare_call->model = call.model;
      bare_call->run();
      expect_clean_step(bare_call->canary->flush(), "eager step without the pump");
    }
    const StepCall<ExecutionSpace>& bare = bare_call ? *bare_call : call;
    std::function<void()> step = [&] { call.run(); };
    std::function<void()> bare_step = [&] { bare.run(); };
#ifdef KOKKOS_ENABLE_CUDA
    CudaGraph graph, bare_graph;  // one step per replay, as an engine replays its forward
    if constexpr (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) {
      if (launch == Launch::Graph) {
        graph.capture(instance.cuda_stream(), [&] { call.run(); });
        step = [&] { graph.launch(instance.cuda_stream()); };
        if (bare_call) {
          bare_graph.capture(instance.cuda_stream(), [&] { bare.run(); });
          bare_step = [&] { bare_graph.launch(instance.cuda_stream()); };
        } else {
          bare_step = step;
        }
      }
    }
#endif
    (void)launch;
    const auto space = instance.space();
    const auto expect_quiet = [](const kvcanary::RuntimeReport& report) {
      if (!report.violations.rows.empty() || !report.health_errors.empty())
        throw CheckFailure("the pump reported a violation");
    };
    double with_pump = 0, without = 0, unpumped = 0, in_steps = 0, in_end_step = 0;
    std::int64_t steps = 0;
    for (auto _ : state) {
      space.fence();
      auto start = Clock::now();
      for (int k = 0; k < kSteps; ++k) bare_step();
      space.fence();
      const double bare_seconds = seconds_since(start);
      if (bare_call) {  // the pump's Canary without end_step(): what its step costs the device alone
        start = Clock::now();
        for (int k = 0; k < kSteps; ++k) step();
        space.fence();
        unpumped += seconds_since(start);
        expect_quiet(call.canary->end_step(kSteps));  // one step of kSteps forwards
      }
      start = Clock::now();
      for (int k = 0; k < kSteps; ++k) {
        const auto in_step = Clock::now();
        step();
        in_steps += seconds_since(in_step);
        const auto in_call = Clock::now();
        const kvcanary::RuntimeReport report = call.canary->end_step();
        in_end_step += seconds_since(in_call);
        expect_quiet(report);
      }
      space.fence();
      const double pumped = seconds_since(start);
      state.SetIterationTime(pumped / kSteps);
      with_pump += pumped;
      without += bare_seconds;
      steps += kSteps;
    }
    expect_clean_step(call.canary->flush(), "after the timed steps");
    if (steps == 0) return;
    state.counters["us_per_step"] = 1e6 * with_pump / static_cast<double>(steps);
    state.counters["us_per_step_without_pump"] = 1e6 * without / static_cast<double>(steps);
    state.counters["pump_us_per_step"] = 1e6 * (with_pump - without) / static_cast<double>(steps);
    // Its parts: the host's time in the step's calls (a replay, or the passes' launches) and inside end_step()
    // (their sum near us_per_step: a host-bound loop), and (mailbox routes) the pump's steps without end_step().
    state.counters["step_host_us"] = 1e6 * in_steps / static_cast<double>(steps);
    state.counters["end_step_host_us"] = 1e6 * in_end_step / static_cast<double>(steps);
    if (bare_call)
      state.counters["pump_step_us_without_end_step"] = 1e6 * (unpumped - without) / static_cast<double>(steps);
    state.SetLabel(regime_name(c->workload.regime));
  });
}

template <class ExecutionSpace>
void register_step_benchmarks(const std::string& backend) {
  for (const WorkloadShape& shape : shapes_by_regime()) {
    if (shape.swa_window_size > 0) continue;  // the target group has no window (an SWA model runs both)
    const std::int64_t cells = (shape.batch_size + 1) * (shape.prefix_max + shape.extend_max);
    if (!is_cuda<ExecutionSpace>() && cells > kHostMaxCanarySlots && !host_large_workloads()) continue;
    for (const auto& launch : launches<ExecutionSpace>(backend)) {
      const Launch mode = launch.first;
      register_timed("step/" + shape.name + "/" + launch.second,
                     [shape, mode](benchmark::State& state) { bench_step<ExecutionSpace>(state, shape, false, mode); });
      register_timed("step_id/" + shape.name + "/" + launch.second,
                     [shape, mode](benchmark::State& state) { bench_step<ExecutionSpace>(state, shape, true, mode); });
      register_timed("step_fused/" + shape.name + "/" + launch.second, [shape, mode](benchmark::State& state) {
        bench_step<ExecutionSpace>(state, shape, false, mode, kvcanary::HeadVerify::FromInputs);
      });
      register_timed("step_kv_interleaved/" + shape.name + "/" + launch.second, [shape, mode](benchmark::State& state) {
        bench_step<ExecutionSpace>(state, shape, false, mode, kvcanary::HeadVerify::Default,
                                   kvcanary::KvRecords::Interleaved);
      });
      register_timed("step_after_plan/" + shape.name + "/" + launch.second, [shape, mode](benchmark::State& state) {
        bench_step<ExecutionSpace>(state, shape, false, mode, kvcanary::HeadVerify::FromInputsAfterPlan,
                                   kvcanary::KvRecords::Interleaved);
      });
      register_timed("step_derived_capacity/" + shape.name + "/" + launch.second,
                     [shape, mode](benchmark::State& state) {
                       bench_step<ExecutionSpace>(state, shape, false, mode, kvcanary::HeadVerify::Default,
                                                  kvcanary::KvRecords::Interleaved, true);
                     });
      // bs 1, 64 and 256 (CUDA only, by its size): on CUDA GPU-bound loops (the host ahead; step_host_us says
      // so), so the difference is what the pump costs the engine's stream. long_context_bs4 (4 rows, 524K
      // entries: the one checking launch with the next plan's rider) on the default routes only.
      const bool long_context = shape.name == "long_context_bs4";
      if (shape.name == "decode_bs1" || shape.name == "decode_bs64" || shape.name == "decode_bs256" || long_context)
        for (const auto& route : {std::make_pair(kvcanary::PumpSnapshot::SideStreamCopies, "step_pump"),
                                  std::make_pair(kvcanary::PumpSnapshot::Kernel, "step_pump_kernel"),
                                  std::make_pair(kvcanary::PumpSnapshot::InGraph, "step_pump_in_graph"),
                                  std::make_pair(kvcanary::PumpSnapshot::BesideForward, "step_pump_beside"),
                                  std::make_pair(kvcanary::PumpSnapshot::WithNextPlan, "step_pump_next_plan")})
          for (const bool with_model : {false, true}) {
            if (with_model && (!is_cuda<ExecutionSpace>() || mode != Launch::Graph)) continue;
            if (long_context && route.first != kvcanary::PumpSnapshot::SideStreamCopies &&
                route.first != kvcanary::PumpSnapshot::WithNextPlan)
              continue;
            const std::string family = std::string(route.second) + (with_model ? "_with_model/" : "/");
            register_timed(family + shape.name + "/" + launch.second,
                           [shape, mode, route, with_model](benchmark::State& state) {
                             bench_step_pump<ExecutionSpace>(state, shape, mode, route.first, with_model);
                           });
          }
      // The control of the mailbox routes' pump_step_us_without_end_step: both Canaries on the copies route, so
      // that it measures what the second Canary's own memory (its counters, rings, plan arrays) moves the steps by.
      if (is_cuda<ExecutionSpace>() && mode == Launch::Graph &&
          (shape.name == "decode_bs1" || shape.name == "decode_bs64"))
        for (const bool with_model : {false, true})
          register_timed(
              std::string("step_pump_control") + (with_model ? "_with_model/" : "/") + shape.name + "/" + launch.second,
              [shape, mode, with_model](benchmark::State& state) {
                bench_step_pump<ExecutionSpace>(state, shape, mode, kvcanary::PumpSnapshot::SideStreamCopies,
                                                with_model, true);
              });
    }
  }
}

}  // namespace kvcanary_perf

#endif
