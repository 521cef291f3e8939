#ifndef KVCANARY_SIM_SIM_TYPES_HPP
#define KVCANARY_SIM_SIM_TYPES_HPP

// The engine simulator's vocabulary (docs/simulator.md): the fault classes, the options of a run and
// the report it hands back. Host-only, no Kokkos: the CLI and the tests read these without a backend.

#include <kvcanary/stages/canary_types.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvcanary {
namespace sim {

// The faults the simulator injects, each an engine bug the canary is meant to catch (issue 13).
enum class FaultClass : int {
  DoubleAllocation = 0,    // the allocator hands out a page a live request still holds
  UseAfterFree = 1,        // a live request's page is freed and re-allocated while its page table keeps it
  PageTableOverwrite = 2,  // a req_to_token entry is overwritten with another live slot (or slot 0)
  RogueWrite = 3,          // one token's record and KV bytes land in another request's live slot
  KvByteFlip = 4,          // one byte of the real KV bytes flips
  PositionOffByOne = 5,    // one token is written with position + 1
  SwappedTokens = 6,       // two requests' token ids swapped in the step's input_ids
  SwaLutCorruption = 7,    // a full → SWA LUT entry points at another SWA slot
  StalePrefixHit = 8,      // a prefix-cache entry's pages are evicted and reused, the index keeps it
  FreedRead = 9,           // a live request's page is freed (the free stage stamps it) and read before any reuse
  StaleMetadata = 10,      // the attention backend's copy of the page table (kv_indices) holds a stale entry
  PaddingKv = 11,          // graph padding writes bytes (NaN) into the padding slot's real KV
  CrossIdentityHit = 12,   // a request of another identity (LoRA adapter, cache salt) hits a cached prefix
};
constexpr int kFaultClasses = 13;

// "double_alloc", "use_after_free", "page_table_overwrite", "rogue_write", "kv_byte_flip",
// "position_off_by_one", "swapped_tokens", "swa_lut", "stale_prefix", "freed_read", "stale_metadata", "padding_kv",
// "cross_identity".
const char* fault_class_name(FaultClass fault);
// "all", "none" or a comma-separated list of names; throws std::invalid_argument naming a bad one.
std::vector<FaultClass> parse_fault_classes(const std::string& list);

// What should catch a class (docs/simulator.md has the table): the stage, the reason bits any of which a
// detection row carries, and when, in steps after the injection.
struct FaultExpectation {
  const char* stage;
  std::int64_t reason_bits;
  const char* when;
  const char* not_covered;  // the configurations where the contract cannot see it
};
FaultExpectation expected_catch(FaultClass fault);

struct SimulationOptions {
  std::int64_t steps = 2000;
  std::uint64_t seed = 1;
  std::vector<FaultClass> faults;           // classes to inject (empty: a clean run)
  std::int64_t faults_per_class = 0;        // 0: steps / 400, at least 1, per class
  std::int64_t page_size = 16;
  int swa_window = 0;                       // > 0: a sliding-window group of that width with a LUT
  bool spec_decode = false;                 // draft tokens, and a draft group with the +1 token offset
  int num_draft_tokens = 3;
  std::int64_t max_batch = 8;
  RealKvMode real_kv = RealKvMode::All;
  std::int64_t max_prompt = 192;
  std::int64_t max_output = 128;
  std::int64_t output_tokens = 0;           // > 0: every request's output is that long (0: drawn, <= max_output)
  std::int64_t prefill_chunk = 64;
  std::int64_t step_token_budget = 128;
  std::int64_t sweep_every = 8;             // steps between sweeps of the prefix cache (0: never)
  std::int64_t ring_capacity = 4096;
  bool use_graphs = true;                   // CUDA: capture each batch-size bucket once, then replay
  // Keep the batch full: every step admits new requests until max_batch run (arrivals never wait), and
  // the step's token budget is at least a full batch's decode tokens + prefill_chunk. With a long
  // output_tokens, the steady state is max_batch decoding requests (the overhead runs of
  // scripts/measure-sim-overhead.sh).
  bool full_batch = false;
  // The runtime's own checks (kvcanary::Canary, docs/runtime.md): the health check's period, and two faults
  // of the canary itself: the step whose head and tail replays are skipped (a graph that lost the canary's
  // nodes; -1: none), and a verify capacity too small for the batches (0: the derived one).
  std::int64_t health_check_every = 50;
  std::int64_t skip_canary_step = -1;
  std::int64_t verify_capacity = 0;
};

// One injected fault and what became of it (the ground truth).
struct FaultRecord {
  std::int64_t id = 0;
  FaultClass fault = FaultClass::DoubleAllocation;
  std::int64_t step = 0;              // injection step
  std::vector<std::int64_t> slots;    // the slots it damaged or aimed at
  bool covered = true;                // false: a blind spot of the contract in this configuration
  std::int64_t exercised_step = -1;   // first step a check read the damage (-1: never)
  std::int64_t detected_step = -1;    // first step a ring row was attributed to it (-1: never)
  std::int64_t reason_bits = 0;       // OR of the attributed rows' reasons
  std::int64_t kinds = 0;             // bit k set: a row of kernel kind k was attributed
  std::int64_t rows = 0;              // rows attributed
  std::string note;
  bool detectable() const { return covered && exercised_step >= 0; }
  bool detected() const { return detected_step >= 0; }
};

struct ClassSummary {
  std::int64_t injected = 0, not_covered = 0, unexercised = 0, detectable = 0, detected = 0, missed = 0;
  std::int64_t caught_anyway = 0;     // detected though not counted detectable (an extra, never a miss)
  std::int64_t skipped = 0;           // scheduled but the engine never offered a target
  std::int64_t latency_min = -1, latency_median = -1, latency_max = -1;
  std::int64_t reason_bits = 0;
};

// The canary's and the whole step's time over a set of steps.
struct StepTimes {
  std::int64_t steps = 0;
  double canary_us = 0, canary_us_median = 0;  // per step
  double step_us = 0;                          // mean per step
};

// The steps of one live batch size (requests in the batch): all of them, those where every request
// decoded (no prompt chunk in the batch) and those with at least one prefill chunk.
struct BatchTiming {
  std::int64_t batch_size = 0;
  StepTimes all, decode_only, with_prefill;
};

// One timed step, as simulate() records it.
struct StepSample {
  std::int64_t batch_size = 0;  // live requests
  bool prefill = false;         // a prompt chunk in the batch
  float canary_us = 0, step_us = 0;
};
// Groups the samples by batch size (ascending) and computes means and medians.
std::vector<BatchTiming> batch_timings(const std::vector<StepSample>& samples);

struct SimulationReport {
  std::string backend;
  SimulationOptions options;
  std::int64_t steps_run = 0, requests_finished = 0, requests_aborted = 0, tokens_written = 0;
  std::vector<FaultRecord> faults;
  ClassSummary classes[kFaultClasses];
  std::int64_t rows = 0, never_written_rows = 0, false_positives = 0, ring_overflows = 0;
  std::vector<std::string> false_positive_lines;  // the first few, formatted per SPEC-CANARY §7
  double canary_us_per_step = 0, step_us_per_step = 0, steps_per_second = 0;
  std::vector<BatchTiming> by_batch_size;
  std::int64_t reference_mismatches = -1;  // with a reference shadow: steps whose rings differed
  // What the runtime's own checks said: capacity-overflow (and other) warnings and "canary not running"
  // errors, counted, with the first few lines.
  std::int64_t runtime_warnings = 0, health_errors = 0;
  std::vector<std::string> runtime_warning_lines, health_error_lines;

  std::int64_t missed() const;
  bool ok() const { return missed() == 0 && false_positives == 0; }
};

// A human table (stdout) and JSON for tools.
std::string format_table(const SimulationReport& report);
std::string format_json(const SimulationReport& report);

}  // namespace sim
}  // namespace kvcanary

#endif
