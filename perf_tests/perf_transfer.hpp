#ifndef KVCANARY_PERF_TRANSFER_HPP
#define KVCANARY_PERF_TRANSFER_HPP

// The benchmarks of the stages that move records (SPEC-CANARY §12):
//   transfer/export/<n>_slots/<launch>     export_records() of n distinct slots of a 1M-slot buffer
//   transfer/import/<n>_slots/<launch>     import_records() of n records to n distinct slots
//   transfer/relocate/<n>_slots/<launch>   relocate() of n slots to n other slots (through staging)
// (n = 64, 4096, 262144). Checked once before timing and after a graph's first replay (SkipWithError
// otherwise): the packed records or the buffer equal kvcanary::reference's, the counters moved by n.
// Floor: max(bytes / copy bandwidth, one launch); per slot 8 bytes read (the index) + 32 read + 32 written
// (relocate: twice that, its two halves, plus the second index list).

#include "perf_support.hpp"  // before canary_workloads.hpp, which uses it
#include "canary_workloads.hpp"
#include "perf_timing.hpp"

#include <kvcanary/kvcanary.hpp>
#include <kvcanary/tools/host_bridge_transfer.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <string>

namespace kvcanary_perf {

enum class TransferStage { Export, Import, Relocate };

inline const char* transfer_stage_name(TransferStage stage) {
  return stage == TransferStage::Export ? "export" : stage == TransferStage::Import ? "import" : "relocate";
}

template <class ExecutionSpace>
void bench_transfer(benchmark::State& state, TransferStage stage, std::int64_t n, Launch launch) {
  run_checked(state, [&] {
    using MemorySpace = typename ExecutionSpace::memory_space;
    constexpr std::int64_t kSlots = std::int64_t{1} << 20;
    Instance<ExecutionSpace> instance;
    const ExecutionSpace space = instance.space();
    std::mt19937_64 rng(static_cast<std::uint64_t>(n));
    canary::CanaryBuffer initial(static_cast<std::size_t>(kSlots));
    for (std::size_t s = 1; s < initial.size(); ++s)
      initial[s] = {static_cast<std::int64_t>(s % 151936), static_cast<std::int64_t>(s % 4096), static_cast<std::int64_t>(rng()), 0};
    // 2n distinct slots: the first n are the sources (export, relocate), the last n the destinations.
    std::vector<std::int64_t> order(static_cast<std::size_t>(kSlots - 1));
    std::iota(order.begin(), order.end(), 1);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<std::int64_t> first(order.begin(), order.begin() + n), second(order.begin() + n, order.begin() + 2 * n);
    canary::TransferRecords wire(static_cast<std::size_t>(n));
    for (auto& r : wire) r = {static_cast<std::int64_t>(rng() % 151936), static_cast<std::int64_t>(rng() % 4096), static_cast<std::int64_t>(rng()), 0};

    canary::CanaryBuffer expected = initial;
    canary::TransferRecords expected_records = wire;
    canary::ViolationRing reference_ring;
    reference_ring.capacity = 16;
    if (stage == TransferStage::Export) canary::export_records(first, initial, expected_records, kvcanary::KernelKind::HEAD_K_FULL, reference_ring);
    if (stage == TransferStage::Import) canary::import_records(second, wire, expected, kvcanary::KernelKind::HEAD_K_FULL, reference_ring);
    if (stage == TransferStage::Relocate)
      canary::relocate(first, second, expected, expected_records, kvcanary::KernelKind::HEAD_K_FULL, reference_ring);

    const auto buffer = kvcanary::upload_canary_buffer(space, initial);
    const auto records = kvcanary::upload_transfer_records(space, wire);
    const auto ring = kvcanary::allocate_violation_ring(space, 16);
    const auto src = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary_perf::src", first);
    const auto dst = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary_perf::dst", second);
    const auto run = [&] {
      if (stage == TransferStage::Export) kvcanary::export_records(space, src, buffer, records, ring);
      if (stage == TransferStage::Import) kvcanary::import_records(space, dst, records, buffer, ring);
      if (stage == TransferStage::Relocate) kvcanary::relocate(space, src, dst, buffer, records, ring);
    };
    const auto check = [&](std::int64_t calls, const std::string& when) {
      if (stage == TransferStage::Export)
        expect(kvcanary::download_transfer_records(space, records) == expected_records, when + ": the records differ from the reference's");
      else
        expect(kvcanary::download_canary_buffer(space, buffer) == expected, when + ": the buffer differs from the reference's");
      const canary::ViolationRing r = kvcanary::download_violation_ring(space, ring);
      expect(r.count == 0 && r.kernel_run_counter == calls && r.slot_run_counter == calls * n,
             when + ": counters " + std::to_string(r.kernel_run_counter) + " / " + std::to_string(r.slot_run_counter));
    };
    instance.space().fence();
    run();
    check(1, "eager call");
    const CallTotals totals = time_calls(state, instance, launch, run, [&](auto replay) {
      replay();
      check(1 + kCudaGraphCalls, "graph replay");
    });
    const std::int64_t bytes = stage == TransferStage::Relocate ? n * 144 : n * 72;
    set_time_counters(state, totals, bytes, measured_floor().floor_us(bytes), Regime::Bandwidth);
    if (totals.calls > 0) state.counters["slots"] = static_cast<double>(n);
  });
}

template <class ExecutionSpace>
void register_transfer_benchmarks(const std::string& backend) {
  for (const TransferStage stage : {TransferStage::Export, TransferStage::Import, TransferStage::Relocate})
    for (const std::int64_t n : {std::int64_t{64}, std::int64_t{4096}, std::int64_t{262144}})
      for (const auto& launch : launches<ExecutionSpace>(backend)) {
        const Launch mode = launch.first;
        register_timed(std::string("transfer/") + transfer_stage_name(stage) + "/" + std::to_string(n) + "_slots/" + launch.second,
                       [stage, n, mode](benchmark::State& state) { bench_transfer<ExecutionSpace>(state, stage, n, mode); });
      }
}

}  // namespace kvcanary_perf

#endif
