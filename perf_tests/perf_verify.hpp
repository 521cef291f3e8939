#ifndef KVCANARY_PERF_VERIFY_HPP
#define KVCANARY_PERF_VERIFY_HPP

// The verify benchmarks (SPEC-CANARY §5) on the SPEC §7 workloads' plans, with distinct slots
// (canary_workloads.hpp), over a buffer stamped so that the plan verifies clean:
//   verify/<workload>/<launch>     one canary buffer (the K half)
//   verify_kv/<workload>/<launch>  one call over the K and V buffers sharing the plan (a VerifyTarget vector)
//   verify_kv_v1/<workload>/<launch>  the same with SPEC-CANARY §11's checks off (VerifyChecks::v1()): the
//                                     others run the defaults, so the pair gives the checks' hot-path cost
//   verify_kv_id/<workload>/<launch>  verify_kv with a request identity per row (SPEC-CANARY §11.7; the
//                                     plan's verify_identities, prefixes stamped with them): the identity's cost
// Checked once before timing (SkipWithError otherwise): the eager call reports no violation and moves the
// counters by the entries; a graph's first replay too; and one corrupted record (the position of the middle
// entry's slot, in the last buffer) gives exactly the rows of kvcanary::reference::verify, at least one.
//
// Floor (GPU-FLOORS.md): max(bytes / copy bandwidth, the gather floor, one launch), where the gather floor
// is a bare kernel with verify's traffic (the four plan arrays streamed, each buffer's 32-byte record
// gathered at the entry's slot) timed on the benchmark's own data in the same run. Page-size-1 random
// slots are bound by the gather rate, not the copy rate.

#include "canary_workloads.hpp"
#include "perf_timing.hpp"

#include <kvcanary/kvcanary.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvcanary_perf {

// The bare traffic of a verify pass, folded into a checksum that reaches memory only on an impossible
// value (so no load is optimized away): /work/shared/tools/gather_floor.cu's kernel, in portable Kokkos.
struct GatherFunctor {
  const std::int64_t *slots, *positions, *prevs, *tokens;
  const std::int64_t* records[kvcanary::kMaxVerifyTargets];
  std::int64_t record_stride;  // int64 from one record to the next
  int targets;
  std::int64_t* sink;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const std::int64_t s = slots[i];
    std::int64_t acc = s ^ positions[i] ^ prevs[i] ^ tokens[i];
    for (int t = 0; t < targets; ++t) {
      const std::int64_t* r = records[t] + s * record_stride;
      acc ^= r[0] ^ r[1] ^ r[2] ^ r[3];
    }
    if (acc == 0x7FFFFFFFFFFFFFFFLL) Kokkos::atomic_add(sink, std::int64_t(1));
  }
};

// The device data of one verify call over 1 or 2 stamped buffers, uploaded once on `space`.
template <class ExecutionSpace>
struct VerifyCall {
  using MemorySpace = typename ExecutionSpace::memory_space;

  ExecutionSpace space;
  kvcanary::VerifyPlan<MemorySpace> plan;
  std::vector<kvcanary::VerifyTarget<MemorySpace>> targets;
  kvcanary::ViolationRing<MemorySpace> ring;
  kvcanary::VerifyOptions options{true, kvcanary::CanaryAlgorithm::Portable};
  Kokkos::View<std::int64_t, MemorySpace> sink;

  VerifyCall(const ExecutionSpace& space_, const VerifyCase& c, int num_targets, kvcanary::CanaryAlgorithm algorithm,
             kvcanary::VerifyChecks checks = kvcanary::VerifyChecks{})
      : space(space_) {
    options.checks = checks;
    using kvcanary::KernelKind;
    const bool swa = c.workload.inputs.swa_window_size > 0;
    const KernelKind kinds[2] = {swa ? KernelKind::HEAD_K_SWA : KernelKind::HEAD_K_FULL,
                                 swa ? KernelKind::HEAD_V_SWA : KernelKind::HEAD_V_FULL};
    plan = kvcanary::upload_verify_plan(space, c.plan);
    for (int t = 0; t < num_targets; ++t)
      targets.push_back({kvcanary::upload_canary_buffer(space, c.stamped), kinds[t], {}});
    ring = kvcanary::allocate_violation_ring(space, 1024);
    options.algorithm = algorithm;
    sink = Kokkos::View<std::int64_t, MemorySpace>(Kokkos::view_alloc(space, "kvcanary_perf::gather_sink"));
    space.fence();
  }

