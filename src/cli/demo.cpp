// The demo batch mixes what a serving step holds (decode rows with prefixes of a few thousand tokens,
// prefill rows, padding rows with garbage lengths), an expected-token pool, and random slots. Plan
// objects are allocated once; each timed plan() call is fenced on both sides (STYLE.md, benchmarks).

#include "demo.hpp"

#include "backends.hpp"
#include "case_outputs.hpp"
#include "compare.hpp"
#include "kokkos_session.hpp"

#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/version.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

constexpr std::uint64_t kSeed = 20240601;
constexpr std::int64_t kBatchSize = 320;
constexpr std::int64_t kMaxSeqLen = 5120;  // longest decode prefix 4096 + longest prefill 1024

struct DemoBatch {
  reference::Inputs inputs;
  std::int64_t decode_rows = 0, prefill_rows = 0, padding_rows = 0;
  std::int64_t verify_capacity = 0;
};

DemoBatch make_demo_batch() {
  std::mt19937_64 rng(kSeed);
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) {  // [lo, hi], reproducible across libraries
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  DemoBatch batch;
  reference::Inputs& in = batch.inputs;
  in.max_reqs = kBatchSize + 1;  // pool row 0 means padding
  in.max_seq_len = kMaxSeqLen;
  in.req_to_token.resize(static_cast<std::size_t>(in.max_reqs * in.max_seq_len));
  for (auto& slot : in.req_to_token) slot = static_cast<std::int32_t>(uniform(0, (1 << 22) - 1));
  in.pool_rows = in.max_reqs;
  in.pool_cols = in.max_seq_len;
  in.req_to_verify_expected_tokens.emplace(in.req_to_token.size());
  for (auto& token : *in.req_to_verify_expected_tokens) token = static_cast<std::int32_t>(uniform(0, 151935));
  in.req_to_verify_expected_tokens_valid_lens.emplace();

  // Each active row gets its own pool row, in a shuffled order.
  std::vector<std::int64_t> pool_rows(static_cast<std::size_t>(kBatchSize));
  std::iota(pool_rows.begin(), pool_rows.end(), 1);
  for (std::size_t i = pool_rows.size() - 1; i > 0; --i)
    std::swap(pool_rows[i], pool_rows[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(i)))]);

  for (std::int64_t r = 0; r < kBatchSize; ++r) {
    const std::int64_t kind = uniform(0, 99);
    std::int64_t pool_row, prefix, extend;
    if (kind < 10) {  // padding: the plan must not look at these garbage lengths
      ++batch.padding_rows;
      pool_row = 0, prefix = uniform(-1000000, 1000000), extend = uniform(-1000000, 1000000);
    } else if (kind < 25) {  // prefill
      ++batch.prefill_rows;
      pool_row = pool_rows[static_cast<std::size_t>(r)], prefix = uniform(0, 512), extend = uniform(128, 1024);
    } else {  // decode
      ++batch.decode_rows;
      pool_row = pool_rows[static_cast<std::size_t>(r)], prefix = uniform(1024, 4096), extend = 1;
    }
    in.req_pool_indices.push_back(pool_row);
    in.prefix_lens.push_back(prefix);
    in.extend_seq_lens.push_back(extend);
    // The tokens known for a request: its prefix and what this step writes.
    in.req_to_verify_expected_tokens_valid_lens->push_back(pool_row == 0 ? 0 : std::min(prefix + extend, kMaxSeqLen));
    if (pool_row != 0) batch.verify_capacity += prefix;
  }
  return batch;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

struct Timing {
  reference::Outputs first_call;  // outputs of the warm-up call, which started from the poison
  std::vector<double> seconds;    // one per timed call
  std::string space;              // e.g. "OpenMP, concurrency 2"
};

