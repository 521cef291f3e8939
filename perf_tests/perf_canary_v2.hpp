#ifndef KVCANARY_PERF_CANARY_V2_HPP
#define KVCANARY_PERF_CANARY_V2_HPP

// The benchmarks of canary v2's own stages (SPEC-CANARY §11):
//   free/<n>_slots/<launch>         free() of n distinct slots (1, 64, 4096, 262144) in a 1M-slot buffer
//   cross_check/<case>/<launch>     cross_check() of correct metadata: decode_bs64 (CSR, page size 1,
//                                   prefixes 512-8K), decode_bs256_dense16 (block table of 16-token pages,
//                                   prefixes 4K-32K)
// Checked once before timing (SkipWithError otherwise): free's buffer equals kvcanary::reference::free's,
// the counters moved by the slots; the cross-check reports no row and counts every entry; a graph's first
// replay is checked the same way.
// Floor: max(bytes / copy bandwidth, one launch). free: 8 bytes read (the slot) and 16 written per slot;
// cross-check: 4 (req_to_token) + 4 (metadata) per entry compared, 40 per batch row.

#include "perf_support.hpp"  // before canary_workloads.hpp, which uses it
#include "canary_workloads.hpp"
#include "perf_timing.hpp"

#include <kvcanary/kvcanary.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

namespace kvcanary_perf {

constexpr std::int64_t kFreeBufferSlots = std::int64_t{1} << 20;

// One eager call checked (check(calls, when)), then timed; a graph's first replay checked too.
template <class ExecutionSpace, class Run, class Check>
CallTotals time_checked(benchmark::State& state, const Instance<ExecutionSpace>& instance, Launch launch, const Run& run,
                        const Check& check) {
  instance.space().fence();
  run();
  check(1, "eager call");
  return time_calls(state, instance, launch, run, [&](auto replay) {
    replay();
    check(1 + kCudaGraphCalls, "graph replay");
  });
}

template <class ExecutionSpace>
void bench_free(benchmark::State& state, std::int64_t n, Launch launch) {
  run_checked(state, [&] {
    using MemorySpace = typename ExecutionSpace::memory_space;
    Instance<ExecutionSpace> instance;
    const ExecutionSpace space = instance.space();
    std::mt19937_64 rng(n);
    canary::CanaryBuffer initial(static_cast<std::size_t>(kFreeBufferSlots));
    for (std::size_t s = 1; s < initial.size(); ++s) initial[s] = {static_cast<std::int64_t>(s % 151936), static_cast<std::int64_t>(s % 4096), static_cast<std::int64_t>(rng()), 0};
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) slots[static_cast<std::size_t>(i)] = 1 + (i * 2654435761LL) % (kFreeBufferSlots - 1);
    canary::CanaryBuffer expected = initial;
    canary::ViolationRing reference_ring;
    reference_ring.capacity = 16;
    canary::free(slots, 7, kvcanary::KernelKind::HEAD_K_FULL, expected, reference_ring);

    const auto buffer = kvcanary::upload_canary_buffer(space, initial);
    const auto ring = kvcanary::allocate_violation_ring(space, 16);
    const auto device_slots = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary_perf::slots", slots);
    Kokkos::View<std::int64_t, MemorySpace> epoch(Kokkos::view_alloc(space, "kvcanary_perf::epoch"));
    Kokkos::deep_copy(space, epoch, std::int64_t{7});
    kvcanary::FreeOptions<MemorySpace> options;
    options.epoch = epoch;
    const auto run = [&] { kvcanary::free(space, device_slots, buffer, ring, options); };
    const auto check = [&](std::int64_t calls, const std::string& when) {
      const canary::CanaryBuffer got = kvcanary::download_canary_buffer(space, buffer);
      expect(got == expected, when + ": the buffer differs from kvcanary::reference::free");
      const canary::ViolationRing r = kvcanary::download_violation_ring(space, ring);
      expect(r.count == 0 && r.kernel_run_counter == calls && r.slot_run_counter == calls * n,
             when + ": counters " + std::to_string(r.kernel_run_counter) + " / " + std::to_string(r.slot_run_counter));
    };
    const CallTotals totals = time_checked(state, instance, launch, run, check);
    const std::int64_t bytes = n * 24;
    set_time_counters(state, totals, bytes, measured_floor().floor_us(bytes), Regime::Latency);
    if (totals.calls > 0) state.counters["slots"] = static_cast<double>(n);
  });
}

struct CrossCheckShape {
  std::string name;
  std::int64_t batch_size, prefix_min, prefix_max, page_size;
  kvcanary::MetadataForm form;
};

inline std::vector<CrossCheckShape> cross_check_shapes() {
  return {{"decode_bs64", 64, 512, 8192, 1, kvcanary::MetadataForm::Csr},
          {"decode_bs256_dense16", 256, 4096, 32768, 16, kvcanary::MetadataForm::Dense}};
}

