#ifndef KVCANARY_RUNTIME_CANARY_HPP
#define KVCANARY_RUNTIME_CANARY_HPP

// kvcanary::Canary<ExecutionSpace>: the engine-facing runtime (docs/runtime.md). It owns every buffer
// of the canary (allocated once, labelled; or wraps the engine's canary bytes), runs the passes of a
// forward step on the engine's execution-space instance, and pumps the violation rings to the host
// asynchronously at the step boundary.
//
//   kvcanary::Canary<Space> canary(space, config, tables);   // allocates everything
//   each step:
//     canary.before_forward(batch);   // plan + head verify (K and V in one call) + head write, every group
//     ... the model writes the KV cache ...
//     canary.after_forward(batch);    // tail verify + re-stamp with real-KV fingerprints (tail_pass)
//     if (due) canary.sweep(cached);  // verify-only pass over the prefix cache (sweep_interval)
//     canary.end_step();              // asynchronous report pump; reports the previous step's snapshot
//   canary.flush();                   // at shutdown: synchronous, every row
//
// before_forward(), after_forward() and sweep() are asynchronous on `space`, allocate nothing, copy
// nothing between host and device and never fence: they can be captured in a CUDA graph and replayed
// with the batch refilled in place. end_step() and flush() are the host boundary, never inside a capture.
// With PumpSnapshot::InGraph the forward's last pass also writes the pump's snapshot into a pinned host
// mailbox (a kernel's stores, no copy call), and end_step() reads it with plain loads; with
// PumpSnapshot::BesideForward a kernel on a branch of the stream writes it while the model's forward runs.

#include <kvcanary/runtime/config.hpp>
#include <kvcanary/runtime/engine_views.hpp>
#include <kvcanary/runtime/impl/counter_block.hpp>
#include <kvcanary/runtime/impl/defaults.hpp>
#include <kvcanary/runtime/impl/pump_in_graph.hpp>
#include <kvcanary/runtime/impl/pump_in_plan.hpp>
#include <kvcanary/runtime/impl/pump_in_write.hpp>
#include <kvcanary/runtime/impl/pump_snapshot.hpp>
#include <kvcanary/runtime/impl/side_channel.hpp>
#include <kvcanary/runtime/impl/swa_divergence.hpp>
#include <kvcanary/runtime/report_text.hpp>
#include <kvcanary/runtime/runtime_report.hpp>
#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan.hpp>
#include <kvcanary/stages/plan_and_verify.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/report.hpp>
#include <kvcanary/stages/verify.hpp>
#include <kvcanary/stages/write.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kvcanary {

template <class ExecutionSpace>
class Canary {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::Canary: the template argument must be a Kokkos execution space");

 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using Memory = memory_space;

  Canary(const ExecutionSpace& space, CanaryConfig config, EngineTables<Memory> tables)
      : space_(space),
        config_(std::move(config)),
        pump_(Impl::resolve<ExecutionSpace>(config_.pump_snapshot)),
        tables_(std::move(tables)),
        side_(space) {
    validate_config(config_);
    capacities_ = derive_capacities(config_);
    check_tables();
    check_host_footprint();
    allocate();
  }

  Canary(const Canary&) = delete;
  Canary& operator=(const Canary&) = delete;

  ~Canary() {
    // Copies still in flight read our Views: let them finish before the Views go.
    if (pending_) side_.wait();
    // An in-graph snapshot still in flight writes the mailbox (beside the forward: on the side stream).
    if (in_graph()) space_.fence();
    if (beside_forward()) side_.drain();
  }

  // ---- passes (asynchronous, no allocation, copy or fence; capturable) ----

  // Every group: plan, then the head verify of K and V in one call, then the head write of K and V.
  void before_forward(const ForwardBatch<Memory>& batch) {
    check_batch(batch);
    if (config_.swa_divergence_every_n_steps > 0) last_batch_ = batch;
    Kokkos::Profiling::pushRegion("kvcanary::Canary::before_forward");
    join_branch();  // a previous forward's branch, when its after_forward() was not called
    // On the in-graph route the snapshot goes with the forward's last canary pass: this one's last write unless
    // a tail pass follows.
    const int last = in_last_pass() && !config_.tail_pass ? last_written([](const Group& g) { return g.on; }) : -1;
    for (Group& g : groups_) {
      if (!g.on) continue;
      const HeadVerify route = head_verify_route(g, batch.req_pool_indices.extent(0));
      const PlanInputs<Memory> inputs = plan_inputs(g, batch);
      const ViolationRing<Memory>& ring = g.ring_for(Stage::Verify, g.head_targets[0].kernel_kind);
      if (!(carries_snapshot(g) && mail_with_plan(route, g, inputs, ring)))
        plan_and_check(route, inputs, g.head_plan, g.write_plan, g.status, g.workspace, g.head_targets, ring);
      write_k_and_v(g, step_tokens(tokens_of(g, batch)), g.head_write, g.index == last);
    }
    if (beside_forward())
      fork_snapshot();
    else if (in_last_pass() && !config_.tail_pass && last < 0)  // no group is on
      Impl::launch_pump_in_graph(space_, in_graph_kernel_);
    Kokkos::Profiling::popRegion();
  }

  // The groups with real-KV sources (tail_pass): verify the step's prefixes against the bytes the model
  // left, then re-stamp the step's tokens with their fingerprints. Nothing else when tail_pass is off, but
  // the end of the snapshot's branch with PumpSnapshot::BesideForward.
  void after_forward(const ForwardBatch<Memory>& batch) {
    join_branch();
    if (!config_.tail_pass) return;
    check_batch(batch);
    Kokkos::Profiling::pushRegion("kvcanary::Canary::after_forward");
    const int last = in_last_pass() ? last_written([](const Group& g) { return g.on && g.tail; }) : -1;
    for (Group& g : groups_) {
      if (!g.on || !g.tail) continue;
      verify(space_, g.head_plan, g.tail_targets, g.ring_for(Stage::Verify, g.tail_targets[0].kernel_kind),
             verify_options());
      write_k_and_v(g, step_tokens(tokens_of(g, batch)), g.tail_write, g.index == last);
    }
    if (in_last_pass() && last < 0) Impl::launch_pump_in_graph(space_, in_graph_kernel_);  // no group writes a tail
    Kokkos::Profiling::popRegion();
  }

  // A verify-only pass over the prefix cache: a plan of (pool row, length) with nothing to write, on the
  // target and SWA groups (the draft group is not swept), SWEEP tags, by CanaryConfig::head_verify's route (its
  // Default: the large batches' route, Impl::RuntimeDefaults). It reuses the groups' verify arrays: call it after
  // after_forward() and before the next before_forward() (the original's place).
  void sweep(const CachedPrefixes<Memory>& cached) {
    check_cached(cached);
    Kokkos::Profiling::pushRegion("kvcanary::Canary::sweep");
    join_branch();  // only when the engine did not call after_forward()
    for (Group& g : groups_) {
      if (!swept(g)) continue;
      plan_and_check(Impl::resolve_sweep<ExecutionSpace>(config_.head_verify), sweep_inputs(g, cached), g.sweep_plan,
                     g.sweep_write_plan, g.sweep_status, g.sweep_workspace, g.sweep_targets,
                     g.ring_for(Stage::Verify, g.sweep_targets[0].kernel_kind));
    }
    ++sweeps_;
    add_expected(sweep_launches_, 1);
    Kokkos::Profiling::popRegion();
  }

  // ---- the host boundary ----

  // The end of a step that ran `forwards` forward passes (before_forward + after_forward, executed or
  // replayed) since the previous end_step(). Reads the snapshot the previous end_step() staged (waiting
  // only if its small copy has not finished), stages this step's snapshot on the side stream, and reports:
  // violations (per report_mode), warnings, the health check and the periodic lines. Throws
  // ViolationError or CanaryNotRunningError in ReportMode::Raise, after the next snapshot is staged.
  // With PumpSnapshot::InGraph it instead reads the newest snapshot the forwards left in the mailbox (no CUDA
  // call; end_step_in_graph()).
  RuntimeReport end_step(std::int64_t forwards = 1) {
    if (forwards < 0) Impl::throw_invalid_in("Canary::end_step", "forwards is ", forwards, ", must be >= 0");
    join_branch();  // only when the engine did not call after_forward()
    if (in_graph()) return end_step_in_graph(forwards);
    RuntimeReport report;
    if (pending_) {
      side_.wait();
      pending_ = false;
      process(pending_snapshot_, report, /*checks=*/true, step_ + 1);
    }
    ++step_;
    forwards_ += forwards;
    add_expected(forward_launches_, forwards);
    maybe_launch_swa_divergence();
    issue_snapshot(forwards);
    deliver_report(report);
    return report;
  }

