// The state model (state_sim.hpp, docs/simulator.md "State slots"): requests with a recurrent state in a
// state slot, checked before every forward that resumes from it and stamped after every update (SPEC-CANARY
// §13.3); prefix hits fork a live request (shared KV, the state copied with its record); a padded batch
// with dummies; state faults injected with ground truth and every row of the check attributed.

#include "state_sim.hpp"

#include "backend_by_name.hpp"
#include "fault_list.hpp"
#include "fault_model.hpp"

#include <algorithm>
#include <iomanip>
#include <list>
#include <sstream>

namespace kvcanary {
namespace sim {

namespace {

constexpr const char* kNames[kStateFaults] = {"state_stale", "state_boundary", "state_alias"};

using Int64s = std::vector<std::int64_t>;

struct Request {
  std::int64_t id = 0, row = 0, state = 0;  // pool row, state slot (index into the state pool)
  Int64s tokens;                            // the whole request, drawn at arrival (a fork: the donor's first)
  std::int64_t prompt = 0, length = 0;      // decoding starts at `prompt`; KV written for positions < length
  Int64s slots;                             // KV slot per position < length (a fork's first ones shared)
  bool has_state = false;                   // a state to resume from (stamped, or copied at a prefix hit)
  bool fresh = true;                        // admitted this step: never parked
};

class StateModel : FaultModel<StateFault, StateSimReport> {
 public:
  StateModel(StateStages& stages, const StateSimOptions& options)
      : FaultModel(options.seed),
        stages_(stages),
        canary_(stages.canary()),
        options_(options),
        max_seq_len_(2 * (options.max_prompt + options.max_output)),
        max_reqs_(options.max_active + 1),
        kv_slots_(options.max_active * max_seq_len_ + 1),
        state_slots_(options.max_active + 2),
        buffer_(static_cast<std::size_t>(kv_slots_ + state_slots_)),
        refs_(static_cast<std::size_t>(kv_slots_), 0),
        state_owner_(static_cast<std::size_t>(state_slots_), -1),
        state_used_(static_cast<std::size_t>(state_slots_), false) {
    report_.backend = canary_.name();
    report_.options = options;
    report_.kv_slots = kv_slots_;
    report_.state_slots = state_slots_;
    r2t_.assign(static_cast<std::size_t>(max_reqs_ * max_seq_len_), 0);
    pool_.assign(r2t_.size(), 0);
    for (std::int64_t s = kv_slots_ - 1; s >= 1; --s) free_kv_.push_back(s);         // slot 0: the padding slot
    for (std::int64_t j = state_slots_ - 1; j >= 1; --j) free_states_.push_back(j);  // 0: the dummies' state
    for (std::int64_t r = max_reqs_ - 1; r >= 1; --r) free_rows_.push_back(r);       // row 0: the dummies' row
    schedule_faults(options.faults, options.faults_per_class, options.steps);
  }

  StateSimReport run() {
    for (step_ = 0; step_ < options_.steps; ++step_) {
      admit();
      std::vector<Request*> batch = schedule();
      check(batch);
      forward(batch);
      stamp(batch);
      finish();
    }
    std::vector<Request*> everyone;  // damage of the last steps is read too: every state, parked ones included
    for (Request& q : live_) everyone.push_back(&q);
    check(everyone);
    report_.steps_run = options_.steps;
    summarize();
    return report_;
  }

 private:
  bool percent(std::int64_t p) { return uniform(0, 99) < p; }
  std::int64_t canary_slot(const Request& q) const { return kv_slots_ + q.state; }
  std::int32_t& r2t(std::int64_t row, std::int64_t pos) {
    return r2t_[static_cast<std::size_t>(row * max_seq_len_ + pos)];
  }

  void record_fault(StateFault f, const Request& victim, std::int64_t readable, std::string variant) {
    StateFaultRecord r;
    r.id = static_cast<std::int64_t>(report_.faults.size());
    r.fault = f;
    r.injected_step = step_;
    r.readable_step = readable;
    r.victim = victim.id;
    r.slot = canary_slot(victim);
    r.variant = std::move(variant);
    report_.faults.push_back(r);
  }
  // A request whose state holds damage no check has read yet: not a donor (a copy would carry the damage to a
  // request the ground truth does not name) and not another fault's victim.
  bool pending_victim(const Request& q) const {
    return std::any_of(report_.faults.begin(), report_.faults.end(),
                       [&](const StateFaultRecord& f) { return f.victim == q.id && f.detected_step < 0; });
  }

