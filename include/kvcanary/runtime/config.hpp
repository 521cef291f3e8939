#ifndef KVCANARY_RUNTIME_CONFIG_HPP
#define KVCANARY_RUNTIME_CONFIG_HPP

// The configuration of kvcanary::Canary (docs/runtime.md): plain values only, so that an engine (or the
// Python package) fills it from its own settings. Views (the engine's tables, real-KV bytes, wrapped
// canary bytes) go to the constructor in EngineTables (runtime/engine_views.hpp).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/report.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace kvcanary {

// How a violation row becomes text: the one-line form of SPEC-CANARY §7, or the original system's
// multi-line form (that line, then a header, the canary kind, the decoded reasons, stored/expected values
// and the totals; format_violation_multiline()).
enum class ReportFormat { OneLine, MultiLine };

// How end_step() takes the report pump's snapshot (docs/runtime.md, "The report pump").
enum class PumpSnapshot {
  Default,           // CUDA: WithNextPlan (the least stream time of the routes, docs/PERFORMANCE.md); the host
                     // backends: SideStreamCopies. Canary::pump_snapshot() says which.
  SideStreamCopies,  // a device copy of the counters on the engine's stream; the host copies on a side stream
  Kernel,            // one kernel on the engine's stream writes counters and new rows into pinned host memory
  // The snapshot taken by the forward's last canary pass into a pinned mailbox (captured with the passes; on
  // CUDA inside the last write kernel): end_step() only reads host memory, no CUDA call (docs/runtime.md).
  InGraph,
  // The in-graph mailbox, written by a kernel on a branch of the engine's stream: forked after
  // before_forward()'s passes, joined by after_forward() (call both each forward; capture both in one
  // graph, or neither), so that it runs beside the model's forward instead of after the canary's last pass.
  BesideForward,
  // The mailbox, forward N's snapshot written by one extra block of forward N + 1's first head plan (on CUDA,
  // with the head routes FromInputs and FromInputsAfterPlan, HeadVerify::Default's): no launch, event or copy
  // of its own. A forward's rows arrive once the next forward has started, or at flush() (docs/runtime.md).
  // Its cost a step: docs/PERFORMANCE.md.
  WithNextPlan,
};

// How before_forward() runs a group's head verify (docs/runtime.md, "Decisions").
enum class HeadVerify {
  Default,     // CUDA: FromInputs for a batch of at most 8 rows, FromInputsAfterPlan above (the fastest step of
               // each, measured: docs/PERFORMANCE.md); the host backends: FromPlan. A small batch of long
               // contexts ran faster on FromInputsAfterPlan (4 x 128K: -24%; docs/runtime.md)
  FromPlan,    // plan() stores the verify entries, verify() reads them back
  FromInputs,  // plan_and_verify() (SPEC-CANARY §5.1): the entries computed from the batch, never stored;
               // a group with a tail pass keeps FromPlan (after_forward() re-verifies its stored entries).
               // On CUDA each entry is checked in the plan's own kernels (one launch up to 256 rows)
  FromInputsAfterPlan,  // the same, the entries computed and checked by a verify kernel of their own after
                        // the plan's offsets (verify[from_inputs]); on the host backends the same as FromInputs
};

// How a group's K and V canary records are laid out when the Canary owns them (an engine's own buffers,
// EngineViews::k / v, keep their layout).
enum class KvRecords {
  Default,      // Interleaved on CUDA (measured: docs/PERFORMANCE.md), Separate on the host backends (not measured)
  Separate,     // a K buffer and a V buffer, 32 bytes a slot each
  Interleaved,  // one allocation of 64 bytes a slot: the slot's K record, then its V record (stride 64), so
                // the K and V reads (verify) and stores (write) of a slot fall in one 64-byte segment
};

// The engine's dimensions, from which Capacities are derived (derive_capacities()).
struct EngineDimensions {
  std::int64_t pool_slots = 0;              // KV slots of the full-attention pool (canary records per buffer)
  std::int64_t swa_pool_slots = 0;          // KV slots of the sliding-window pool (0: pool_slots)
  std::int64_t max_running_requests = 0;    // rows of req_to_token (the request pool)
  std::int64_t max_context_len = 0;         // columns of req_to_token
  std::int64_t cuda_graph_max_bs = 0;       // the largest batch a captured graph runs (0: none)
  std::int64_t max_cached_prefixes = 0;     // the most (pool row, length) pairs one sweep() gets (0: max_running_requests)
};

// Buffer sizes; -1 derives a field from EngineDimensions the way the original system's capacities.py does.
struct Capacities {
  // Verify entries of one pass, per group. Derived: 3 x pool slots of the group (radix prefix sharing
  // lets the prefixes of a batch add up to more than the pool; past it the plan disables the pass, and
  // end_step() warns).
  std::int64_t verify_capacity = -1;
  // Requests of one forward (batch rows, padding included). Derived: max(cuda_graph_max_bs, max_running_requests).
  std::int64_t write_req_capacity = -1;
  // Entries of one sweep() call. Derived: max_cached_prefixes, else max_running_requests.
  std::int64_t sweep_req_capacity = -1;
};

