// CanaryConfig's derived capacities and checks (runtime/config.hpp).

#include <kvcanary/runtime/config.hpp>

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <algorithm>
#include <limits>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace kvcanary {

namespace {

constexpr const char* kWhere = "Canary";
// The largest buffer extent the runtime allocates (entries of 8 bytes): 2^40 keeps every byte count inside int64.
constexpr std::int64_t kMaxExtent = std::int64_t(1) << 40;

void check_positive(const char* name, std::int64_t value) {
  if (value <= 0) Impl::throw_invalid_in(kWhere, name, " is ", value, ", must be > 0");
  if (value > kMaxExtent) Impl::throw_invalid_in(kWhere, name, " is ", value, ", must be <= 2^40");
}

void check_non_negative(const char* name, std::int64_t value) {
  if (value < 0) Impl::throw_invalid_in(kWhere, name, " is ", value, ", must be >= 0");
  if (value > kMaxExtent) Impl::throw_invalid_in(kWhere, name, " is ", value, ", must be <= 2^40");
}

// -1: derived; anything else must be a positive size.
std::int64_t pick(const char* name, std::int64_t given, std::int64_t derived) {
  if (given == -1) return derived;
  check_positive(name, given);
  return given;
}

}  // namespace

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::Target: return "target";
    case GroupKind::Swa: return "swa";
    case GroupKind::Draft: return "draft";
  }
  return "unknown";
}

Capacities derive_capacities(const CanaryConfig& config) {
  const EngineDimensions& d = config.dimensions;
  check_positive("dimensions.pool_slots", d.pool_slots);
  check_non_negative("dimensions.swa_pool_slots", d.swa_pool_slots);
  check_positive("dimensions.max_running_requests", d.max_running_requests);
  check_positive("dimensions.max_context_len", d.max_context_len);
  check_non_negative("dimensions.cuda_graph_max_bs", d.cuda_graph_max_bs);
  check_non_negative("dimensions.max_cached_prefixes", d.max_cached_prefixes);
  const std::int64_t largest_pool = std::max(d.pool_slots, d.swa_pool_slots);
  Capacities c;
  c.verify_capacity = pick("capacities.verify_capacity", config.capacities.verify_capacity, 3 * largest_pool);
  c.write_req_capacity = pick("capacities.write_req_capacity", config.capacities.write_req_capacity,
                              std::max(d.cuda_graph_max_bs, d.max_running_requests));
  c.sweep_req_capacity = pick("capacities.sweep_req_capacity", config.capacities.sweep_req_capacity,
                              d.max_cached_prefixes > 0 ? d.max_cached_prefixes : d.max_running_requests);
  return c;
}

void validate_config(const CanaryConfig& config) {
  derive_capacities(config);
  check_non_negative("ring_capacity", config.ring_capacity);
  check_positive("pump_rows_per_step", config.pump_rows_per_step);
  check_non_negative("sweep_interval", config.sweep_interval);
  check_non_negative("stats_every_n_steps", config.stats_every_n_steps);
  check_non_negative("health_check_every_n_steps", config.health_check_every_n_steps);
  check_non_negative("swa_divergence_every_n_steps", config.swa_divergence_every_n_steps);
  const auto mode = static_cast<std::int32_t>(config.real_kv_mode);
  if (mode < 0 || mode > static_cast<std::int32_t>(RealKvMode::All))
    Impl::throw_invalid_in(kWhere, "real_kv_mode is ", mode, ", must be 0 (none), 1 (partial) or 2 (all)");
  const auto pump = static_cast<std::int32_t>(config.pump_snapshot);
  if (pump < 0 || pump > static_cast<std::int32_t>(PumpSnapshot::WithNextPlan))
    Impl::throw_invalid_in(kWhere, "pump_snapshot is ", pump,
                           ", must be 0 (default), 1 (side-stream copies), 2 (kernel), 3 (in graph), 4 (beside the "
                           "forward) or 5 (with the next plan)");
  const auto records = static_cast<std::int32_t>(config.kv_records);
  if (records < 0 || records > static_cast<std::int32_t>(KvRecords::Interleaved))
    Impl::throw_invalid_in(kWhere, "kv_records is ", records, ", must be 0 (default), 1 (separate) or 2 (interleaved)");
  // The head write stamps the fingerprint of the bytes before the model writes them; only the tail's
  // re-stamp makes the next head's real-KV check meaningful.
  if (config.real_kv_mode != RealKvMode::None && !config.tail_pass)
    Impl::throw_invalid_in(kWhere, "real_kv_mode is not none but tail_pass is off (real-KV fingerprints are "
                                   "stamped by the tail, after the model writes the KV)");
  if (config.swa_group && config.swa_window <= 0)
    Impl::throw_invalid_in(kWhere, "swa_group is on but swa_window is ", config.swa_window, ", must be > 0");
  if (!config.swa_group && config.swa_window != 0)
    Impl::throw_invalid_in(kWhere, "swa_window is ", config.swa_window, " but swa_group is off");
  if (config.swa_divergence_every_n_steps > 0 && !config.swa_group)
    Impl::throw_invalid_in(kWhere, "swa_divergence_every_n_steps is ", config.swa_divergence_every_n_steps,
                           " but swa_group is off");
}

Footprint group_footprint(const CanaryConfig& config, const Capacities& capacities, std::int64_t slots,
                          bool owns_records) {
  constexpr std::int64_t word = 8;
  const std::int64_t identity = config.request_identities ? 1 : 0;
  Footprint f;
  f.records = owns_records ? 2 * slots * kRecordBytes : 0;  // K and V
  f.plans = capacities.verify_capacity * (4 + identity) * word +
            (capacities.write_req_capacity * (2 + identity) + 1) * word +
            (capacities.sweep_req_capacity * (2 + identity) + 1) * word;
  f.rings = 2 * config.ring_capacity * kRingFields * word;  // device rows and their host copy
  f.other = (capacities.write_req_capacity + capacities.sweep_req_capacity + 2) * word;  // the workspaces
  return f;
}

void require_host_memory(const Footprint& footprint) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const std::int64_t machine = static_cast<std::int64_t>(pages) * static_cast<std::int64_t>(page);
  if (footprint.total() > machine)
    Impl::throw_invalid_in(kWhere, "its buffers need ", footprint.total(), " bytes of host memory (canary records ",
                           footprint.records, ", plans ", footprint.plans, ", ring rows ", footprint.rings, ", other ",
                           footprint.other, "), this machine has ", machine);
#else
  (void)footprint;
#endif
}

}  // namespace kvcanary
