#ifndef KVCANARY_PY_CORE_CANARY_HPP
#define KVCANARY_PY_CORE_CANARY_HPP

// kvcanary.Canary's Kokkos-free interface (as core.hpp for the stages): kvcanary::Canary<Space>'s config,
// tables, batch and report as plain data, and a handle that owns one Canary on one place (core_canary.cpp).

#include "core.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvcanary {
namespace python {

// kvcanary::CanaryConfig field for field (runtime/config.hpp); enums as their int values, the
// dimensions' and capacities' fields flat.
struct CanaryConfigArgs {
  int report_mode = 1;  // ReportMode: 0 none, 1 log, 2 raise
  bool multi_line = false;
  bool keep_never_written = false;
  std::function<void(const std::string&)> sink;  // empty: std::cerr
  std::int64_t ring_capacity = 0, pump_rows_per_step = 0;
  std::int64_t sweep_interval = 0;
  bool sweep_swa_group = false;
  int real_kv_mode = 0;
  bool tail_pass = false, write_input_assert = false, verify_token_assert = false, chain_position_assert = false;
  bool request_identities = false;
  std::int64_t stats_every_n_steps = 0, health_check_every_n_steps = 0, swa_divergence_every_n_steps = 0;
  bool swa_group = false;
  int swa_window = 0;
  bool draft_group = false;
  std::int64_t pool_slots = 0, swa_pool_slots = 0, max_running_requests = 0, max_context_len = 0,
               cuda_graph_max_bs = 0, max_cached_prefixes = 0;
  std::int64_t verify_capacity = -1, write_req_capacity = -1, sweep_req_capacity = -1;
  int plan_algorithm = 0;    // 0 default, 1 portable, 2 cuda-persistent
  int canary_algorithm = 0;  // 0 default, 1 portable, 2 cuda
  int pump_snapshot = 0;     // PumpSnapshot: 0 default, 1 side copies, 2 kernel, 3 in graph, 4 beside, 5 next plan
  int head_verify = 0;       // HeadVerify: 0 default, 1 from the plan, 2 from the inputs, 3 after the plan
  int kv_records = 0;        // KvRecords: 0 default, 1 separate, 2 interleaved
};

// f(name, field) for every field but the sink (the Python layer's config dict has these keys).
template <class Args, class F>
void for_each_config_field(Args& a, F&& f) {
  f("report_mode", a.report_mode);
  f("multi_line", a.multi_line);
  f("keep_never_written", a.keep_never_written);
  f("ring_capacity", a.ring_capacity);
  f("pump_rows_per_step", a.pump_rows_per_step);
  f("sweep_interval", a.sweep_interval);
  f("sweep_swa_group", a.sweep_swa_group);
  f("real_kv_mode", a.real_kv_mode);
  f("tail_pass", a.tail_pass);
  f("write_input_assert", a.write_input_assert);
  f("verify_token_assert", a.verify_token_assert);
  f("chain_position_assert", a.chain_position_assert);
  f("request_identities", a.request_identities);
  f("stats_every_n_steps", a.stats_every_n_steps);
  f("health_check_every_n_steps", a.health_check_every_n_steps);
  f("swa_divergence_every_n_steps", a.swa_divergence_every_n_steps);
  f("swa_group", a.swa_group);
  f("swa_window", a.swa_window);
  f("draft_group", a.draft_group);
  f("pool_slots", a.pool_slots);
  f("swa_pool_slots", a.swa_pool_slots);
  f("max_running_requests", a.max_running_requests);
  f("max_context_len", a.max_context_len);
  f("cuda_graph_max_bs", a.cuda_graph_max_bs);
  f("max_cached_prefixes", a.max_cached_prefixes);
  f("verify_capacity", a.verify_capacity);
  f("write_req_capacity", a.write_req_capacity);
  f("sweep_req_capacity", a.sweep_req_capacity);
  f("plan_algorithm", a.plan_algorithm);
  f("canary_algorithm", a.canary_algorithm);
  f("pump_snapshot", a.pump_snapshot);
  f("head_verify", a.head_verify);
  f("kv_records", a.kv_records);
}

CanaryConfigArgs default_canary_config();  // kvcanary::CanaryConfig{}'s values

constexpr int kCanaryGroups = 3;  // target, swa, draft (GroupKind)

struct GroupArgs {
  std::vector<SourceArgs> real_kv_k, real_kv_v;
  bool has_k = false, has_v = false;  // the engine's own canary bytes
  BufferArgs k, v;
};

struct CanaryTablesArgs {
  Mat<const std::int32_t> req_to_token;
  bool has_expected_tokens = false;
  Mat<const std::int32_t> expected_tokens;
  bool has_lut = false;
  Vec<const std::int64_t> lut;
  std::array<GroupArgs, kCanaryGroups> groups;
};

struct TokensArgs {
  Vec<const std::int64_t> input_ids, positions, out_cache_loc;
  bool has_expected = false;
  Vec<const std::int64_t> expected_input_ids, expected_positions;
};

struct BatchArgs {
  Vec<const std::int64_t> req_pool_indices, prefix_lens, extend_seq_lens;
  bool has_valid_lens = false;
  Vec<const std::int64_t> valid_lens;
  std::array<bool, kCanaryGroups> has_tokens{};
  std::array<TokensArgs, kCanaryGroups> tokens;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Vec<const std::int64_t> identities;
};

struct CachedArgs {
  Vec<const std::int64_t> pool_rows, lengths;
  bool has_valid_lens = false;
  Vec<const std::int64_t> valid_lens;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Vec<const std::int64_t> identities;
};

// kvcanary::RuntimeReport, flattened: the violations as read_report's Report, groups as GroupKind ints.
struct CanaryReport {
  std::int64_t step = -1;
  Report violations;
  std::vector<int> row_groups, overflowed_groups;
  std::vector<std::string> warnings, health_errors, info;
};

// Raise mode's errors (kvcanary::ViolationError, CanaryNotRunningError); the report is last_report().
struct ViolationRaised : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotRunningRaised : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CanaryBase;  // core_canary.cpp: one kvcanary::Canary<Space>

// One kvcanary::Canary on one place. The constructor checks and allocates (never inside a CUDA capture);
// the passes are asynchronous on CUDA, finished on return on the host. After kvcanary.finalize() every
// call throws std::runtime_error.
class CanaryHandle {
 public:
  CanaryHandle(const Place& place, const CanaryConfigArgs& config, const CanaryTablesArgs& tables);
  ~CanaryHandle();
  CanaryHandle(const CanaryHandle&) = delete;
  CanaryHandle& operator=(const CanaryHandle&) = delete;

  void before_forward(const BatchArgs& batch);
  void after_forward(const BatchArgs& batch);
  void sweep(const CachedArgs& cached);
  CanaryReport end_step(std::int64_t forwards);
  CanaryReport flush();
  CanaryReport rearm();
  CanaryReport last_report() const;
  void set_chain_position_assert(bool on);
  std::int64_t steps() const;
  std::int64_t sweeps() const;
  std::array<std::int64_t, 3> capacities() const;  // verify, write_req, sweep_req
  bool group_on(int group) const;
  const Place& place() const { return place_; }
  void release();  // finalize(): the Canary goes before Kokkos

 private:
  CanaryBase& live() const;
  Place place_;
  std::unique_ptr<CanaryBase> canary_;
};

}  // namespace python
}  // namespace kvcanary

#endif
