#ifndef KVCANARY_SIM_ENGINE_HPP
#define KVCANARY_SIM_ENGINE_HPP

// The engine model of the simulator, on the host: a paged KV pool with a page allocator, req_to_token,
// an expected-token pool, continuous batching with chunked prefill and (optionally) speculative decode,
// a prefix cache, an optional SWA LUT, and the faults with their ground truth. Each step it hands the
// canary pipelines a StepData (what an engine refills in place before its graph replays) and, after the
// step, takes the ring rows back and attributes each one to an injected fault or to nothing (a false
// positive). It knows nothing of Kokkos: the device and reference pipelines both feed on it.

#include "sim_types.hpp"

#include <kvcanary/tools/reference_canary.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace kvcanary {
namespace sim {

// The canary buffer groups of a step: the target model's full-attention group (with real-KV, tail pass
// and prefix-cache sweep), the speculative draft group (token offset +1), the sliding-window group.
enum class Group : int { Target = 0, Draft = 1, Swa = 2 };
constexpr int kGroups = 3;

// The flat token arrays of one group, padded to the token capacity with slot -1.
struct GroupTokens {
  std::vector<std::int64_t> input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
};

// A byte of a real-KV tensor flipped after the model's write (tensor 0: K, 1: V).
struct ByteFlip {
  int tensor = 0;
  std::int64_t slot = 0, byte = 0;
  std::uint8_t mask = 0;
};

// What the pipelines need for one step. Tables are the engine's (shared_tables()); only the rows in
// dirty_rows changed since the last step (all rows on step 0).
struct StepData {
  std::int64_t step = 0;
  std::int64_t batch_size = 0;  // the bucket: a power of two (or max_batch), rows past the live ones are padding
  std::int64_t live = 0;        // requests in the batch (rows before the padding)
  std::int64_t prefill_rows = 0;  // of them, those writing a chunk of their prompt this step
  std::vector<std::int64_t> req_pool_indices, prefix_lens, extend_seq_lens, valid_lens;
  // Each batch row's identity (SPEC-CANARY §11.7), when the run carries identities (EngineShape::identities).
  std::vector<std::int64_t> identities;
  std::vector<std::int64_t> dirty_rows;
  bool lut_dirty = false;
  std::array<GroupTokens, kGroups> tokens;
  std::vector<ByteFlip> flips;
  // Slots the engine returned to its allocator since the last step, per group's slot space (SWA: through
  // the LUT): the pipelines stamp them with the free stage (SPEC-CANARY §11.2) before the head.
  std::array<std::vector<std::int64_t>, kGroups> freed;
  // The target group's attention-backend metadata as a backend builds it from req_to_token: CSR, page
  // size 1, prefix + extend tokens per batch row (padding rows empty); the head cross-checks it
  // (SPEC-CANARY §11.4).
  std::vector<std::int64_t> kv_indptr, kv_indices;
  bool sweep = false;  // a verify-only pass over the prefix cache's entries, after the tail
  std::int64_t sweep_batch_size = 0;
  std::vector<std::int64_t> sweep_pool_indices, sweep_prefix_lens, sweep_extend_seq_lens, sweep_valid_lens;
  std::vector<std::int64_t> sweep_identities;  // with EngineShape::identities: the cache's entries are identity 0
};

// A ring row with the group whose ring held it.
struct GroupRow {
  Group group;
  reference::RingRow row;
};

// Fixed sizes of a run, derived from the options.
struct EngineShape {
  std::int64_t page_size = 16, num_pages = 0, num_slots = 0;
  std::int64_t rows = 0, cols = 0;  // req_to_token and the expected-token pool: [rows, cols]
  std::int64_t max_batch = 0, token_capacity = 0, verify_capacity = 0;
  std::int64_t token_budget = 0;  // tokens a step may write (options' step_token_budget, more with full_batch)
  std::int64_t max_cache_entries = 0, sweep_verify_capacity = 0;
  std::int64_t bytes_per_token = 32;  // of each real-KV tensor (K, V); real-KV PARTIAL reads the first 16
  int swa_window = 0;
  bool draft_group = false;
  // Requests carry identities (SPEC-CANARY §11.7) through the canary: on when the cross_identity fault is
  // injected, so that runs without it launch exactly what they did before.
  bool identities = false;
};
EngineShape engine_shape(const SimulationOptions& options);

// Faults injected per class: options.faults_per_class, or steps / 400 (at least 1, at most
// kMaxDefaultFaultsPerClass, so that a long run's pages and fault records do not grow with --steps).
constexpr std::int64_t kMaxDefaultFaultsPerClass = 64;
std::int64_t faults_per_class(const SimulationOptions& options);

class Engine {
 public:
  explicit Engine(const SimulationOptions& options);