// One buffer group: its records (a K and a V canary buffer) and how its plan reads the batch.
enum class GroupKind : int {
  Target = 0,  // full attention of the target model: HEAD/TAIL/SWEEP_*_FULL tags
  Swa = 1,     // sliding window (window + full -> SWA LUT): *_SWA tags
  Draft = 2,   // the speculative draft model's pool (token offset +1): *_FULL tags, its own ring
};
constexpr int kGroupKinds = 3;
const char* group_kind_name(GroupKind kind);  // "target", "swa", "draft"

struct CanaryConfig {
  // ---- report ----
  ReportMode report_mode = ReportMode::Log;   // None: rows kept, nothing said; Log: to `sink`; Raise: ViolationError
  ReportFormat report_format = ReportFormat::OneLine;
  bool keep_never_written = false;            // SPEC-CANARY §7 filter (the report always counts what it drops)
  // Receives every line the runtime says (violations, warnings, stats, health); empty: std::cerr.
  std::function<void(const std::string&)> sink;
  std::int64_t ring_capacity = 1024;          // violation rows kept per group (fill once; the count keeps growing)
  std::int64_t pump_rows_per_step = 64;       // ring rows the asynchronous pump copies per group and step
  PumpSnapshot pump_snapshot = PumpSnapshot::Default;
  KvRecords kv_records = KvRecords::Default;  // the layout of the canary records the Canary owns

  // ---- passes ----
  std::int64_t sweep_interval = 0;            // > 0: sweep() is expected every that many steps (0: never)
  bool sweep_swa_group = true;                // sweep() verifies the SWA group too (the original does)
  RealKvMode real_kv_mode = RealKvMode::None; // fingerprints of the real KV bytes (needs tail_pass)
  bool tail_pass = false;                     // after_forward(): verify + re-stamp the groups with real-KV sources
  HeadVerify head_verify = HeadVerify::Default;  // the head verify's and sweep()'s route (same rows and counters)
  bool write_input_assert = false;            // batches carry expected_input_ids / expected_positions
  bool verify_token_assert = false;           // EngineTables carries the expected-token pool
  bool chain_position_assert = true;          // initial value of the device flag (set_chain_position_assert())
  // SPEC-CANARY §11.7: batches and sweeps carry a 64-bit identity per request (LoRA adapter, cache salt,
  // multimodal hash; 0 = none), so a prefix-cache hit across identities fails verify. Off: no identity
  // arrays are allocated and no pass does any work for them.
  bool request_identities = false;

  // ---- host checks (0: off) ----
  std::int64_t stats_every_n_steps = 0;             // "[canary] step=... protected_tokens=..." line
  std::int64_t health_check_every_n_steps = 100;    // kernel run counters vs the passes launched
  std::int64_t swa_divergence_every_n_steps = 0;    // "kv_canary_swa_divergence={...}" line (SWA group only)

  // ---- groups ----
  bool swa_group = false;
  int swa_window = 0;                         // > 0 with swa_group
  bool draft_group = false;

  EngineDimensions dimensions;
  Capacities capacities;                      // -1 fields derived from `dimensions`

  PlanOptions plan_options;
  CanaryAlgorithm canary_algorithm = CanaryAlgorithm::Default;
};

// Every -1 field of config.capacities filled from config.dimensions; throws std::invalid_argument
// ("kvcanary::Canary: ...") naming a dimension or capacity that is negative, zero where it must be
// positive, or too large to allocate.
Capacities derive_capacities(const CanaryConfig& config);

// Host checks of a whole config (all but the Views): throws std::invalid_argument naming the field.
void validate_config(const CanaryConfig& config);

// The bytes a Canary allocates for one group (its canary records when it owns them, plans, workspaces,
// ring rows on the device and on the host) and once (counters, sweep zeros); every extent is <= 2^40, so
// no sum overflows.
struct Footprint {
  std::int64_t records = 0, plans = 0, rings = 0, other = 0;
  std::int64_t total() const { return records + plans + rings + other; }
  Footprint& operator+=(const Footprint& o) {
    records += o.records;
    plans += o.plans;
    rings += o.rings;
    other += o.other;
    return *this;
  }
};
Footprint group_footprint(const CanaryConfig& config, const Capacities& capacities, std::int64_t slots,
                          bool owns_records);

// A size typo (pool_slots 10^12) must be an error, not a process the OOM killer ends: throws
// std::invalid_argument when `footprint` exceeds this machine's physical memory (POSIX; elsewhere no check).
void require_host_memory(const Footprint& footprint);

}  // namespace kvcanary

#endif