  // ---- admission: new requests, or prefix hits that fork a live request ----
  void admit() {
    for (Request& q : live_) q.fresh = false;
    while (static_cast<std::int64_t>(live_.size()) < options_.max_active) {
      Request q;
      q.id = next_id_++;
      q.row = free_rows_.back();
      free_rows_.pop_back();
      q.state = free_states_.back();
      free_states_.pop_back();
      state_owner_[static_cast<std::size_t>(q.state)] = q.id;
      Request* donor = pick_donor();
      if (donor != nullptr && (percent(options_.fork_percent) || due(StateFault::Stale) || due(StateFault::Boundary)))
        fork(q, *donor);
      else
        draw(q, 0, uniform(2, options_.max_prompt));
      state_used_[static_cast<std::size_t>(q.state)] = true;
      for (std::int64_t p = 0; p < static_cast<std::int64_t>(q.tokens.size()); ++p)
        pool_[static_cast<std::size_t>(q.row * max_seq_len_ + p)] =
            static_cast<std::int32_t>(q.tokens[static_cast<std::size_t>(p)]);
      live_.push_back(std::move(q));
    }
  }

  // Tokens from position `from` on: a prompt through `prompt` - 1, then the output.
  void draw(Request& q, std::int64_t from, std::int64_t prompt) {
    q.prompt = prompt;
    const std::int64_t total = std::min(prompt + uniform(2, options_.max_output), max_seq_len_);
    for (std::int64_t p = from; p < total; ++p) q.tokens.push_back(uniform(1, 50000));
  }

  // A live request whose state is through its last position and holds no unread damage (seeded choice).
  Request* pick_donor() {
    std::vector<Request*> candidates;
    for (Request& q : live_)
      if (q.has_state && q.length >= 2 && q.length + 2 <= max_seq_len_ && !pending_victim(q)) candidates.push_back(&q);
    if (candidates.empty()) return nullptr;
    return candidates[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(candidates.size()) - 1))];
  }

  // A prefix hit: q shares the donor's first L tokens (their KV slots) and resumes at L from a copy of the
  // donor's state, its record copied with it (export + import). Correct only at L = the donor's length.
  void fork(Request& q, Request& donor) {
    const bool stale = due(StateFault::Stale) && state_used_[static_cast<std::size_t>(q.state)];
    const bool boundary = !stale && due(StateFault::Boundary);
    const std::int64_t hit = boundary ? uniform(1, donor.length - 1) : donor.length;
    q.tokens.assign(donor.tokens.begin(), donor.tokens.begin() + hit);
    draw(q, hit, std::min(hit + uniform(1, options_.max_prompt), max_seq_len_ - 1));
    q.slots.assign(donor.slots.begin(), donor.slots.begin() + hit);
    for (std::int64_t p = 0; p < hit; ++p) {
      ++refs_[static_cast<std::size_t>(q.slots[static_cast<std::size_t>(p)])];
      r2t(q.row, p) = static_cast<std::int32_t>(q.slots[static_cast<std::size_t>(p)]);
    }
    q.length = hit;
    q.has_state = true;
    ++report_.forks;
    if (stale) {  // the engine skips the copy: the fresh state slot keeps what its last owner left
      take(StateFault::Stale);
      record_fault(StateFault::Stale, q, step_, options_.free_states ? "freed" : "another's state");
      return;
    }
    ref::TransferRecords copy(1);
    ref::ViolationRing r = ring();
    canary_.export_records({canary_slot(donor)}, buffer_, copy, r);
    canary_.import_records({canary_slot(q)}, copy, buffer_, r);
    expect_no_rows(r, "state copy");
    if (boundary) {  // the attention group's hit taken as the model-wide boundary: the state is past it
      take(StateFault::Boundary);
      record_fault(StateFault::Boundary, q, step_, "past the boundary");
    }
  }

  // ---- the step's batch: every live request but the parked ones ----
  std::vector<Request*> schedule() {
    std::vector<Request*> batch;
    for (Request& q : live_)
      if (q.fresh || !percent(options_.park_percent)) batch.push_back(&q);
    return batch;
  }