  // Waits for the device, then reports every row not yet reported (the ring is read until caught up).
  // For shutdown and tests; it fences.
  RuntimeReport flush() {
    RuntimeReport report;
    join_branch();
    if (in_graph()) {
      // The newest forward's snapshot with its checks, then the ring read by the copies below.
      space_.fence();
      read_in_graph(report, step_, /*fenced=*/true);
      check_lag_at_flush(report);
    }
    if (pending_) {
      side_.wait();
      pending_ = false;
      process(pending_snapshot_, report, /*checks=*/true, step_);
    }
    for (int round = 0; round < 1 + max_rounds(); ++round) {
      issue_snapshot(0);
      side_.wait();
      pending_ = false;
      process(pending_snapshot_, report, /*checks=*/false, step_);
      if (caught_up()) break;
    }
    update_row_cursors();
    deliver_report(report);
    return report;
  }

  // flush(), then empties every ring (count 0: the next violations take its first rows again), so that a
  // long run keeps every violation's row as long as it rearms before the ring fills (a simulator, a test
  // harness). Synchronous: it fences; the run counters are untouched.
  RuntimeReport rearm() {
    RuntimeReport report = flush();
    for (Group& g : groups_) {
      if (!g.on) continue;
      Kokkos::deep_copy(space_, int64_view(g.index, Block::kCount), std::int64_t(0));
      // Rows are 0 until pushed: the next-plan snapshot takes a row with its bits set as whole (pump_in_plan.hpp).
      Kokkos::deep_copy(space_, g.rows, std::int64_t(0));
      g.rows_valid = g.window_end = 0;
      g.last_lost = 0;
    }
    update_row_cursors();
    space_.fence();
    return report;
  }

  // The device flag of the write's chain-position assert (off during an engine's warmup with synthetic
  // positions). Asynchronous on the engine's instance; not inside a capture.
  void set_chain_position_assert(bool on) { Kokkos::deep_copy(space_, chain_assert_, on ? 1 : 0); }

  // ---- for tests, tools and bindings ----
  // What the last end_step() or flush() reported (also when it threw).
  const RuntimeReport& last_report() const { return last_report_; }
  const CanaryConfig& config() const { return config_; }
  // The report pump's route: config().pump_snapshot, Default resolved (WithNextPlan on CUDA, else SideStreamCopies).
  PumpSnapshot pump_snapshot() const { return pump_; }
  const Capacities& capacities() const { return capacities_; }
  std::int64_t steps() const { return step_; }
  std::int64_t sweeps() const { return sweeps_; }
  bool group_on(GroupKind kind) const { return groups_[static_cast<int>(kind)].on; }
  const CanaryBuffer<Memory>& k_buffer(GroupKind kind) const { return groups_[static_cast<int>(kind)].k; }
  const CanaryBuffer<Memory>& v_buffer(GroupKind kind) const { return groups_[static_cast<int>(kind)].v; }
  // The group's ring with the counters of one (stage, tag); rows and count are the group's.
  ViolationRing<Memory> ring(GroupKind kind) const { return groups_[static_cast<int>(kind)].rows_ring; }
  // Its verify arrays hold this step's entries only on the FromPlan route (head_verify_route()).
  const VerifyPlan<Memory>& verify_plan(GroupKind kind) const { return groups_[static_cast<int>(kind)].head_plan; }
  const WritePlan<Memory>& write_plan(GroupKind kind) const { return groups_[static_cast<int>(kind)].write_plan; }
  // The device block of counters (runtime/impl/counter_block.hpp), for tests.
  Kokkos::View<std::int64_t*, Memory> counter_block() const { return block_; }

 private:
  using Stage = Impl::CounterStage;
  using Block = Impl::CounterBlock;
  using HostSpace = typename Impl::SideChannel<ExecutionSpace>::host_space;
  using Rows = Kokkos::View<std::int64_t* [kRingFields], Kokkos::LayoutRight, Memory>;
  using HostRows = Kokkos::View<std::int64_t* [kRingFields], Kokkos::LayoutRight, HostSpace>;

  using Counts = std::array<std::int64_t, Block::kSize>;

  struct WritePass {
    std::vector<WriteTarget<Memory>> targets;  // K, V
  };

  struct Group {
    bool on = false;
    bool tail = false;
    GroupKind kind = GroupKind::Target;
    int index = 0;
    VerifyPlan<Memory> head_plan, sweep_plan;
    WritePlan<Memory> write_plan, sweep_write_plan;
    PlanStatus<Memory> status, sweep_status;
    PlanWorkspace<Memory> workspace, sweep_workspace;
    CanaryBuffer<Memory> k, v;
    std::vector<VerifyTarget<Memory>> head_targets, tail_targets, sweep_targets;
    WritePass head_write, tail_write;
    Rows rows;
    ViolationRing<Memory> rows_ring;  // rows + count, counters of HEAD verify (for ring())
    std::array<ViolationRing<Memory>, Impl::kCounterStages * kKernelKinds> rings;  // per (stage, tag)
    // host side of the pump
    HostRows host_rows;
    std::int64_t rows_valid = 0;   // rows [0, rows_valid) copied and reported
    std::int64_t window_end = 0;   // the staged window [rows_valid, window_end)
    std::uint64_t last_lost = 0;   // rows_lost() at the last read
    std::int64_t head_disabled = 0, sweep_disabled = 0;

    const ViolationRing<Memory>& ring_for(Stage stage, KernelKind kind) const {
      return rings[static_cast<int>(stage) * kKernelKinds + static_cast<int>(kind)];
    }
  };

  struct Snapshot {
    std::int64_t step = 0, forwards = 0, forwards_total = 0, sweeps = 0;
    bool swa_divergence = false;
    std::int64_t divergence_forwards = 0;  // the forward count when the SWA divergence kernel it reads ran
    Counts expected{};  // kernel runs launched, per block index
  };

  // ---- construction ----

  void check_tables() const {
    constexpr const char* kWhere = "Canary";
    const auto& d = config_.dimensions;
    const auto rows = static_cast<std::int64_t>(tables_.req_to_token.extent(0));
    const auto cols = static_cast<std::int64_t>(tables_.req_to_token.extent(1));
    if (rows != d.max_running_requests || cols != d.max_context_len)
      Impl::throw_invalid_in(kWhere, "tables.req_to_token is [", rows, ", ", cols, "], dimensions say [",
                             d.max_running_requests, ", ", d.max_context_len, "]");
    if (config_.verify_token_assert != tables_.expected_tokens.has_value())
      Impl::throw_invalid_in(kWhere, "verify_token_assert is ", config_.verify_token_assert ? "on" : "off",
                             " but tables.expected_tokens is ", tables_.expected_tokens ? "given" : "absent");
    if (config_.swa_group != tables_.full_to_swa_index_mapping.has_value())
      Impl::throw_invalid_in(kWhere, "swa_group is ", config_.swa_group ? "on" : "off",
                             " but tables.full_to_swa_index_mapping is ",
                             tables_.full_to_swa_index_mapping ? "given" : "absent");
    for (int g = 0; g < kGroupKinds; ++g) {
      const GroupViews<Memory>& views = group_views(static_cast<GroupKind>(g));
      const char* name = group_kind_name(static_cast<GroupKind>(g));
      if (!enabled(static_cast<GroupKind>(g))) {
        if (views.k || views.v || !views.real_kv_k.empty() || !views.real_kv_v.empty())
          Impl::throw_invalid_in(kWhere, "tables.", name, " has buffers or real-KV sources but the group is off");
        continue;
      }
      if (views.k.has_value() != views.v.has_value())
        Impl::throw_invalid_in(kWhere, "tables.", name, ": give both canary buffers k and v, or neither");
      const std::int64_t slots = group_slots(static_cast<GroupKind>(g));
      for (const auto* buffer : {&views.k, &views.v})
        if (*buffer && (*buffer)->num_slots() != slots)
          Impl::throw_invalid_in(kWhere, "tables.", name, " canary buffer has ", (*buffer)->num_slots(),
                                 " slots, the group's pool has ", slots);
    }
  }