template <class ExecutionSpace>
void bench_cross_check(benchmark::State& state, const CrossCheckShape& shape, Launch launch) {
  run_checked(state, [&] {
    Instance<ExecutionSpace> instance;
    const ExecutionSpace space = instance.space();
    std::mt19937_64 rng(shape.batch_size);
    canary::Inputs in;
    in.max_reqs = shape.batch_size + 1;
    in.max_seq_len = shape.prefix_max + 1;
    in.req_to_token.resize(static_cast<std::size_t>(in.max_reqs * in.max_seq_len));
    for (std::int32_t& v : in.req_to_token) v = static_cast<std::int32_t>(1 + rng() % (std::int64_t{1} << 24));
    kvcanary::reference::BackendMetadata m;
    m.form = shape.form;
    m.page_size = shape.page_size;
    m.kv_indptr.push_back(0);
    std::int64_t entries = 0;
    for (std::int64_t r = 0; r < shape.batch_size; ++r) {
      const std::int64_t prefix = shape.prefix_min + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(shape.prefix_max - shape.prefix_min + 1));
      in.req_pool_indices.push_back(r + 1);
      in.prefix_lens.push_back(prefix);
      in.extend_seq_lens.push_back(1);
      m.seq_lens.push_back(prefix + 1);
    }
    m.max_blocks = (shape.prefix_max + 1 + shape.page_size - 1) / shape.page_size;
    for (std::int64_t r = 0; r < shape.batch_size; ++r) {
      const std::int64_t length = in.prefix_lens[static_cast<std::size_t>(r)] + 1;
      const std::int64_t pages = (length + shape.page_size - 1) / shape.page_size;
      for (std::int64_t j = 0; j < m.max_blocks; ++j) {
        const std::int64_t page = in.req_to_token[static_cast<std::size_t>((r + 1) * in.max_seq_len + std::min(j, pages - 1) * shape.page_size)] / shape.page_size;
        if (j < pages) m.kv_indices.push_back(page);
        m.block_table.push_back(page);
      }
      m.kv_indptr.push_back(static_cast<std::int64_t>(m.kv_indices.size()));
      entries += pages;
    }
    using MemorySpace = typename ExecutionSpace::memory_space;
    const auto inputs = kvcanary::upload_inputs(space, in);
    kvcanary::BackendMetadata<MemorySpace> device;
    device.form = m.form;
    device.page_size = m.page_size;
    const auto narrow = [](const std::vector<std::int64_t>& v) { return std::vector<std::int32_t>(v.begin(), v.end()); };
    if (m.form == kvcanary::MetadataForm::Csr) {
      device.kv_indptr = kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "kvcanary_perf::kv_indptr", narrow(m.kv_indptr));
      device.kv_indices = kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "kvcanary_perf::kv_indices", narrow(m.kv_indices));
    } else {
      device.block_table = kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "kvcanary_perf::block_table", narrow(m.block_table),
                                                                           shape.batch_size, m.max_blocks);
      device.seq_lens = kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "kvcanary_perf::seq_lens", narrow(m.seq_lens));
    }
    const auto ring = kvcanary::allocate_violation_ring(space, 16);
    const auto run = [&] { kvcanary::cross_check(space, inputs, device, ring); };
    const auto check = [&](std::int64_t calls, const std::string& when) {
      const canary::ViolationRing r = kvcanary::download_violation_ring(space, ring);
      expect(r.count == 0 && r.kernel_run_counter == calls && r.slot_run_counter == calls * entries,
             when + ": " + std::to_string(r.count) + " rows, counters " + std::to_string(r.kernel_run_counter) + " / " +
                 std::to_string(r.slot_run_counter) + first_row(r));
    };
    const CallTotals totals = time_checked(state, instance, launch, run, check);
    const std::int64_t bytes = entries * 8 + shape.batch_size * 40;
    set_time_counters(state, totals, bytes, measured_floor().floor_us(bytes), Regime::Bandwidth);
    if (totals.calls > 0) state.counters["entries"] = static_cast<double>(entries);
  });
}

template <class ExecutionSpace>
void register_canary_v2_benchmarks(const std::string& backend) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{64}, std::int64_t{4096}, std::int64_t{262144}})
    for (const auto& launch : launches<ExecutionSpace>(backend)) {
      const Launch mode = launch.first;
      register_timed("free/" + std::to_string(n) + "_slots/" + launch.second,
                     [n, mode](benchmark::State& state) { bench_free<ExecutionSpace>(state, n, mode); });
    }
  for (const CrossCheckShape& shape : cross_check_shapes())
    for (const auto& launch : launches<ExecutionSpace>(backend)) {
      const Launch mode = launch.first;
      register_timed("cross_check/" + shape.name + "/" + launch.second,
                     [shape, mode](benchmark::State& state) { bench_cross_check<ExecutionSpace>(state, shape, mode); });
    }
}

}  // namespace kvcanary_perf

#endif