  // The engine's padded batch: a power of two, the dummies on pool row 0 at position 0 with state slot 0.
  static std::int64_t padded(std::int64_t n) {
    std::int64_t bucket = 1;
    while (bucket < n) bucket *= 2;
    return n == 0 ? 0 : bucket;
  }

  // The padded batch as state_plan's triples: each request's state slot, pool row and position (for the stamp
  // its last position p; for the check L - 1, or -1 without a state: no entry), then the dummies on state slot
  // 0 and pool row 0 (stamped at position 0; never checked: they resume from nothing).
  ref::StateInputs state_inputs(const std::vector<Request*>& batch, bool for_stamp) const {
    ref::StateInputs in;
    for (const Request* q : batch) {
      in.state_slots.push_back(canary_slot(*q));
      in.req_pool_indices.push_back(q->row);
      in.positions.push_back(for_stamp || q->has_state ? q->length - 1 : -1);
    }
    const auto size = static_cast<std::size_t>(padded(static_cast<std::int64_t>(batch.size())));
    in.state_slots.resize(size, kv_slots_);
    in.req_pool_indices.resize(size, 0);
    in.positions.resize(size, for_stamp ? 0 : -1);
    in.req_to_token = r2t_;
    in.max_reqs = max_reqs_;
    in.max_seq_len = max_seq_len_;
    in.token_pool = pool_;
    in.pool_rows = max_reqs_;
    in.pool_cols = max_seq_len_;
    return in;
  }
  ref::StatePlan state_plan(const ref::StateInputs& in, const char* what) {
    ref::StatePlan plan = ref::make_state_plan(static_cast<std::int64_t>(in.state_slots.size()), -1);
    ref::ViolationRing r = ring();
    stages_.state_plan(in, plan, r);
    expect_no_rows(r, what);
    return plan;
  }

  // ---- before the forward: the requests that resume from a state are checked at q = L - 1 ----
  void check(std::vector<Request*>& batch) {
    const ref::StatePlan plan = state_plan(state_inputs(batch, false), "check plan");
    report_.checks += plan.plan.verify_num_valid;
    ref::ViolationRing r = ring();
    canary_.verify(plan.plan, buffer_, kv_, r);
    std::vector<ref::RingRow> found = r.rows;
    std::sort(found.begin(), found.end());  // attribution independent of the backend's row order
    report_.rows += static_cast<std::int64_t>(found.size());
    for (const ref::RingRow& row : found) attribute(row);
    abort_detected(batch);
  }

  // A row is a fault's when it names the fault's slot while the fault's victim holds it.
  void attribute(const ref::RingRow& row) {
    const std::int64_t slot = row[kRowSlot];
    const std::int64_t j = slot - kv_slots_;
    const std::int64_t holder = j >= 0 && j < state_slots_ ? state_owner_[static_cast<std::size_t>(j)] : -1;
    for (StateFaultRecord& f : report_.faults) {
      if (holder < 0 || f.victim != holder || f.slot != slot) continue;
      if (f.detected_step >= 0 && f.detected_step < step_) continue;  // retired
      if (f.detected_step < 0) f.detected_step = step_;
      f.reason_bits |= row[kRowFailReasonBits];
      ++f.rows;
      return;
    }
    false_positive(row, "check");
  }

  // An engine acting on its canary: a request whose state failed the check is aborted before the forward.
  void abort_detected(std::vector<Request*>& batch) {
    for (const StateFaultRecord& f : report_.faults) {
      if (f.detected_step != step_) continue;
      const auto it = std::find_if(live_.begin(), live_.end(), [&](const Request& q) { return q.id == f.victim; });
      if (it == live_.end()) continue;
      batch.erase(std::remove(batch.begin(), batch.end(), &*it), batch.end());
      release(*it);
      ++report_.requests_aborted;
    }
    live_.remove_if([](const Request& q) { return q.id < 0; });
  }