  // The groups sweep() verifies: the target's, and the SWA group's unless config.sweep_swa_group is off.
  bool swept(const Group& g) const {
    return g.on && (g.kind == GroupKind::Target || (g.kind == GroupKind::Swa && config_.sweep_swa_group));
  }

  bool enabled(GroupKind kind) const {
    return kind == GroupKind::Target || (kind == GroupKind::Swa && config_.swa_group) ||
           (kind == GroupKind::Draft && config_.draft_group);
  }
  const GroupViews<Memory>& group_views(GroupKind kind) const {
    return kind == GroupKind::Target ? tables_.target : kind == GroupKind::Swa ? tables_.swa : tables_.draft;
  }
  std::int64_t group_slots(GroupKind kind) const {
    const auto& d = config_.dimensions;
    return kind == GroupKind::Swa && d.swa_pool_slots > 0 ? d.swa_pool_slots : d.pool_slots;
  }

  static std::string label(const char* group, const char* what) {
    return std::string("kvcanary::Canary::") + group + "::" + what;
  }

  // Host memory only: a device allocation that does not fit fails cleanly (an exception from Kokkos).
  void check_host_footprint() const {
    if (!std::is_same<Memory, Kokkos::HostSpace>::value) return;
    Footprint all;
    all.other = (3 * Block::kSize + capacities_.sweep_req_capacity) * 8;  // counters, staging, host copy, sweep zeros
    if (in_graph()) all.other += Impl::MailboxLayout::kSlots * mailbox_layout().slot_words() * 8;
    for (int gi = 0; gi < kGroupKinds; ++gi) {
      const auto kind = static_cast<GroupKind>(gi);
      if (!enabled(kind)) continue;
      const GroupViews<Memory>& views = group_views(kind);
      all += group_footprint(config_, capacities_, group_slots(kind), !views.k || !views.v);
    }
    require_host_memory(all);
  }

  void allocate() {
    block_ = Kokkos::View<std::int64_t*, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::counters"),
                                                 Block::kSize);
    staging_ = Kokkos::View<std::int64_t*, Memory>(
        Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kvcanary::Canary::counters_staging"), Block::kSize);
    host_block_ = Kokkos::View<std::int64_t*, HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kvcanary::Canary::counters_host"), Block::kSize);
    chain_assert_ = Kokkos::View<std::int32_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::chain_position_assert"));
    Kokkos::deep_copy(space_, chain_assert_, config_.chain_position_assert ? 1 : 0);
    sweep_zeros_ = Kokkos::View<std::int64_t*, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::sweep_extend_lens"),
                                                       capacities_.sweep_req_capacity);
    // Plan scalars start "enabled", so that a snapshot before the first pass warns of nothing.
    for (int g = 0; g < kGroupKinds; ++g)
      for (const int flag : {Block::kHeadEnable, Block::kSweepEnable}) Kokkos::deep_copy(space_, int32_view(g, flag), 1);