  void run() const { kvcanary::verify(space, plan, targets, ring, options); }

  void gather() const {
    GatherFunctor functor{plan.verify_slot_indices.data(), plan.verify_expected_positions.data(),
                          plan.verify_prev_slot_indices.data(), plan.verify_expected_tokens.data(), {},
                          static_cast<std::int64_t>(targets[0].buffer.records.stride(0)),
                          static_cast<int>(targets.size()), sink.data()};
    for (std::size_t t = 0; t < targets.size(); ++t) functor.records[t] = targets[t].buffer.records.data();
    Kokkos::parallel_for("kvcanary_perf::gather_floor",
                         Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, plan.capacity()),
                         functor);
  }
};

// A ring that only clean calls touched: no row, and the counters at what those calls move them to.
inline void expect_clean_ring(const canary::ViolationRing& ring, std::int64_t kernel_runs, std::int64_t slot_runs,
                              const std::string& when) {
  expect(ring.count == 0, when + ": " + std::to_string(ring.count) + " violations on a clean buffer" + first_row(ring));
  expect(ring.kernel_run_counter == kernel_runs, when + ": kernel_run_counter " +
                                                     std::to_string(ring.kernel_run_counter) + ", want " +
                                                     std::to_string(kernel_runs));
  expect(ring.slot_run_counter == slot_runs, when + ": slot_run_counter " + std::to_string(ring.slot_run_counter) +
                                                 ", want " + std::to_string(slot_runs));
}

struct StoreFunctor {
  std::int64_t* target;
  std::int64_t value;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const { *target = value; }
};

// One record corrupted on the device and in the host copy: the call's rows must be reference::verify's.
template <class ExecutionSpace>
void expect_corruption_detected(const VerifyCall<ExecutionSpace>& call, VerifyCase& c) {
  const std::int64_t slot = c.plan.verify_slot_indices[static_cast<std::size_t>(c.workload.entries / 2)];
  const auto& target = call.targets.back();
  canary::Record& record = c.stamped[static_cast<std::size_t>(slot)];
  const std::int64_t clean = record.position;
  canary::ViolationRing expected;
  expected.capacity = 64;
  record.position = clean + 1;
  try {
    canary::verify(c.plan, c.stamped, target.kernel_kind, {}, call.options.check_expected_token, expected);
  } catch (...) {
    record.position = clean;
    throw;
  }
  record.position = clean;

  const auto& records = target.buffer.records;
  std::int64_t* field = records.data() + slot * records.stride(0) + kvcanary::kPosition * records.stride(1);
  const auto store = [&](std::int64_t value) {
    Kokkos::parallel_for("kvcanary_perf::corrupt",
                         Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(call.space, 0, 1),
                         StoreFunctor{field, value});
  };
  store(clean + 1);
  const auto ring = kvcanary::allocate_violation_ring(call.space, expected.capacity);
  kvcanary::verify(call.space, call.plan, call.targets, ring, call.options);
  canary::ViolationRing got = kvcanary::download_violation_ring(call.space, ring);  // fences
  store(clean);
  call.space.fence();

  std::sort(got.rows.begin(), got.rows.end());
  std::sort(expected.rows.begin(), expected.rows.end());
  const std::string where = "slot " + std::to_string(slot) + " corrupted: ";
  expect(expected.count >= 1, where + "kvcanary::reference::verify reports nothing");
  expect(got.count == expected.count, where + std::to_string(got.count) + " violations, reference::verify " +
                                          std::to_string(expected.count));
  expect(got.rows == expected.rows, where + "rows differ from kvcanary::reference::verify" + first_row(got));
}

// The gather floor of (workload, targets), measured once per run on the first benchmark's data.
template <class ExecutionSpace>
double gather_floor_us(const Instance<ExecutionSpace>& instance, const VerifyCall<ExecutionSpace>& call,
                       const std::string& workload) {
  static std::map<std::string, double> measured;
  const std::string key = workload + "/" + std::to_string(call.targets.size());
  auto found = measured.find(key);
  if (found == measured.end()) found = measured.emplace(key, floor_call_us(instance, [&] { call.gather(); })).first;
  return found->second;
}