  // ---- the forward: its KV write (new requests and forks: their prompt; others: one token) ----
  void forward(const std::vector<Request*>& batch) {
    if (batch.empty()) return;
    ref::Outputs plan = ref::make_outputs(0, static_cast<std::int64_t>(batch.size()), 0);
    ref::StepTokens t;
    plan.write_offsets.assign(batch.size() + 1, 0);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Request& q = *batch[i];
      plan.write_seed_slot_indices[i] = q.length == 0 ? -1 : q.slots.back();
      const std::int64_t end = q.length < q.prompt ? q.prompt : q.length + 1;
      for (std::int64_t p = q.length; p < end; ++p) {
        const std::int64_t slot = free_kv_.back();
        free_kv_.pop_back();
        refs_[static_cast<std::size_t>(slot)] = 1;
        r2t(q.row, p) = static_cast<std::int32_t>(slot);
        q.slots.push_back(slot);
        t.input_ids.push_back(q.tokens[static_cast<std::size_t>(p)]);
        t.positions.push_back(p);
        t.out_cache_loc.push_back(slot);
      }
      q.length = end;
      plan.write_offsets[i + 1] = static_cast<std::int64_t>(t.positions.size());
    }
    plan.write_num_valid_reqs = static_cast<std::int32_t>(batch.size());
    ref::ViolationRing r = ring();
    canary_.write(plan, t, kv_, buffer_, r);
    expect_no_rows(r, "KV write");
  }

  // ---- after the forward and its KV write: the padded batch's state slots stamped at q = p ----
  void stamp(const std::vector<Request*>& batch) {
    if (batch.empty()) return;
    ref::StateInputs in = state_inputs(batch, true);
    Int64s& slots = in.state_slots;
    const auto first_dummy = static_cast<std::ptrdiff_t>(batch.size());
    report_.dummies += static_cast<std::int64_t>(slots.size()) - first_dummy;
    if (slots.size() > batch.size() && due(StateFault::Alias)) alias(batch, slots[batch.size()]);
    if (options_.stamp_skips_dummies)  // the engine's update still writes the dummies' slots, the stamp does not
      std::fill(slots.begin() + first_dummy, slots.end(), -1);
    for (Request* q : batch) q->has_state = true;
    const ref::StatePlan plan = state_plan(in, "stamp plan");
    report_.stamps += plan.plan.write_num_valid_reqs;
    ref::ViolationRing r = ring();
    canary_.write(plan.plan, plan.tokens, kv_, buffer_, r);
    expect_no_rows(r, "stamp");
  }

  // The graph's dummy keeps a stale state-slot index: a parked request's (seeded choice, one with a state).
  void alias(const std::vector<Request*>& batch, std::int64_t& dummy_slot) {
    std::vector<Request*> parked;
    for (Request& q : live_)
      if (q.has_state && std::find(batch.begin(), batch.end(), &q) == batch.end() && !pending_victim(q))
        parked.push_back(&q);
    if (parked.empty()) return;
    const Request& victim = *parked[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(parked.size()) - 1))];
    take(StateFault::Alias);
    dummy_slot = canary_slot(victim);
    record_fault(StateFault::Alias, victim, step_ + 1, "dummy");
  }

  // ---- finished requests give back their KV, state slot and pool row ----
  void finish() {
    for (Request& q : live_)
      if (q.length == static_cast<std::int64_t>(q.tokens.size())) {
        release(q);
        ++report_.requests_finished;
      }
    live_.remove_if([](const Request& q) { return q.id < 0; });
  }

  void release(Request& q) {
    for (const std::int64_t s : q.slots)
      if (--refs_[static_cast<std::size_t>(s)] == 0) free_kv_.push_back(s);
    if (options_.free_states) {
      ref::ViolationRing r = ring();
      canary_.free({canary_slot(q)}, step_, buffer_, r);
      expect_no_rows(r, "free");
    }
    state_owner_[static_cast<std::size_t>(q.state)] = -1;
    free_states_.push_back(q.state);
    free_rows_.push_back(q.row);
    q.id = -1;  // removed by the caller
  }

  void summarize() {
    count_skipped();
    for (const StateFaultRecord& f : report_.faults) {
      StateClassSummary& c = report_.classes[static_cast<int>(f.fault)];
      ++c.injected;
      c.reason_bits |= f.reason_bits;
      if (f.detected_step < 0) {
        ++c.missed;
        continue;
      }
      ++c.detected;
      c.max_latency = std::max(c.max_latency, f.latency());
    }
  }

  StateStages& stages_;
  TransferStages& canary_;
  StateSimOptions options_;
  std::int64_t max_seq_len_, max_reqs_, kv_slots_, state_slots_;
  ref::CanaryBuffer buffer_;              // kv_slots_ KV records, then the state records (SPEC-CANARY §13.1)
  ref::RealKv kv_;                        // NONE: a state record has no fingerprint (§13.5)
  std::vector<std::int32_t> r2t_, pool_;  // req_to_token and the token pool, [max_reqs, max_seq_len]
  Int64s refs_, free_kv_, free_states_, free_rows_, state_owner_;
  std::vector<bool> state_used_;
  std::list<Request> live_;
  std::int64_t next_id_ = 1;
};

