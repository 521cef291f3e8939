// kvcanary.Canary's Kokkos layer: one kvcanary::Canary<Space> (runtime/canary.hpp) over unmanaged Views
// of the engine's arrays, on the place chosen at construction (a host backend, or one CUDA stream).
// module.cpp has checked every Python-boundary rule; the Canary's own checks throw std::invalid_argument.

#include "core_canary.hpp"
#include "core_kokkos.hpp"

#include <kvcanary/runtime/canary.hpp>

#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

namespace kvcanary {
namespace python {

class CanaryBase {
 public:
  virtual ~CanaryBase() = default;
  virtual void before_forward(const BatchArgs& batch) = 0;
  virtual void after_forward(const BatchArgs& batch) = 0;
  virtual void sweep(const CachedArgs& cached) = 0;
  virtual RuntimeReport end_step(std::int64_t forwards) = 0;
  virtual RuntimeReport flush() = 0;
  virtual RuntimeReport rearm() = 0;
  virtual const RuntimeReport& last_report() const = 0;
  virtual void set_chain_position_assert(bool on) = 0;
  virtual std::int64_t steps() const = 0;
  virtual std::int64_t sweeps() const = 0;
  virtual Capacities capacities() const = 0;
  virtual bool group_on(GroupKind kind) const = 0;
};

namespace {

using namespace detail;

// to(c_field, args_field) for each field of the config that has one type on both sides; the enums are
// converted by the callers. C and A are const on the side copied from.
template <class C, class A, class F>
void same_typed_fields(C& c, A& a, F&& to) {
  to(c.keep_never_written, a.keep_never_written);
  to(c.ring_capacity, a.ring_capacity);
  to(c.pump_rows_per_step, a.pump_rows_per_step);
  to(c.sweep_interval, a.sweep_interval);
  to(c.sweep_swa_group, a.sweep_swa_group);
  to(c.tail_pass, a.tail_pass);
  to(c.write_input_assert, a.write_input_assert);
  to(c.verify_token_assert, a.verify_token_assert);
  to(c.chain_position_assert, a.chain_position_assert);
  to(c.request_identities, a.request_identities);
  to(c.stats_every_n_steps, a.stats_every_n_steps);
  to(c.health_check_every_n_steps, a.health_check_every_n_steps);
  to(c.swa_divergence_every_n_steps, a.swa_divergence_every_n_steps);
  to(c.swa_group, a.swa_group);
  to(c.swa_window, a.swa_window);
  to(c.draft_group, a.draft_group);
  to(c.dimensions.pool_slots, a.pool_slots);
  to(c.dimensions.swa_pool_slots, a.swa_pool_slots);
  to(c.dimensions.max_running_requests, a.max_running_requests);
  to(c.dimensions.max_context_len, a.max_context_len);
  to(c.dimensions.cuda_graph_max_bs, a.cuda_graph_max_bs);
  to(c.dimensions.max_cached_prefixes, a.max_cached_prefixes);
  to(c.capacities.verify_capacity, a.verify_capacity);
  to(c.capacities.write_req_capacity, a.write_req_capacity);
  to(c.capacities.sweep_req_capacity, a.sweep_req_capacity);
}

CanaryConfig canary_config(const CanaryConfigArgs& a) {
  CanaryConfig c;
  same_typed_fields(c, a, [](auto& to, const auto& from) { to = from; });
  c.report_mode = static_cast<ReportMode>(a.report_mode);
  c.report_format = a.multi_line ? ReportFormat::MultiLine : ReportFormat::OneLine;
  c.sink = a.sink;
  c.real_kv_mode = static_cast<RealKvMode>(a.real_kv_mode);
  c.plan_options.algorithm = a.plan_algorithm == 1   ? EntriesAlgorithm::Portable
                             : a.plan_algorithm == 2 ? EntriesAlgorithm::CudaPersistent
                                                     : EntriesAlgorithm::Default;
  c.canary_algorithm = a.canary_algorithm == 1   ? CanaryAlgorithm::Portable
                       : a.canary_algorithm == 2 ? CanaryAlgorithm::Cuda
                                                 : CanaryAlgorithm::Default;
  c.pump_snapshot = static_cast<PumpSnapshot>(a.pump_snapshot);  // the Python layer checked the values
  c.head_verify = static_cast<HeadVerify>(a.head_verify);
  c.kv_records = static_cast<KvRecords>(a.kv_records);
  return c;
}

template <class Mem>
GroupViews<Mem> group_views(const GroupArgs& a) {
  GroupViews<Mem> g;
  g.real_kv_k = real_kv_of<Mem>(RealKvArgs{0, a.real_kv_k}).sources;
  g.real_kv_v = real_kv_of<Mem>(RealKvArgs{0, a.real_kv_v}).sources;
  if (a.has_k) g.k = buffer_of<Mem>(a.k);
  if (a.has_v) g.v = buffer_of<Mem>(a.v);
  return g;
}

template <class Mem>
EngineTables<Mem> engine_tables(const CanaryTablesArgs& a) {
  EngineTables<Mem> t;
  t.req_to_token = in_mat<Mem>(a.req_to_token);
  if (a.has_expected_tokens) t.expected_tokens = in_mat<Mem>(a.expected_tokens);
  if (a.has_lut) t.full_to_swa_index_mapping = in_vec<Mem>(a.lut);
  t.target = group_views<Mem>(a.groups[0]);
  t.swa = group_views<Mem>(a.groups[1]);
  t.draft = group_views<Mem>(a.groups[2]);
  return t;
}

template <class Mem>
ForwardTokens<Mem> forward_tokens(const TokensArgs& a) {
  ForwardTokens<Mem> t;
  t.input_ids = in_vec<Mem>(a.input_ids);
  t.positions = in_vec<Mem>(a.positions);
  t.out_cache_loc = in_vec<Mem>(a.out_cache_loc);
  if (a.has_expected) {
    t.expected_input_ids = in_vec<Mem>(a.expected_input_ids);
    t.expected_positions = in_vec<Mem>(a.expected_positions);
  }
  return t;
}

template <class Mem>
ForwardBatch<Mem> forward_batch(const BatchArgs& a) {
  ForwardBatch<Mem> b;
  b.req_pool_indices = in_vec<Mem>(a.req_pool_indices);
  b.prefix_lens = in_vec<Mem>(a.prefix_lens);
  b.extend_seq_lens = in_vec<Mem>(a.extend_seq_lens);
  if (a.has_valid_lens) b.expected_tokens_valid_lens = in_vec<Mem>(a.valid_lens);
  b.tokens = forward_tokens<Mem>(a.tokens[0]);
  if (a.has_tokens[1]) b.swa_tokens = forward_tokens<Mem>(a.tokens[1]);
  if (a.has_tokens[2]) b.draft_tokens = forward_tokens<Mem>(a.tokens[2]);
  if (a.has_identities) b.identities = in_vec<Mem>(a.identities);
  return b;
}

template <class Mem>
CachedPrefixes<Mem> cached_prefixes(const CachedArgs& a) {
  CachedPrefixes<Mem> c;
  c.pool_rows = in_vec<Mem>(a.pool_rows);
  c.lengths = in_vec<Mem>(a.lengths);
  if (a.has_valid_lens) c.expected_tokens_valid_lens = in_vec<Mem>(a.valid_lens);
  if (a.has_identities) c.identities = in_vec<Mem>(a.identities);
  return c;
}

// The CUDA device current around a call of a CUDA Canary; nothing on the host.
struct PlaceGuard {
#ifdef KOKKOS_ENABLE_CUDA
  explicit PlaceGuard(const Place& place) : guard(place.cuda ? place.device_id : -1) {}
  DeviceGuard guard;
#else
  explicit PlaceGuard(const Place&) {}
#endif
};

template <class Space>
class CanaryOn final : public CanaryBase {
 public:
  CanaryOn(const Space& space, CanaryConfig config, EngineTables<typename Space::memory_space> tables)
      : canary_(space, std::move(config), std::move(tables)) {}
  using Mem = typename Space::memory_space;
  void before_forward(const BatchArgs& b) override {
    on_this_thread([&] { canary_.before_forward(forward_batch<Mem>(b)); });
  }
  void after_forward(const BatchArgs& b) override {
    on_this_thread([&] { canary_.after_forward(forward_batch<Mem>(b)); });
  }
  void sweep(const CachedArgs& c) override {
    on_this_thread([&] { canary_.sweep(cached_prefixes<Mem>(c)); });
  }
  RuntimeReport end_step(std::int64_t forwards) override {
    return on_this_thread([&] { return canary_.end_step(forwards); });
  }
  RuntimeReport flush() override {
    return on_this_thread([&] { return canary_.flush(); });
  }
  RuntimeReport rearm() override {
    return on_this_thread([&] { return canary_.rearm(); });
  }
  const RuntimeReport& last_report() const override { return canary_.last_report(); }
  void set_chain_position_assert(bool on) override { canary_.set_chain_position_assert(on); }
  std::int64_t steps() const override { return canary_.steps(); }
  std::int64_t sweeps() const override { return canary_.sweeps(); }
  Capacities capacities() const override { return canary_.capacities(); }
  bool group_on(GroupKind kind) const override { return canary_.group_on(kind); }