    for (int gi = 0; gi < kGroupKinds; ++gi) {
      const auto kind = static_cast<GroupKind>(gi);
      Group& g = groups_[gi];
      g.kind = kind;
      g.index = gi;
      if (!enabled(kind)) continue;
      g.on = true;
      const char* name = group_kind_name(kind);
      const GroupViews<Memory>& views = group_views(kind);
      const std::int64_t slots = group_slots(kind);
      if (!views.k && !views.v && Impl::resolve<ExecutionSpace>(config_.kv_records) == KvRecords::Interleaved) {
        const auto kv = Impl::allocate_interleaved_kv_buffers(space_, slots, label(name, "kv_canary"));
        g.k = kv[0];
        g.v = kv[1];
      } else {
        g.k = views.k ? *views.k : allocate_canary_buffer(space_, slots, label(name, "k_canary"));
        g.v = views.v ? *views.v : allocate_canary_buffer(space_, slots, label(name, "v_canary"));
      }

      g.head_plan = allocate_verify_plan(space_, capacities_.verify_capacity, config_.request_identities);
      g.head_plan.enable = int32_view(gi, Block::kHeadEnable);
      g.head_plan.verify_num_valid = int32_view(gi, Block::kHeadNumValid);
      g.sweep_plan = g.head_plan;  // the arrays are shared (sweep runs between steps)
      g.sweep_plan.enable = int32_view(gi, Block::kSweepEnable);
      g.sweep_plan.verify_num_valid = int32_view(gi, Block::kSweepNumValid);
      g.write_plan = allocate_write_plan(space_, capacities_.write_req_capacity, config_.request_identities);
      g.sweep_write_plan = allocate_write_plan(space_, capacities_.sweep_req_capacity, config_.request_identities);
      g.status.input_error_bits = int32_view(gi, Block::kHeadInputErrors);
      g.status.first_bad_row = int32_view(gi, Block::kHeadFirstBadRow);
      g.sweep_status.input_error_bits = int32_view(gi, Block::kSweepInputErrors);
      g.sweep_status.first_bad_row = int32_view(gi, Block::kSweepFirstBadRow);
      g.workspace = allocate_plan_workspace(space_, capacities_.write_req_capacity);
      g.sweep_workspace = allocate_plan_workspace(space_, capacities_.sweep_req_capacity);

      g.rows = Rows(Kokkos::view_alloc(space_, label(name, "ring_rows")), config_.ring_capacity);
      g.host_rows = HostRows(Kokkos::view_alloc(Kokkos::WithoutInitializing, label(name, "ring_rows_host")),
                             config_.ring_capacity);
      for (int stage = 0; stage < Impl::kCounterStages; ++stage)
        for (int tag = 0; tag < kKernelKinds; ++tag) {
          ViolationRing<Memory>& ring = g.rings[stage * kKernelKinds + tag];
          ring.rows = g.rows;
          ring.count = int64_view(gi, Block::kCount);
          ring.kernel_run_counter = int64_view(gi, Block::kernel_runs(stage, tag));
          ring.slot_run_counter = int64_view(gi, Block::slot_runs(stage, tag));
        }

      const bool swa = kind == GroupKind::Swa;
      const auto tag = [&](KernelKind full, KernelKind swa_kind) { return swa ? swa_kind : full; };
      RealKv<Memory> real_k, real_v;
      real_k.mode = real_v.mode = config_.real_kv_mode;
      real_k.sources = views.real_kv_k;
      real_v.sources = views.real_kv_v;
      const bool has_real_kv = !views.real_kv_k.empty() || !views.real_kv_v.empty();
      g.tail = config_.tail_pass && has_real_kv;
      g.head_targets = {{g.k, tag(KernelKind::HEAD_K_FULL, KernelKind::HEAD_K_SWA), real_k},
                        {g.v, tag(KernelKind::HEAD_V_FULL, KernelKind::HEAD_V_SWA), real_v}};
      g.tail_targets = {{g.k, tag(KernelKind::TAIL_K_FULL, KernelKind::TAIL_K_SWA), real_k},
                        {g.v, tag(KernelKind::TAIL_V_FULL, KernelKind::TAIL_V_SWA), real_v}};
      g.sweep_targets = {{g.k, tag(KernelKind::SWEEP_K_FULL, KernelKind::SWEEP_K_SWA), real_k},
                         {g.v, tag(KernelKind::SWEEP_V_FULL, KernelKind::SWEEP_V_SWA), real_v}};
      for (auto* pass : {&g.head_write, &g.tail_write}) {
        const auto& targets = pass == &g.head_write ? g.head_targets : g.tail_targets;
        for (const auto& target : targets) pass->targets.push_back({target.buffer, target.kernel_kind, target.real_kv});
      }
      g.rows_ring = g.ring_for(Stage::Verify, g.head_targets[0].kernel_kind);

      // What each pass adds to the kernel run counters (the health check's expectation).
      const auto add_launches = [&](std::vector<int>& launches, const std::vector<VerifyTarget<Memory>>& targets,
                                    bool writes) {
        // verify() and write() count one run per buffer, on the counters of the ring they are given (the K tag's)
        for (int stage = 0; stage < (writes ? 2 : 1); ++stage)
          for (std::size_t t = 0; t < targets.size(); ++t)
            launches.push_back(Block::group_base(gi) + Block::kernel_runs(stage, static_cast<int>(targets[0].kernel_kind)));
        for (const auto& target : targets) active_tags_ |= 1 << static_cast<int>(target.kernel_kind);
      };
      add_launches(forward_launches_, g.head_targets, true);
      if (g.tail) add_launches(forward_launches_, g.tail_targets, true);
      if (swept(g)) add_launches(sweep_launches_, g.sweep_targets, false);
    }
    // Sweep tags count as active only when sweeps are configured.
    if (config_.sweep_interval == 0)
      for (const Group& g : groups_)
        if (swept(g))
          for (const auto& target : g.sweep_targets) active_tags_ &= ~(1 << static_cast<int>(target.kernel_kind));
    if (in_graph()) allocate_in_graph();
    space_.fence();  // the zeroed buffers and flags before the first pass (construction only)
  }

  Kokkos::View<std::int64_t, Memory> int64_view(int group, int index) const {
    return Kokkos::View<std::int64_t, Memory>(block_.data() + Block::group_base(group) + index);
  }
  Kokkos::View<std::int32_t, Memory> int32_view(int group, int flag) const {
    return Kokkos::View<std::int32_t, Memory>(reinterpret_cast<std::int32_t*>(block_.data() + Block::group_base(group)) +
                                              Block::int32_index(flag));
  }

  // ---- pass helpers ----

  // The group's head verify route: FromPlan, FromInputs or FromInputsAfterPlan. The two FromInputs routes
  // leave the head plan's verify arrays unwritten (SPEC-CANARY §5.1), so only a group that reads them nowhere
  // after before_forward() takes one: after_forward()'s tail verify reads them; the write passes read the
  // WritePlan only, and sweep() plans its own entries.
  HeadVerify head_verify_route(const Group& g, std::int64_t batch_rows) const {
    if (g.tail) return HeadVerify::FromPlan;
    return Impl::resolve<ExecutionSpace>(config_.head_verify, batch_rows);
  }

  // PumpSnapshot::WithNextPlan: the target group's head plan, the forward's first (the target group is always
  // on), carries the previous forward's snapshot.
  bool carries_snapshot(const Group& g) const { return with_next_plan() && g.kind == GroupKind::Target; }

  // PumpSnapshot::WithNextPlan, the target group: the previous forward's snapshot in one extra block of its
  // plan's launch (runtime/impl/pump_in_plan.hpp) when its route checks the entries from the plan's inputs (in
  // the plan's one launch, or after an offsets-only plan) and CUDA's kernels take it, else the snapshot kernel
  // right before the plan; true: the head pass is done.
  bool mail_with_plan(HeadVerify route, const Group& g, const PlanInputs<Memory>& inputs,
                      const ViolationRing<Memory>& ring) {
    if (route == HeadVerify::FromInputs || route == HeadVerify::FromInputsAfterPlan) {
      VerifyOptions options = verify_options();
      if (route == HeadVerify::FromInputsAfterPlan) options.algorithm = CanaryAlgorithm::Portable;
      if (Impl::PlanMailCarrier<ExecutionSpace>::plan_and_verify(space_, plan_mail_, inputs, g.head_plan, g.write_plan,
                                                                 g.status, g.workspace, g.head_targets, ring,
                                                                 config_.plan_options, options))
        return true;
    }
    Impl::launch_pump_in_graph(space_, in_graph_kernel_);
    return false;
  }

  // A plan and its verify by `route`: FromPlan stores the entries and reads them back; the two FromInputs routes
  // check them where they are made (plan_and_verify(), SPEC-CANARY §5.1), in the plan's kernels or after them.
  void plan_and_check(HeadVerify route, const PlanInputs<Memory>& inputs, const VerifyPlan<Memory>& verify_plan,
                      const WritePlan<Memory>& write_plan, const PlanStatus<Memory>& status,
                      const PlanWorkspace<Memory>& workspace, const std::vector<VerifyTarget<Memory>>& targets,
                      const ViolationRing<Memory>& ring) {
    VerifyOptions options = verify_options();
    if (route == HeadVerify::FromPlan) {
      plan(space_, inputs, verify_plan, write_plan, status, workspace, config_.plan_options);
      verify(space_, verify_plan, targets, ring, options);
      return;
    }
    if (route == HeadVerify::FromInputsAfterPlan) options.algorithm = CanaryAlgorithm::Portable;
    plan_and_verify(space_, inputs, verify_plan, write_plan, status, workspace, targets, ring, config_.plan_options,
                    options);
  }

  VerifyOptions verify_options() const {
    VerifyOptions options;
    options.check_expected_token = config_.verify_token_assert;
    options.algorithm = config_.canary_algorithm;
    return options;
  }

  PlanInputs<Memory> plan_inputs(const Group& g, const ForwardBatch<Memory>& batch) const {
    PlanInputs<Memory> in;
    in.req_pool_indices = batch.req_pool_indices;
    in.prefix_lens = batch.prefix_lens;
    in.extend_seq_lens = batch.extend_seq_lens;
    in.req_to_token = tables_.req_to_token;
    add_group_inputs(g, in);
    if (config_.verify_token_assert) {
      in.req_to_verify_expected_tokens = *tables_.expected_tokens;
      in.req_to_verify_expected_tokens_valid_lens = *batch.expected_tokens_valid_lens;
    }
    if (config_.request_identities) in.req_identities = *batch.identities;
    return in;
  }

  PlanInputs<Memory> sweep_inputs(const Group& g, const CachedPrefixes<Memory>& cached) const {
    PlanInputs<Memory> in;
    const auto n = cached.pool_rows.extent(0);
    in.req_pool_indices = cached.pool_rows;
    in.prefix_lens = cached.lengths;
    in.extend_seq_lens = Kokkos::subview(sweep_zeros_, std::make_pair(std::size_t(0), n));
    in.req_to_token = tables_.req_to_token;
    add_group_inputs(g, in);
    if (config_.verify_token_assert) {
      in.req_to_verify_expected_tokens = *tables_.expected_tokens;
      in.req_to_verify_expected_tokens_valid_lens =
          cached.expected_tokens_valid_lens ? *cached.expected_tokens_valid_lens : cached.lengths;
    }
    if (config_.request_identities) in.req_identities = *cached.identities;
    return in;
  }

  void add_group_inputs(const Group& g, PlanInputs<Memory>& in) const {
    if (g.kind == GroupKind::Swa) {
      in.swa_window_size = config_.swa_window;
      in.full_to_swa_index_mapping = *tables_.full_to_swa_index_mapping;
    }
    if (g.kind == GroupKind::Draft) in.kv_token_id_vs_position_offset = 1;
  }

  const ForwardTokens<Memory>& tokens_of(const Group& g, const ForwardBatch<Memory>& batch) const {
    return g.kind == GroupKind::Target ? batch.tokens : g.kind == GroupKind::Swa ? *batch.swa_tokens : *batch.draft_tokens;
  }

  StepTokens<Memory> step_tokens(const ForwardTokens<Memory>& t) const {
    StepTokens<Memory> tokens;
    tokens.input_ids = t.input_ids;
    tokens.positions = t.positions;
    tokens.out_cache_loc = t.out_cache_loc;
    if (config_.write_input_assert) {
      tokens.expected_input_ids = *t.expected_input_ids;
      tokens.expected_positions = *t.expected_positions;
    }
    tokens.chain_position_assert = chain_assert_;
    return tokens;
  }

  // K and V of one pass in one write(): the plan and the tokens read once, the chain walked once. `last`: the
  // forward's last canary pass, which on the in-graph route also takes the snapshot — inside the write on
  // CUDA's write path (runtime/impl/pump_in_write.hpp), else in its own kernel right after it.
  void write_k_and_v(const Group& g, const StepTokens<Memory>& tokens, const WritePass& pass, bool last) {
    const ViolationRing<Memory>& ring = g.ring_for(Stage::Write, pass.targets[0].kernel_kind);
    if (!last || !in_last_pass()) {
      write(space_, g.write_plan, tokens, pass.targets, ring, WriteCallOptions{config_.canary_algorithm});
      return;
    }
    bool folded = false;
    Impl::with_write_functor<ExecutionSpace>(g.write_plan, tokens, pass.targets, ring, [&](const auto& functor) {
      folded = Impl::MailFold<ExecutionSpace>::write_and_mail(space_, functor, config_.canary_algorithm,
                                                              in_graph_kernel_.writer, mail_done_blocks_.data());
      if (!folded) Impl::launch_write(space_, functor, config_.canary_algorithm);
    });
    if (!folded) Impl::launch_pump_in_graph(space_, in_graph_kernel_);
  }

  // The index of the last group a pass writes (-1: none).
  template <class Writes>
  int last_written(Writes&& writes) const {
    int last = -1;
    for (const Group& g : groups_)
      if (writes(g)) last = g.index;
    return last;
  }

  // ---- host checks of a pass's arguments (before anything is launched) ----

  void check_tokens(const char* name, const ForwardTokens<Memory>& t) const {
    constexpr const char* kWhere = "Canary";
    const auto n = t.input_ids.extent(0);
    if (t.positions.extent(0) != n || t.out_cache_loc.extent(0) != n)
      Impl::throw_invalid_in(kWhere, name, ": input_ids, positions and out_cache_loc have ", n, ", ",
                             t.positions.extent(0), " and ", t.out_cache_loc.extent(0), " entries, must be equal");
    if (config_.write_input_assert && (!t.expected_input_ids || !t.expected_positions))
      Impl::throw_invalid_in(kWhere, name, ": write_input_assert is on but expected_input_ids / expected_positions "
                                           "are not given");
  }

  void check_batch(const ForwardBatch<Memory>& batch) const {
    constexpr const char* kWhere = "Canary";
    const auto bs = static_cast<std::int64_t>(batch.req_pool_indices.extent(0));
    if (bs > capacities_.write_req_capacity)
      Impl::throw_invalid_in(kWhere, "the batch has ", bs, " requests, write_req_capacity is ",
                             capacities_.write_req_capacity);
    if (config_.verify_token_assert && !batch.expected_tokens_valid_lens)
      Impl::throw_invalid_in(kWhere, "verify_token_assert is on but the batch has no expected_tokens_valid_lens");
    if (config_.request_identities != batch.identities.has_value())
      Impl::throw_invalid_in(kWhere, "request_identities is ", config_.request_identities ? "on" : "off",
                             " but batch.identities is ", batch.identities ? "given" : "absent");
    check_tokens("batch.tokens", batch.tokens);
    if (config_.swa_group != batch.swa_tokens.has_value())
      Impl::throw_invalid_in(kWhere, "swa_group is ", config_.swa_group ? "on" : "off", " but batch.swa_tokens is ",
                             batch.swa_tokens ? "given" : "absent");
    if (config_.draft_group != batch.draft_tokens.has_value())
      Impl::throw_invalid_in(kWhere, "draft_group is ", config_.draft_group ? "on" : "off",
                             " but batch.draft_tokens is ", batch.draft_tokens ? "given" : "absent");
    if (batch.swa_tokens) check_tokens("batch.swa_tokens", *batch.swa_tokens);
    if (batch.draft_tokens) check_tokens("batch.draft_tokens", *batch.draft_tokens);
    // plan() checks the rest of the batch's shapes against the tables.
    for (const Group& g : groups_)
      if (g.on) validate(plan_inputs(g, batch), g.head_plan, g.write_plan, g.status, g.workspace);
  }

  void check_cached(const CachedPrefixes<Memory>& cached) const {
    constexpr const char* kWhere = "Canary::sweep";
    const auto n = static_cast<std::int64_t>(cached.pool_rows.extent(0));
    if (n > capacities_.sweep_req_capacity)
      Impl::throw_invalid_in(kWhere, "got ", n, " cached prefixes, sweep_req_capacity is ", capacities_.sweep_req_capacity);
    if (static_cast<std::int64_t>(cached.lengths.extent(0)) != n)
      Impl::throw_invalid_in(kWhere, "pool_rows has ", n, " entries, lengths ", cached.lengths.extent(0));
    if (config_.request_identities != cached.identities.has_value())
      Impl::throw_invalid_in(kWhere, "request_identities is ", config_.request_identities ? "on" : "off",
                             " but cached.identities is ", cached.identities ? "given" : "absent");
    for (const Group& g : groups_)
      if (swept(g))
        validate(sweep_inputs(g, cached), g.sweep_plan, g.sweep_write_plan, g.sweep_status, g.sweep_workspace);
  }

  // ---- the report pump ----

  void add_expected(const std::vector<int>& launches, std::int64_t times) { add_launches(expected_, launches, times); }
  static void add_launches(Counts& counts, const std::vector<int>& launches, std::int64_t times) {
    for (const int index : launches) counts[index] += times;
  }

  void maybe_launch_swa_divergence() {
    const std::int64_t every = config_.swa_divergence_every_n_steps;
    divergence_due_ = every > 0 && step_ % every == 0 && last_batch_.has_value();
    if (!divergence_due_) return;
    const int base = Block::group_base(static_cast<int>(GroupKind::Swa));
    Impl::launch_swa_divergence(space_, last_batch_->req_pool_indices, last_batch_->prefix_lens,
                                last_batch_->extend_seq_lens, tables_.req_to_token, *tables_.full_to_swa_index_mapping,
                                Kokkos::subview(block_, base + Block::kSwaDivergence),
                                Kokkos::subview(block_, base + Block::kSwaOutOfWindow));
  }

 public:
  // The batch the SWA divergence report reads (the last forward's): the engine calls it when it changes
  // the batch's Views (before_forward() does it too).
  void observe_batch(const ForwardBatch<Memory>& batch) { last_batch_ = batch; }

 private:
  void issue_snapshot(std::int64_t forwards) {
    pending_snapshot_.step = step_;
    pending_snapshot_.forwards = forwards;
    pending_snapshot_.forwards_total = forwards_;
    pending_snapshot_.sweeps = sweeps_;
    pending_snapshot_.swa_divergence = divergence_due_;
    pending_snapshot_.divergence_forwards = forwards_;
    pending_snapshot_.expected = expected_;
    if (pump_ == PumpSnapshot::Kernel) {
      issue_snapshot_kernel();
      return;
    }
    // The stream-ordered point of the snapshot: a device copy of the counters on the engine's instance.
    Kokkos::deep_copy(space_, staging_, block_);
    side_.follow();
    Kokkos::deep_copy(side_.space(), host_block_, staging_);
    for (Group& g : groups_) {
      if (!g.on) continue;
      // Rows below the snapshot's count are final (fill once): they may be read while later passes run.
      const std::int64_t begin = g.rows_valid;
      const std::int64_t end = open_window(g);
      if (begin < end) {
        const auto range = std::make_pair(static_cast<std::size_t>(begin), static_cast<std::size_t>(end));
        Kokkos::deep_copy(side_.space(), Kokkos::subview(g.host_rows, range, Kokkos::ALL),
                          Kokkos::subview(g.rows, range, Kokkos::ALL));
      }
    }
    side_.record();
    pending_ = true;
  }

  // The rows the next snapshot asks of a group's ring: from its first row not yet reported, at most
  // pump_rows_per_step of them; returns (and keeps, for process()) the window's end.
  std::int64_t open_window(Group& g) {
    g.window_end = std::min(config_.ring_capacity, g.rows_valid + config_.pump_rows_per_step);
    return g.window_end;
  }

  // One kernel on the engine's instance writes the block and the windows' final rows into the pinned
  // host copies (runtime/impl/pump_snapshot.hpp); one event follows it.
  void issue_snapshot_kernel() {
    Impl::PumpSnapshotKernel<Memory, HostSpace> kernel;
    kernel.block = block_;
    kernel.host_block = host_block_;
    for (Group& g : groups_) {
      if (!g.on) continue;
      auto& window = kernel.windows[kernel.num_windows++];
      window.rows = g.rows;
      window.host_rows = g.host_rows;
      window.begin = g.rows_valid;
      window.end = std::max(window.begin, open_window(g));
      window.count_index = Block::count_index(g.index);
    }
    Impl::launch_pump_snapshot(space_, kernel);
    side_.record_on_engine();
    pending_ = true;
  }

  // ---- the in-graph route (PumpSnapshot::InGraph; runtime/impl/pump_in_graph.hpp) ----

  // The mailbox routes: the snapshot in the forward's last pass, or beside the forward.
  bool in_graph() const {
    return pump_ == PumpSnapshot::InGraph || pump_ == PumpSnapshot::BesideForward || with_next_plan();
  }
  bool in_last_pass() const { return pump_ == PumpSnapshot::InGraph; }
  bool beside_forward() const { return pump_ == PumpSnapshot::BesideForward; }
  bool with_next_plan() const { return pump_ == PumpSnapshot::WithNextPlan; }
  // How many forwards the newest snapshot the device can have written trails the device's forwards: with the
  // next plan, forward N's snapshot is taken when forward N + 1 starts.
  std::int64_t mail_lag() const { return with_next_plan() ? 1 : 0; }

  // PumpSnapshot::BesideForward: the snapshot kernel on a branch forked from the engine's stream after the
  // forward's head passes; the model's forward runs on the stream meanwhile. Nothing of the canary runs
  // until the join (the next pass joins first), so what it reads is final.
  void fork_snapshot() {
    side_.follow();
    Impl::launch_pump_in_graph(side_.space(), in_graph_kernel_);
    branch_open_ = true;
  }
  void join_branch() {
    if (!branch_open_) return;
    side_.join();
    branch_open_ = false;
  }
  // The host's expectations of the last kForwardRing forwards: a snapshot may trail the host by a few.
  static constexpr std::int64_t kForwardRing = 64;
  static_assert(kForwardRing > Impl::PumpLagSlack<ExecutionSpace>::value, "the ring covers the lag the check allows");

  Impl::MailboxLayout mailbox_layout() const {
    Impl::MailboxLayout layout;
    layout.window = std::min(config_.pump_rows_per_step, config_.ring_capacity);
    return layout;
  }

  void allocate_in_graph() {
    mailbox_ = Impl::PumpMailbox<HostSpace>(mailbox_layout().window);
    mailbox_slot_ = mailbox_.empty_slot();
    forward_seq_ = Kokkos::View<std::int64_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::pump_forward_seq"));
    mailed_ = Kokkos::View<std::int64_t*, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::pump_rows_mailed"),
                                                  kGroupKinds);
    // Host Views here without a Kokkos fill, as the mailbox's (PumpMailbox): a serial Canary may be built on a
    // thread the default host space (OpenMP) refuses. Every word is written before it is read.
    mailed_host_ = Kokkos::View<std::int64_t*, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kvcanary::Canary::pump_rows_mailed_host"), kGroupKinds);
    forward_ring_.assign(kForwardRing, Snapshot{});
    mail_done_blocks_ =
        Kokkos::View<unsigned, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::pump_done_blocks"));
    // Every address the snapshot uses is fixed here: a captured graph replays it unchanged.
    auto& w = in_graph_kernel_.writer;
    w.block = block_.data();
    w.forward_seq = forward_seq_.data();
    w.mailed = mailed_.data();
    w.mailbox = mailbox_.mailbox().data();
    w.layout = mailbox_.layout();
    w.capacity = config_.ring_capacity;
    mail_rows_ =
        Kokkos::View<Impl::MailRowsTable, Memory>(Kokkos::view_alloc(space_, "kvcanary::Canary::pump_mail_rows"));
    auto table = Kokkos::create_mirror_view(mail_rows_);  // host backends: the same View, nothing allocated
    for (const Group& g : groups_) table().rows[g.index] = g.on ? g.rows.data() : nullptr;
    Kokkos::deep_copy(mail_rows_, table);  // at construction: the host table goes with this scope
    w.rows = mail_rows_.data()->rows;      // the address of the device table's array; nothing is read here
    if (!with_next_plan()) return;
    plan_mail_.writer = w;
    plan_mail_.scalars_at = Block::group_base(static_cast<int>(GroupKind::Target)) + Block::kFlags;
    plan_handover_ = Kokkos::View<std::int64_t*, Memory>(
        Kokkos::view_alloc(space_, "kvcanary::Canary::pump_plan_handover"), Impl::PlanMail::kWords);
    plan_mail_.handover = plan_handover_.data();
    // The first launch's snapshot reads copy 1: the scalars as they start.
    const auto copy = std::make_pair(Impl::PlanMail::kCopies + 2, Impl::PlanMail::kCopies + 4);
    const auto scalars = std::make_pair(plan_mail_.scalars_at, plan_mail_.scalars_at + 2);
    Kokkos::deep_copy(space_, Kokkos::subview(plan_handover_, copy), Kokkos::subview(block_, scalars));
  }

  // The device's row cursors to the host's first unreported rows, after a synchronous read (flush(),
  // rearm()): the next snapshots mail what follows. Fences.
  void update_row_cursors() {
    if (!in_graph()) return;
    for (const Group& g : groups_) mailed_host_(g.index) = g.on ? g.rows_valid : 0;
    Kokkos::deep_copy(space_, mailed_, mailed_host_);
    space_.fence();
  }

  const Snapshot* forward_entry(std::int64_t forward) const {
    if (forward < 1) return nullptr;
    const Snapshot& e = forward_ring_[static_cast<std::size_t>(forward % kForwardRing)];
    return e.forwards_total == forward ? &e : nullptr;
  }

  // What the host expects at each forward of this step (the sweeps of a step run after its forwards, at
  // sweep()'s documented place), then the newest snapshot the device left, read from host memory only.
  RuntimeReport end_step_in_graph(std::int64_t forwards) {
    RuntimeReport report;
    ++step_;
    Counts at = expected_;
    add_launches(at, sweep_launches_, -(sweeps_ - sweeps_at_last_step_));
    const std::int64_t first = std::max<std::int64_t>(1, forwards - kForwardRing + 1);
    for (std::int64_t k = first; k <= forwards; ++k) {
      Snapshot e;
      e.step = step_;
      e.forwards = 1;
      e.forwards_total = forwards_ + k;
      e.sweeps = sweeps_at_last_step_;
      e.expected = at;
      // Beside the forward, forward k's snapshot is taken before its tail pass, which counts in k + 1's: a
      // constant lag of one tail that the health check's differences between two snapshots cancel.
      add_launches(e.expected, forward_launches_, k);
      e.swa_divergence = k == 1 && divergence_next_ && !with_next_plan();
      e.divergence_forwards = divergence_forwards_;
      forward_ring_[static_cast<std::size_t>(e.forwards_total % kForwardRing)] = e;
    }
    if (forwards > 0) divergence_next_ = false;
    forwards_ += forwards;
    add_expected(forward_launches_, forwards);
    sweeps_at_last_step_ = sweeps_;
    maybe_launch_swa_divergence();  // read by the next forward's snapshot
    if (divergence_due_) {
      divergence_next_ = true;
      divergence_forwards_ = forwards_;
    }
    if (with_next_plan()) expect_before_next_forward();
    // Until the first snapshot is read, wait for the device once (flush() always has): the offset that read
    // fixes must count the warmup forwards only, not a device still behind (an engine that queues its next
    // step before it waits).
    const bool fence = !seq_offset_known_;
    if (fence) space_.fence();
    read_in_graph(report, step_, fence);
    deliver_report(report);
    return report;
  }

  // WithNextPlan: the newest forward's snapshot is taken when the next forward's plan starts, so it holds
  // everything launched until then: its forward, the sweeps after it and an SWA divergence kernel this
  // end_step() launched. Not yet taken (the engine starts the next forward after this call); a step without
  // forwards adds its sweeps and kernels to the same forward's expectation.
  void expect_before_next_forward() {
    Snapshot* e = forwards_ < 1 ? nullptr : &forward_ring_[static_cast<std::size_t>(forwards_ % kForwardRing)];
    if (e == nullptr || e->forwards_total != forwards_) return;
    e->expected = expected_;
    e->sweeps = sweeps_;
    if (divergence_due_) {
      e->swa_divergence = true;
      e->divergence_forwards = forwards_;
    }
  }

  // Every mailbox slot after the last one read, in order (runtime/impl/pump_in_graph.hpp): their rows go to
  // each group's host copy, and the newest is processed as the snapshot of the forward it maps to (its device
  // number minus the offset the first one read fixed: warmup forwards before the first end_step() are not
  // the host's). A slot not yet whole ends the walk (the device is behind, or its stores are still arriving):
  // the rest waits for the next end_step(). What the mailbox no longer holds — slots the device wrote again
  // before the host came (the host more than kSlots forwards behind), rows between two windows — the host
  // takes synchronously: it fences the engine's instance once and copies the rows from the ring.
  // `fenced`: the caller has just fenced.
  void read_in_graph(RuntimeReport& report, std::int64_t pumped_at, bool fenced) {
    using Read = typename Impl::PumpMailbox<HostSpace>::Read;
    const auto fence_once = [&] {
      if (!fenced) space_.fence();
      fenced = true;
    };
    std::array<std::int64_t, kGroupKinds> taken{};
    for (const Group& g : groups_) taken[g.index] = g.rows_valid;
    std::int64_t newest = 0;
    for (std::int64_t seq = last_seq_ + 1;; ++seq) {
      const Read read = mailbox_.read(seq, mailbox_slot_);
      if (read != Read::Taken) {
        if (read == Read::NotYet && !(fenced && mailbox_.newest() > seq)) break;
        // Overwritten: the slot holds a later forward, so the oldest one the mailbox holds is past `seq`; after a
        // fence every slot is final, and one that is still not whole (host memory written over) is skipped.
        fence_once();
        seq = std::max(seq + 1, mailbox_.newest() - Impl::MailboxLayout::kSlots + 1) - 1;
        continue;
      }
      const auto& slot = mailbox_slot_;
      for (Group& g : groups_) {
        if (!g.on) continue;
        std::int64_t& to = taken[g.index];
        const std::int64_t begin = slot.windows[2 * g.index], end = slot.windows[2 * g.index + 1];
        if (begin > to) {  // rows a lost slot carried: final in the ring, below this snapshot's count
          fence_once();
          const auto range = std::make_pair(static_cast<std::size_t>(to), static_cast<std::size_t>(begin));
          Kokkos::deep_copy(Kokkos::subview(g.host_rows, range, Kokkos::ALL),
                            Kokkos::subview(g.rows, range, Kokkos::ALL));
          to = begin;
        }
        for (; to < end; ++to)
          for (int f = 0; f < kRingFields; ++f)
            g.host_rows(to, f) = slot.rows[g.index][static_cast<std::size_t>((to - begin) * kRingFields + f)];
      }
      std::copy(slot.block.begin(), slot.block.end(), host_block_.data());
      newest = last_seq_ = seq;
    }
    if (newest == 0) return;  // nothing newer (the device is behind): nothing is reported; the rows wait
    for (Group& g : groups_)
      if (g.on) g.window_end = taken[g.index];
    if (!seq_offset_known_) {
      seq_offset_ = newest - (forwards_ - mail_lag());
      seq_offset_known_ = true;
    }
    const std::int64_t forward = newest - seq_offset_;
    if (const Snapshot* snap = forward_entry(forward)) {
      process(*snap, report, /*checks=*/true, pumped_at);
    } else {  // older than the ring, or before the first forward told of: rows and totals only
      Snapshot unknown;
      unknown.step = step_;
      unknown.forwards_total = forward;
      process(unknown, report, /*checks=*/false, pumped_at);
    }
  }

  // The forwards end_step() was told of past the newest snapshot's (taken at forward `newest`), beyond what
  // the baseline had.
  std::int64_t forwards_without_snapshot(std::int64_t newest) const { return forwards_ - newest - lag_base_; }

  // The in-graph health error's account of those forwards; the caller closes its parenthesis.
  std::string snapshot_gap(std::int64_t skipped, std::int64_t newest) const {
    return message(skipped,
                   " of the forwards end_step() was told of ran without the canary's snapshot (the newest is forward ",
                   newest, " of ", forwards_);
  }

  // What a "canary not running" error names as the likely causes, closing its parenthesis.
  static constexpr const char* kNotRunningCauses =
      "a graph replayed without the canary's nodes, passes on another stream, or end_step() told the wrong number "
      "of forwards)";

  // After a fence the device has run every forward it was given: a snapshot behind the host's count is
  // forwards that ran without the canary (any lag the end_step() checks allowed is gone).
  void check_lag_at_flush(RuntimeReport& report) {
    if (config_.health_check_every_n_steps == 0 || !health_baseline_ || last_seq_ == 0) return;
    const std::int64_t newest = last_seq_ - seq_offset_;
    const std::int64_t skipped = forwards_without_snapshot(newest);
    if (skipped <= 0) return;
    report.health_errors.push_back(message("kv_canary error: canary not running: at flush (step ", step_, ") ",
                                           snapshot_gap(skipped, newest), "; ", kNotRunningCauses));
    seq_offset_ -= skipped;
    health_baseline_ = false;  // the next snapshot starts the checks again
  }

  std::int64_t host_value(int group, int index) const { return host_block_(Block::group_base(group) + index); }
  std::int32_t host_int32(int group, int flag) const {
    return reinterpret_cast<const std::int32_t*>(host_block_.data() + Block::group_base(group))[Block::int32_index(flag)];
  }

  // `pumped_at`: the step count when the host reads it (the multi-line form's step_when_pumped).
  void process(const Snapshot& snap, RuntimeReport& report, bool checks, std::int64_t pumped_at) {
    report.step = snap.step;
    ViolationReport& v = report.violations;
    v.capacity = config_.ring_capacity;
    // Totals are the snapshot's (the latest one read wins); rows, drops and losses add up.
    v.count = v.lost_to_overflow = v.kernel_run_counter = v.slot_run_counter = 0;
    v.overflowed = false;
    for (Group& g : groups_) {
      if (!g.on) continue;
      const int gi = g.index;
      const std::int64_t count = host_value(gi, Block::kCount);
      const auto held = static_cast<std::int64_t>(Impl::rows_held(count, config_.ring_capacity));
      const std::int64_t new_valid = std::max(g.rows_valid, std::min(held, g.window_end));
      // Compared as uint64, as make_report() does: a count read past 2^63 is a full ring, not a negative loss.
      const std::uint64_t lost = Impl::rows_lost(count, config_.ring_capacity);
      v.count += count;
      v.overflowed = v.overflowed || lost != 0;
      if (lost != 0 && std::find(report.overflowed_groups.begin(), report.overflowed_groups.end(), g.kind) ==
                           report.overflowed_groups.end())
        report.overflowed_groups.push_back(g.kind);
      v.lost_to_overflow += Impl::as_int64(lost);
      const std::uint64_t newly_lost = lost > g.last_lost ? lost - g.last_lost : 0;
      v.newly_lost += Impl::as_int64(newly_lost);
      g.last_lost = std::max(g.last_lost, lost);
      v.rows_read += new_valid - g.rows_valid;
      for (std::int64_t r = g.rows_valid; r < new_valid; ++r) {
        reference::RingRow row;
        for (int f = 0; f < kRingFields; ++f) row[f] = g.host_rows(r, f);
        if (!config_.keep_never_written && is_never_written(row)) {
          Impl::note_dropped_row(v, row);  // the tags distinct and ascending over every group
          continue;
        }
        v.rows.push_back(row);
        v.lines.push_back(config_.report_format == ReportFormat::OneLine
                              ? format_violation(row)
                              : format_violation_multiline(row, count, lost != 0, pumped_at));
        report.row_groups.push_back(g.kind);
      }
      g.rows_valid = new_valid;
      for (int stage = 0; stage < Impl::kCounterStages; ++stage)
        for (int tag = 0; tag < kKernelKinds; ++tag) {
          v.kernel_run_counter += host_value(gi, Block::kernel_runs(stage, tag));
          v.slot_run_counter += host_value(gi, Block::slot_runs(stage, tag));
        }
      if (newly_lost != 0)
        report.warnings.push_back(message("kv_canary warning: the ", group_kind_name(g.kind), " group's ring is full (",
                                          config_.ring_capacity, " rows): ", newly_lost,
                                          " more violations counted without their rows (", lost, " in all)"));
      if (!checks) continue;
      check_plan_flags(g, snap, report);
    }
    if (!checks) return;
    health_check(snap, report);
    if (config_.stats_every_n_steps > 0 && snap.step % config_.stats_every_n_steps == 0)
      report.info.push_back(stats_line(snap.step, v.slot_run_counter, snap.sweeps, v.count, popcount(active_tags_)));
    if (snap.swa_divergence) {
      SwaDivergence d;
      d.forward_ct = snap.divergence_forwards;
      d.verify_full = verify_total_[static_cast<int>(GroupKind::Target)];
      d.verify_swa = verify_total_[static_cast<int>(GroupKind::Swa)];
      d.swa_full_idx_divergence = host_value(static_cast<int>(GroupKind::Swa), Block::kSwaDivergence);
      d.swa_out_of_window_tokens = host_value(static_cast<int>(GroupKind::Swa), Block::kSwaOutOfWindow);
      report.info.push_back(swa_divergence_line(d));
    }
  }

  void check_plan_flags(Group& g, const Snapshot& snap, RuntimeReport& report) {
    if (snap.forwards > 0) {
      verify_total_[g.index] += host_int32(g.index, Block::kHeadNumValid);
      check_pass(g, snap, report, "head verify", "the batch's prefixes", Block::kHeadEnable, g.head_disabled);
    }
    if (snap.sweeps > last_sweeps_seen_[g.index]) {
      check_pass(g, snap, report, "sweep", "the cached prefixes", Block::kSweepEnable, g.sweep_disabled);
      last_sweeps_seen_[g.index] = snap.sweeps;
    }
  }

  // A pass's plan scalars (enable, then input_error_bits and first_bad_row two and three int32 later): a
  // verify disabled by capacity overflow, or bad rows in the pass's input, is a warning.
  void check_pass(const Group& g, const Snapshot& snap, RuntimeReport& report, const char* pass, const char* input,
                  int enable_flag, std::int64_t& disabled) {
    const char* name = group_kind_name(g.kind);
    if (host_int32(g.index, enable_flag) == 0)
      report.warnings.push_back(message("kv_canary warning: the ", pass, " of the ", name,
                                        " group was disabled by capacity overflow at step ", snap.step, ": ", input,
                                        " need more than verify_capacity ", capacities_.verify_capacity, " entries (",
                                        ++disabled, " disabled so far); raise Capacities::verify_capacity"));
    const std::int32_t bits = host_int32(g.index, enable_flag + 2);
    if (bits != 0)
      report.warnings.push_back(message("kv_canary warning: the ", pass, " of the ", name, " group at step ", snap.step,
                                        " got bad rows: input_error_bits=", bits,
                                        " first_bad_row=", host_int32(g.index, enable_flag + 3)));
  }

  // Every health_check_every_n_steps steps: each kernel run counter must have moved by exactly what the
  // passes launched since the previous check. The first snapshot is the baseline (an engine's warmup
  // forwards before its first end_step() are not counted).
  void health_check(const Snapshot& snap, RuntimeReport& report) {
    const std::int64_t every = config_.health_check_every_n_steps;
    if (every == 0) return;
    const auto actual = [&](int index) { return host_block_(index); };
    if (!health_baseline_) {
      for (int i = 0; i < Block::kSize; ++i) last_checked_actual_[i] = actual(i);
      last_checked_expected_ = snap.expected;
      health_baseline_ = true;
      last_check_step_ = snap.step;
      if (in_graph()) lag_base_ = forwards_ - snap.forwards_total;
      return;
    }
    // In-graph snapshots may skip steps (a device behind, several forwards a step): the first one at or past
    // each multiple of `every` checks.
    if (in_graph() ? snap.step / every == last_check_step_ / every : snap.step % every != 0) return;
    std::ostringstream wrong;
    int mismatches = 0;
    for (const Group& g : groups_) {
      if (!g.on) continue;
      for (int stage = 0; stage < Impl::kCounterStages; ++stage)
        for (int tag = 0; tag < kKernelKinds; ++tag) {
          const int index = Block::group_base(g.index) + Block::kernel_runs(stage, tag);
          const std::int64_t moved = actual(index) - last_checked_actual_[index];
          const std::int64_t launched = snap.expected[index] - last_checked_expected_[index];
          if (moved == launched) continue;
          wrong << (mismatches++ ? ", " : "") << (stage == 0 ? "verify " : "write ") << kernel_kind_name(tag) << " ("
                << group_kind_name(g.kind) << "): ran " << moved << " of " << launched;
        }
    }
    // In-graph: a forward replayed without the canary takes no snapshot either, so its counters agree with
    // the snapshots'; what shows is the newest snapshot trailing the forwards end_step() was told of.
    const std::int64_t skipped = in_graph() ? forwards_without_snapshot(snap.forwards_total) : 0;
    const bool lagging = skipped > Impl::PumpLagSlack<ExecutionSpace>::value;
    if (mismatches > 0 || lagging) {
      std::ostringstream what;
      if (mismatches > 0) what << " the kernel run counters moved by other than the passes launched: " << wrong.str();
      if (lagging) what << (mismatches > 0 ? "; and " : ", ") << snapshot_gap(skipped, snap.forwards_total) << ")";
      report.health_errors.push_back(message("kv_canary error: canary not running: between step ", last_check_step_,
                                             " and step ", snap.step, what.str(), " (", kNotRunningCauses));
    }
    for (int i = 0; i < Block::kSize; ++i) last_checked_actual_[i] = actual(i);
    last_checked_expected_ = snap.expected;
    last_check_step_ = snap.step;
    if (lagging) {
      // Said once: map the device's numbers onto the host's past the forwards that took no snapshot.
      seq_offset_ -= skipped;
      if (const Snapshot* now = forward_entry(snap.forwards_total + skipped))
        last_checked_expected_ = now->expected;
      else
        health_baseline_ = false;
    }
  }

  bool caught_up() const {
    for (const Group& g : groups_) {
      if (!g.on) continue;
      const std::int64_t count = host_value(g.index, Block::kCount);
      const auto held = static_cast<std::int64_t>(Impl::rows_held(count, config_.ring_capacity));
      if (g.rows_valid < held) return false;
    }
    return true;
  }

  int max_rounds() const {
    return static_cast<int>(std::min<std::int64_t>(1 << 20, config_.ring_capacity / config_.pump_rows_per_step + 1));
  }

  void emit(const std::string& line) const {
    if (config_.sink)
      config_.sink(line);
    else
      std::cerr << line << '\n';
  }

  void deliver_report(const RuntimeReport& report) {
    if (config_.report_mode != ReportMode::None) {
      for (const auto& line : report.info) emit(line);
      for (const auto& line : report.warnings) emit(line);
      for (const auto& line : report.health_errors) emit(line);
    }
    last_report_ = report;
    // A canary that is not running comes first: its violations (if any) stay in last_report().
    if (config_.report_mode == ReportMode::Raise && !report.health_errors.empty())
      throw CanaryNotRunningError(report.health_errors.front());
    ReportOptions options{config_.report_mode, config_.keep_never_written, config_.sink};
    deliver(report.violations, options);
  }

  template <class... Parts>
  static std::string message(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
  }

  static int popcount(unsigned bits) {
    int n = 0;
    for (; bits != 0; bits &= bits - 1) ++n;
    return n;
  }

  ExecutionSpace space_;
  CanaryConfig config_;
  PumpSnapshot pump_;  // config_.pump_snapshot, Default resolved for this backend
  EngineTables<Memory> tables_;
  Capacities capacities_;
  Impl::SideChannel<ExecutionSpace> side_;
  std::array<Group, kGroupKinds> groups_;
  Kokkos::View<std::int64_t*, Memory> block_, staging_;
  Kokkos::View<std::int64_t*, HostSpace> host_block_;
  Kokkos::View<std::int32_t, Memory> chain_assert_;
  Kokkos::View<std::int64_t*, Memory> sweep_zeros_;
  std::vector<int> forward_launches_, sweep_launches_;
  Counts expected_{}, last_checked_actual_{}, last_checked_expected_{};
  unsigned active_tags_ = 0;
  std::int64_t step_ = 0, forwards_ = 0, sweeps_ = 0, last_check_step_ = 0;
  std::array<std::int64_t, kGroupKinds> verify_total_{}, last_sweeps_seen_{};
  bool pending_ = false, health_baseline_ = false, divergence_due_ = false;
  bool branch_open_ = false;  // BesideForward: a snapshot's branch not yet joined into the engine's stream
  Snapshot pending_snapshot_;
  // the in-graph route
  Impl::PumpMailbox<HostSpace> mailbox_;
  typename Impl::PumpMailbox<HostSpace>::Slot mailbox_slot_;
  Impl::PumpInGraphKernel<ExecutionSpace> in_graph_kernel_;
  Kokkos::View<unsigned, Memory> mail_done_blocks_;  // the folded snapshot's count of finished write blocks
  Kokkos::View<std::int64_t, Memory> forward_seq_;
  Kokkos::View<std::int64_t*, Memory> mailed_;  // per group: rows the snapshots have mailed (the device's cursor)
  Kokkos::View<std::int64_t*, Kokkos::HostSpace> mailed_host_;
  // WithNextPlan: what the target group's head plan needs to carry the snapshot
  Kokkos::View<std::int64_t*, Memory> plan_handover_;
  Kokkos::View<Impl::MailRowsTable, Memory> mail_rows_;  // MailboxWriter::rows
  Impl::PlanMail plan_mail_;
  std::vector<Snapshot> forward_ring_;  // by forward number modulo kForwardRing
  std::int64_t last_seq_ = 0, seq_offset_ = 0, lag_base_ = 0, sweeps_at_last_step_ = 0, divergence_forwards_ = 0;
  bool seq_offset_known_ = false, divergence_next_ = false;
  std::optional<ForwardBatch<Memory>> last_batch_;
  RuntimeReport last_report_;
};

}  // namespace kvcanary

#endif