void check_options(const StateSimOptions& o) {
  check_shared_options("state", o);
  if (o.fork_percent < 0 || o.fork_percent > 100 || o.park_percent < 0 || o.park_percent > 100)
    bad_model_option("state", "fork_percent and park_percent must be in [0, 100]");
}

struct ReferenceStateStages final : StateStages {
  std::unique_ptr<TransferStages> stages = reference_transfer_stages();
  TransferStages& canary() override { return *stages; }
  void state_plan(const ref::StateInputs& inputs, ref::StatePlan& plan, ref::ViolationRing& ring) override {
    ref::state_plan(inputs, plan, KernelKind::HEAD_K_FULL, ring);
  }
};

}  // namespace

const char* state_fault_name(StateFault fault) {
  return fault_name(fault, kNames);
}

std::vector<StateFault> parse_state_faults(const std::string& list) {
  return parse_fault_list<StateFault>(list, kNames, "state fault");
}

std::int64_t StateSimReport::missed() const {
  return total_of(classes, &StateClassSummary::missed);
}
std::int64_t StateSimReport::skipped() const {
  return total_of(classes, &StateClassSummary::skipped);
}

std::string format_state_table(const StateSimReport& report) {
  std::ostringstream os;
  os << "state slots (" << report.backend << "): " << report.steps_run << " steps, " << report.kv_slots
     << " KV slots + " << report.state_slots << " state slots, " << report.forks << " prefix hits (forks), "
     << report.checks << " state checks, " << report.stamps << " stamps (" << report.dummies << " dummies), "
     << report.requests_finished << " requests finished, " << report.requests_aborted << " aborted\n";
  os << std::left << std::setw(16) << "class" << std::right << std::setw(9) << "injected" << std::setw(9) << "detected"
     << std::setw(7) << "missed" << std::setw(8) << "skipped"
     << "  " << std::left << std::setw(20) << "caught by" << std::right << std::setw(5) << "bits" << std::setw(13)
     << "max_latency"
     << "\n";
  for (int k = 0; k < kStateFaults; ++k) {
    const StateClassSummary& c = report.classes[k];
    os << std::left << std::setw(16) << kNames[k] << std::right << std::setw(9) << c.injected << std::setw(9)
       << c.detected << std::setw(7) << c.missed << std::setw(8) << c.skipped << "  " << std::left << std::setw(20)
       << (c.detected > 0 ? "state check (verify)" : "-") << std::right << std::setw(5) << c.reason_bits
       << std::setw(13) << c.max_latency << "\n";
  }
  for (const StateFaultRecord& f : report.faults) {
    os << "  fault " << f.id << " " << kNames[static_cast<int>(f.fault)] << " (" << f.variant << "): request "
       << f.victim << ", slot " << f.slot << ", readable at step " << f.readable_step;
    if (f.detected_step < 0)
      os << ": MISSED\n";
    else
      os << ": caught at step " << f.detected_step << " (latency " << f.latency() << "), bits " << f.reason_bits << ", "
         << f.rows << (f.rows == 1 ? " row\n" : " rows\n");
  }
  os << "rows " << report.rows << ", false positives " << report.false_positives << "\n";
  for (const std::string& line : report.false_positive_lines) os << "  false positive: " << line << "\n";
  os << (report.ok() ? std::string("OK: every state fault detected, no false positive\n")
                     : "FAIL: " + std::to_string(report.missed()) + " missed, " + std::to_string(report.skipped()) +
                           " skipped (no step could host them), " + std::to_string(report.false_positives) +
                           " false positives\n");
  return os.str();
}

std::unique_ptr<StateStages> reference_state_stages() {
  return std::make_unique<ReferenceStateStages>();
}

StateSimReport simulate_state(StateStages& stages, const StateSimOptions& options) {
  check_options(options);
  return StateModel(stages, options).run();
}

StateSimReport simulate_state(const StateSimOptions& options, const std::string& backend) {
  return on_backend(backend, [&](const auto& space) { return simulate_state(space, options); });
}

}  // namespace sim
}  // namespace kvcanary