template <class ExecutionSpace>
void bench_verify(benchmark::State& state, const WorkloadShape& shape, int num_targets, kvcanary::VerifyChecks checks,
                  bool identities, kvcanary::CanaryAlgorithm algorithm, Launch launch) {
  run_checked(state, [&] {
    const std::shared_ptr<VerifyCase> c = verify_case(shape, identities);
    const Workload& workload = c->workload;
    Instance<ExecutionSpace> instance;  // outlives every View allocated on it
    const VerifyCall<ExecutionSpace> call(instance.space(), *c, num_targets, algorithm, checks);
    const std::int64_t slots_per_call = workload.entries * num_targets;

    call.run();  // eager, before any capture; checked
    expect_clean_ring(kvcanary::download_violation_ring(call.space, call.ring), num_targets, slots_per_call, "eager call");
    expect_corruption_detected(call, *c);
    const double gather_us = gather_floor_us(instance, call, workload.name);

    const CallTotals totals = time_calls(state, instance, launch, [&] { call.run(); }, [&](auto replay) {
      replay();
      expect_clean_ring(kvcanary::download_violation_ring(call.space, call.ring), (1 + kCudaGraphCalls) * num_targets,
                        (1 + kCudaGraphCalls) * slots_per_call, "graph replay");
    });

    const std::int64_t bytes = c->bytes(num_targets);
    const Floor& floor = measured_floor();
    set_time_counters(state, totals, bytes, std::max(floor.floor_us(bytes), gather_us), workload.regime);
    if (totals.calls <= 0) return;
    state.counters["copy_floor_us"] = floor.floor_us(bytes);
    state.counters["gather_floor_us"] = gather_us;
    state.counters["entries"] = static_cast<double>(workload.entries);
    state.counters["entries_per_s"] = static_cast<double>(workload.entries) / (totals.us_per_call() * 1e-6);
    state.counters["buffers"] = num_targets;
    state.counters["batch_size"] = static_cast<double>(workload.inputs.req_pool_indices.size());
  });
}

// On the host a verify call over a canary buffer above 128 MB takes a few hundred ms (page-size-1
// random records miss every cache and TLB); decode_bs256 (8.4M slots) is timed on CUDA only, so that the
// host run of the canary benchmarks stays within a couple of minutes, unless KVCANARY_PERF_HOST_LARGE=1
// (the host target of ≥ 1M entries: OpenMP against Serial on decode_bs256's 4.8M).
constexpr std::int64_t kHostMaxCanarySlots = std::int64_t{4} << 20;
inline bool host_large_workloads() {
  const char* on = std::getenv("KVCANARY_PERF_HOST_LARGE");
  return on != nullptr && std::string(on) == "1";
}

template <class ExecutionSpace>
void register_verify_benchmarks(const std::string& backend) {
  for (const WorkloadShape& shape : shapes_by_regime()) {
    const std::int64_t cells = (shape.batch_size + 1) * (shape.prefix_max + shape.extend_max);  // workloads.hpp
    if (!is_cuda<ExecutionSpace>() && cells > kHostMaxCanarySlots && !host_large_workloads()) continue;
    // verify_kv_v1: the K and V call with SPEC-CANARY §11's checks off, the baseline of their hot-path cost;
    // verify_kv_id: with request identities (§11.7), against verify_kv. Identities last: one rebuild per shape.
    for (const int variant : {1, 2, 3, 4})
      for (const auto& algorithm : canary_algorithms<ExecutionSpace>(false))
        for (const auto& launch : launches<ExecutionSpace>(backend)) {
          const int targets = variant == 1 ? 1 : 2;
          const char* const stages[] = {"verify/", "verify_kv/", "verify_kv_v1/", "verify_kv_id/"};
          const kvcanary::VerifyChecks checks = variant == 3 ? kvcanary::VerifyChecks::v1() : kvcanary::VerifyChecks{};
          const bool identities = variant == 4;
          const kvcanary::CanaryAlgorithm path = algorithm.second;
          const Launch mode = launch.first;
          register_timed(stages[variant - 1] + shape.name + algorithm.first + "/" + launch.second,
                         [shape, targets, checks, identities, path, mode](benchmark::State& state) {
                           bench_verify<ExecutionSpace>(state, shape, targets, checks, identities, path, mode);
                         });
        }
  }
}

}  // namespace kvcanary_perf

#endif
