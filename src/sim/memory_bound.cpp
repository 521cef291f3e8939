#include "memory_bound.hpp"

#include "engine.hpp"
#include "step_timer.hpp"

#include <algorithm>

namespace kvcanary {
namespace sim {

namespace {
// Kokkos, the OpenMP runtime and its thread stacks, the program itself: measured at about 20 MiB.
constexpr std::int64_t kBaseBytes = std::int64_t{64} << 20;
// A fault's ground truth (record, damage, tainted sets, watches), generously.
constexpr std::int64_t kFaultBytes = std::int64_t{64} << 10;
}  // namespace

std::int64_t peak_memory_bound(const SimulationOptions& o) {
  const EngineShape s = engine_shape(o);
  const std::int64_t groups = 1 + (s.draft_group ? 1 : 0) + (s.swa_window > 0 ? 1 : 0);
  const std::int64_t table = s.rows * s.cols * 4;  // req_to_token or the expected-token pool, int32
  std::int64_t bytes = kBaseBytes;
  bytes += 4 * table;                                 // both tables, in the engine and in Views
  bytes += s.max_batch * s.cols * 4 * 2;              // the running requests' tokens (vector growth: x2)
  bytes += s.num_slots * (3 * 8 + 2 * s.bytes_per_token);  // LUT (engine, its truth, View), K and V bytes
  bytes += s.num_pages * 24;                          // page references, quarantine, free stack
  // Per group of the runtime (kvcanary::Canary): the verify plan (4 int64 arrays, shared by the head and the
  // sweep, sized for the larger), K and V canary records (32 bytes), the ring and its host mirror, the token
  // arrays (5 int64), the write plans and workspaces of the head and the sweep.
  const std::int64_t verify_capacity =
      o.verify_capacity > 0 ? o.verify_capacity : std::max(s.verify_capacity, s.sweep_verify_capacity);
  bytes += groups * (verify_capacity * 32 + s.num_slots * 64 + o.ring_capacity * 128 + s.token_capacity * 40 +
                     (s.max_batch + s.max_cache_entries) * 96);
  bytes += s.max_cache_entries * 24 + 4096;  // the sweep's inputs and extend zeros, the counter blocks
  bytes += kGroups * 5 * s.token_capacity * 8 + s.max_batch * 64;  // StepData
  // Canary v2 (SPEC-CANARY §11): the freed slots (per group in StepData, one View) and the backend's
  // CSR metadata (kv_indptr, kv_indices: in StepData, the reference's copy and Views), all int64.
  bytes += (kGroups + 1) * s.num_slots * 8 + 3 * (s.max_batch + 1 + s.max_batch * s.cols) * 8;
  bytes += s.rows * 64;                                            // dirty rows (a std::set)
  // SPEC-CANARY §11.7 (runs with the cross_identity fault): each group's verify and write identities, the
  // batch's and the sweep's identities (StepData, Views).
  if (s.identities)
    bytes += groups * (verify_capacity + s.max_batch + s.max_cache_entries) * 8 + 4 * (s.max_batch + s.max_cache_entries) * 8;
  bytes += static_cast<std::int64_t>(o.faults.size()) * faults_per_class(o) * kFaultBytes;
  bytes += kMaxTimedSteps * static_cast<std::int64_t>(sizeof(StepSample)) + s.max_batch * 512;  // StepTimer
  return bytes;
}

}  // namespace sim
}  // namespace kvcanary