  const EngineShape& shape() const { return shape_; }
  const std::vector<std::int32_t>& req_to_token() const { return req_to_token_; }  // [rows, cols]
  const std::vector<std::int32_t>& token_pool() const { return token_pool_; }      // [rows, cols]
  const std::vector<std::int64_t>& swa_lut() const { return lut_; }                // [num_slots]

  // Schedules, injects the step's faults and builds the step's inputs.
  const StepData& begin_step(std::int64_t step);
  // Attributes the step's ring rows (head, tail and sweep of every group), retires the requests a
  // detection condemned, finishes requests, frees pages.
  void end_step(const std::vector<GroupRow>& rows, std::int64_t ring_overflows);

  // The report's engine part (faults, rows, classes); the caller adds timings.
  SimulationReport report() const;

 private:
  struct Damage {  // "the record `reader` expects at `position` is gone", from time `time` on
    std::int64_t reader, position, time;
    int groups;  // bit g: the damage is in group g's buffer
  };
  struct Request {
    std::int64_t id = 0, row = 0;
    std::vector<std::int32_t> tokens;  // the true token ids: prompt, then output
    std::int64_t prompt_len = 0, total_len = 0, written = 0;
    std::vector<std::int64_t> pages;
    std::int64_t reserved = 0;  // pages still reserved for it
    int template_id = -1;
    std::int64_t cache_entry = -1;  // id of the prefix-cache entry it shares
    std::int64_t shared_pages = 0;
    std::int64_t extend = 0, advance = 0, token_begin = 0;  // this step
    bool tainted = false;
    std::int64_t identity = 0;  // SPEC-CANARY §11.7; the engine's traffic is identity 0, the cross_identity fault's is not
  };

  struct CacheEntry {
    std::int64_t id = 0, row = 0, tokens = 0, last_use = 0;
    int template_id = 0;
    std::vector<std::int64_t> pages;
    bool stale = false;
  };

  struct Fault {
    FaultRecord record;
    std::vector<Damage> damage;
    std::set<std::int64_t> requests;       // tainted request ids
    std::set<std::int64_t> cache_entries;  // tainted cache entry ids
    std::set<std::int64_t> slots[kGroups];
    std::int64_t lut_slot = -1, lut_old = -1;
    std::vector<ByteFlip> flips;  // padding_kv: the bytes it changed (flipped back after its detection)
    bool condemned = false;
  };

  // scheduling
  void admit_requests();
  Request* admit(Request request);  // nullptr: the pool cannot hold it now
  Request make_request(int forced_template = -1);
  bool ensure_pages(Request& request, std::int64_t positions);
  std::int64_t allocate_page();
  void release_page(std::int64_t page);
  void stamp_freed(std::int64_t page);  // the page's slots go to the next step's free stage
  void set_row_page(Request& request, std::int64_t page_index);
  bool evict_one_cache_entry();
  void finish_request(Request& request, bool aborted);
  void maybe_insert_cache_entry(const Request& request);
  void build_batch();
  void hold_back_open_writes();
  std::int64_t slot_of(const Request& request, std::int64_t position) const;
  std::int64_t shared_template_tokens(int template_id) const;