// Allocates the plan objects once, uploads the batch, then plans: one warm-up (kept for the check),
// then `iterations` calls, each fenced before and after on the same instance.
template <class ExecutionSpace>
Timing time_plan(const ExecutionSpace& space, const reference::Inputs& inputs, const reference::Outputs& poisoned,
                 const PlanOptions& options, int iterations) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  const auto batch_size = static_cast<std::int64_t>(inputs.req_pool_indices.size());
  const VerifyPlan<MemorySpace> verify_plan =
      allocate_verify_plan(space, static_cast<std::int64_t>(poisoned.verify_slot_indices.size()));
  const WritePlan<MemorySpace> write_plan =
      allocate_write_plan(space, static_cast<std::int64_t>(poisoned.write_seed_slot_indices.size()));
  const PlanStatus<MemorySpace> status = allocate_plan_status(space);
  const PlanWorkspace<MemorySpace> workspace = allocate_plan_workspace(space, batch_size);
  const PlanInputs<MemorySpace> device_inputs = upload_inputs(space, inputs);
  upload_outputs(space, poisoned, verify_plan, write_plan, status);

  Timing timing;
  timing.space = std::string(space.name()) + ", concurrency " + std::to_string(space.concurrency());
  plan(space, device_inputs, verify_plan, write_plan, status, workspace, options);
  download_outputs(space, verify_plan, write_plan, status, timing.first_call);  // fences
  for (int i = 0; i < iterations; ++i) {
    space.fence();
    const auto start = std::chrono::steady_clock::now();
    plan(space, device_inputs, verify_plan, write_plan, status, workspace, options);
    space.fence();
    timing.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return timing;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

int demo_command(const CommandLine& command_line, std::ostream& out) {
  const DemoBatch batch = make_demo_batch();
  const reference::Inputs& in = batch.inputs;
  const reference::Outputs poisoned = reference::make_outputs(batch.verify_capacity, kBatchSize, kPoison);
  reference::Outputs expected = poisoned;
  reference::plan(in, expected);

  PlanOptions options;
  options.algorithm = plan_algorithm(command_line);
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  Timing timing;
  with_execution_space(command_line.backend, [&](const auto& space) {
    timing = time_plan(space, in, poisoned, options, command_line.iterations);
  });
  const reference::Outputs& got = timing.first_call;
  const auto difference = first_difference(expected, got);

  const double entries = static_cast<double>(got.verify_num_valid);
  const double rows = static_cast<double>(kBatchSize);
  const double bytes_written = 32.0 * entries + 16.0 * rows + 8.0 + 5 * 4.0;  // verify arrays, write plan, scalars
  const double spec_bytes = 40.0 * entries + 24.0 * rows;                   // SPEC §7: slot + pool reads, 4 writes
  const double seconds = median(timing.seconds);
  const std::int64_t write_tokens = got.write_offsets.empty() ? 0 : got.write_offsets[kBatchSize];

  out << "kvcanary demo (kvcanary " << KVCANARY_VERSION_STRING << ")\n"
      << "  backend         " << timing.space << (command_line.backend ? "" : " (Kokkos::DefaultExecutionSpace)")
      << "; entries algorithm " << algorithm_name(options.algorithm) << '\n'
      << "  batch           " << kBatchSize << " requests: " << batch.decode_rows << " decode (prefix 1024-4096), "
      << batch.prefill_rows << " prefill (prefix 0-512, extend 128-1024), " << batch.padding_rows
      << " padding; seed " << kSeed << '\n'
      << "  inputs          req_to_token " << in.max_reqs << " x " << in.max_seq_len
      << " of random slots, expected-token pool of the same shape, full attention (no SWA)\n"
      << "  plan            " << got.verify_num_valid << " verify entries (enable " << got.enable << "), "
      << write_tokens << " tokens to write\n"
      << "  bytes written   " << format("%.2f", bytes_written / 1e6) << " MB per call (32 B per verify entry, "
      << "16 B per row)\n"
      << "  plan() time     median " << format("%.1f", seconds * 1e6) << " us over " << timing.seconds.size()
      << " calls after 1 warm-up, each fenced\n"
      << "  throughput      " << format("%.3g", entries / seconds) << " entries/s, "
      << format("%.1f", spec_bytes / seconds / 1e9) << " GB/s by SPEC section 7's count (40 B/entry + 24 B/row)\n"
      << "  check           "
      << (difference ? "DISAGREES with the reference at " + *difference
                     : std::string("agrees with the reference on every output element"))
      << '\n';
  return difference ? 1 : 0;
}

}  // namespace cli
}  // namespace kvcanary