 private:
  // A host Canary runs one host call at a time (host_mutex), on a thread that can drive its space, and
  // has finished when the call returns (the caller's numpy arrays hold the records).
  template <class F>
  auto on_this_thread(F&& f) {
    if constexpr (std::is_same<Mem, Kokkos::HostSpace>::value) {
#ifdef KOKKOS_ENABLE_OPENMP
      if constexpr (std::is_same<Space, Kokkos::OpenMP>::value)
        require_openmp_here("kvcanary.Canary: this Canary",
                            "build it with backend='serial' to drive it from any thread or process");
#endif
      std::lock_guard<std::mutex> lock(host_mutex());
      struct Fence {
        ~Fence() { Space().fence(); }
      } fence;
      return f();
    } else {
      return f();
    }
  }
  Canary<Space> canary_;
};

CanaryReport flat(const RuntimeReport& r) {
  CanaryReport out;
  out.step = r.step;
  out.violations = flatten(r.violations);
  for (const GroupKind g : r.row_groups) out.row_groups.push_back(static_cast<int>(g));
  for (const GroupKind g : r.overflowed_groups) out.overflowed_groups.push_back(static_cast<int>(g));
  out.warnings = r.warnings;
  out.health_errors = r.health_errors;
  out.info = r.info;
  return out;
}

// The report calls copy and wait: never inside a CUDA capture (the passes may be captured).
void not_capturing(const Place& place, const char* call) {
#ifdef KOKKOS_ENABLE_CUDA
  if (place.cuda && capturing(place.stream))
    runtime(std::string("Canary.") + call + "() copies and waits, so it runs between steps, never inside a CUDA-graph capture");
#else
  (void)place;
  (void)call;
#endif
}

// Raise mode's C++ errors as the module's own (translated to kvcanary's Python exceptions).
template <class F>
CanaryReport reporting(F&& f) {
  try {
    return flat(f());
  } catch (const CanaryNotRunningError& e) {
    throw NotRunningRaised(e.what());
  } catch (const ViolationError& e) {
    throw ViolationRaised(e.what());
  }
}

std::mutex live_mutex;
std::set<CanaryHandle*>& live_handles() {
  static std::set<CanaryHandle*> handles;
  return handles;
}

}  // namespace

CanaryConfigArgs default_canary_config() {
  const CanaryConfig c;
  CanaryConfigArgs a;
  same_typed_fields(c, a, [](const auto& from, auto& to) { to = from; });
  a.report_mode = static_cast<int>(c.report_mode);
  a.multi_line = c.report_format == ReportFormat::MultiLine;
  a.real_kv_mode = static_cast<int>(c.real_kv_mode);
  a.plan_algorithm = static_cast<int>(c.plan_options.algorithm);
  a.canary_algorithm = static_cast<int>(c.canary_algorithm);
  a.pump_snapshot = static_cast<int>(c.pump_snapshot);
  a.head_verify = static_cast<int>(c.head_verify);
  a.kv_records = static_cast<int>(c.kv_records);
  return a;
}

CanaryHandle::CanaryHandle(const Place& place, const CanaryConfigArgs& config, const CanaryTablesArgs& tables)
    : place_(place) {
  on_place(place, [&](const auto& space, auto memory_space) {
    using Space = std::decay_t<decltype(space)>;
    using Mem = decltype(memory_space);
    static_assert(std::is_same<Mem, typename Space::memory_space>::value, "a Canary's Views are its space's");
    // Construction allocates and fences: never inside a capture.
    not_capturing(place, "__init__");
    canary_ = std::make_unique<CanaryOn<Space>>(space, canary_config(config), engine_tables<Mem>(tables));
  });
  std::lock_guard<std::mutex> lock(live_mutex);
  live_handles().insert(this);
}

CanaryHandle::~CanaryHandle() {
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live_handles().erase(this);
  }
  if (canary_) release();
}

void CanaryHandle::release() {
  if (forked_child()) {  // no CUDA call in a forked child: a CUDA Canary's state is left to the parent
    if (place_.cuda) (void)canary_.release();
    else canary_.reset();
    return;
  }
  PlaceGuard guard(place_);
  canary_.reset();
}

CanaryBase& CanaryHandle::live() const {
  if (!canary_) runtime("Canary used after kvcanary.finalize()");
  return *canary_;
}

void CanaryHandle::before_forward(const BatchArgs& batch) {
  CanaryBase& c = live();
  PlaceGuard guard(place_);
  c.before_forward(batch);
}

void CanaryHandle::after_forward(const BatchArgs& batch) {
  CanaryBase& c = live();
  PlaceGuard guard(place_);
  c.after_forward(batch);
}

void CanaryHandle::sweep(const CachedArgs& cached) {
  CanaryBase& c = live();
  PlaceGuard guard(place_);
  c.sweep(cached);
}

CanaryReport CanaryHandle::end_step(std::int64_t forwards) {
  CanaryBase& c = live();
  not_capturing(place_, "end_step");
  PlaceGuard guard(place_);
  return reporting([&] { return c.end_step(forwards); });
}

CanaryReport CanaryHandle::flush() {
  CanaryBase& c = live();
  not_capturing(place_, "flush");
  PlaceGuard guard(place_);
  return reporting([&] { return c.flush(); });
}

CanaryReport CanaryHandle::rearm() {
  CanaryBase& c = live();
  not_capturing(place_, "rearm");
  PlaceGuard guard(place_);
  return reporting([&] { return c.rearm(); });
}

CanaryReport CanaryHandle::last_report() const { return flat(live().last_report()); }

void CanaryHandle::set_chain_position_assert(bool on) {
  CanaryBase& c = live();
  not_capturing(place_, "set_chain_position_assert");
  PlaceGuard guard(place_);
  c.set_chain_position_assert(on);
}

std::int64_t CanaryHandle::steps() const { return live().steps(); }
std::int64_t CanaryHandle::sweeps() const { return live().sweeps(); }

std::array<std::int64_t, 3> CanaryHandle::capacities() const {
  const Capacities c = live().capacities();
  return {c.verify_capacity, c.write_req_capacity, c.sweep_req_capacity};
}

bool CanaryHandle::group_on(int group) const { return live().group_on(static_cast<GroupKind>(group)); }

namespace detail {

void release_canaries() {
  std::lock_guard<std::mutex> lock(live_mutex);
  for (CanaryHandle* handle : live_handles()) handle->release();
}

}  // namespace detail

}  // namespace python
}  // namespace kvcanary