  // faults
  void schedule_faults();
  void inject_pre_step_faults();
  bool inject(FaultClass fault, int phase);
  std::int64_t take_victim_page(Fault& fault);
  bool inject_double_allocation(Fault& fault);
  bool inject_use_after_free(Fault& fault);
  bool inject_page_table_overwrite(Fault& fault);
  bool inject_rogue_write(Fault& fault);
  bool inject_kv_byte_flip(Fault& fault);
  bool inject_position_off_by_one(Fault& fault);
  bool inject_swapped_tokens(Fault& fault);
  bool inject_swa_lut(Fault& fault);
  bool inject_stale_prefix(Fault& fault);
  bool inject_freed_read(Fault& fault);
  bool inject_stale_metadata(Fault& fault);
  bool inject_padding_kv(Fault& fault);
  bool inject_cross_identity(Fault& fault);
  void build_backend_metadata();
  Request* pick_running(const std::function<bool(const Request&)>& accept);
  void taint_readers(Fault& fault, std::int64_t slot, std::int64_t time, int groups);
  void note_write(const Request& writer, std::int64_t position, std::int64_t slot, std::int64_t token, int groups);
  void mark_exercised();
  std::set<std::int64_t> attributable_slots(const Fault& fault, Group group, bool aimed_at) const;

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  std::int64_t long_tailed(double median, double sigma, std::int64_t lo, std::int64_t hi);
  std::int64_t now(int phase) const { return step_ * 3 + phase; }  // 0 before head, 1 head write, 2 after the model
  Request* request_by_id(std::int64_t id);
  const Request* request_by_id(std::int64_t id) const;

  SimulationOptions options_;
  EngineShape shape_;
  std::mt19937_64 rng_;
  std::int64_t step_ = -1;
  StepData data_;

  std::vector<std::int32_t> req_to_token_, token_pool_;
  std::vector<std::int64_t> lut_, lut_truth_;
  std::vector<std::int64_t> free_pages_;  // a stack: back() is handed out next
  std::vector<std::int64_t> freed_pages_;  // released since the last step: stamped FREED before the next head
  std::vector<ByteFlip> repair_flips_;      // the padding slot's bytes restored at the next step
  bool padding_fault_active_ = false;       // one padding_kv fault at a time (its flip is undone by XOR)
  std::vector<std::int64_t> page_refs_;
  std::vector<char> quarantined_;         // pages a fault touched: never handed out again once released
  std::int64_t reserved_pages_ = 0;
  std::int64_t forced_page_ = -1;         // double allocation: the next allocation returns this live page
  std::int64_t forced_fault_ = -1;
  std::vector<std::int64_t> free_rows_, free_cache_rows_;
  std::set<std::int64_t> dirty_rows_;
  bool lut_dirty_ = true;

  std::vector<std::vector<std::int32_t>> templates_;
  std::map<std::int64_t, Request> running_;  // by id, in admission order
  std::vector<std::int64_t> batch_;          // request ids of this step's batch rows
  std::vector<std::int64_t> batch_prefix_;   // their prefix at the step's start
  std::set<std::int64_t> step_seeds_, step_targets_;  // the target group's seeds and targets of the step's write
  std::map<int, CacheEntry> cache_;          // by template id
  std::int64_t next_request_id_ = 1, next_cache_id_ = 1;
  std::int64_t arrivals_waiting_ = 0;

  std::vector<Fault> faults_;
  std::vector<std::pair<std::int64_t, FaultClass>> schedule_;  // (step, class), sorted
  struct Watch {  // a write into the slot destroys the record `reader` expects at `position`
    std::int64_t fault, reader, position;
  };
  std::map<std::int64_t, std::vector<Watch>> watches_;  // by slot
  std::int64_t skipped_[kFaultClasses] = {};
  std::set<std::int64_t> condemned_;  // request ids to abort at the step's end

  std::int64_t rows_ = 0, never_written_rows_ = 0, false_positives_ = 0, ring_overflows_ = 0;
  std::vector<std::string> false_positive_lines_;
  std::int64_t requests_finished_ = 0, requests_aborted_ = 0, tokens_written_ = 0;
};

}  // namespace sim
}  // namespace kvcanary

#endif
