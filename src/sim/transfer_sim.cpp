// The two-place engine model (transfer_sim.hpp, docs/simulator.md "Two places"): a prefill place, a decode
// place and a host tier; records travel with the KV bytes through the canary's export/import/relocate
// stages (SPEC-CANARY §12), transfer faults are injected with ground truth, and the decode place's verify
// of every live prefix is attributed to them.

#include "transfer_sim.hpp"

#include "backend_by_name.hpp"
#include "fault_list.hpp"
#include "fault_model.hpp"

#include <kvcanary/impl/hash.hpp>

#include <algorithm>
#include <array>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>

namespace kvcanary {
namespace sim {

namespace {

constexpr const char* kNames[kTransferFaults] = {"late_write", "partial_transfer", "layout_mixup", "stale_tier",
                                                 "defrag_bytes"};
constexpr std::int64_t kTokenBytes = 32;  // one real-KV source, 32 bytes a token, page size 1

using Int64s = std::vector<std::int64_t>;

// One engine's pool: its canary buffer, its KV bytes, a LIFO free list and who holds each slot.
struct Place {
  ref::CanaryBuffer canary;
  ref::RealKv kv;
  Int64s free_stack;
  Int64s owner;  // request id per slot, -1: free

  Place(std::int64_t slots, RealKvMode mode) : canary(static_cast<std::size_t>(slots)), owner(static_cast<std::size_t>(slots), -1) {
    kv.mode = mode;
    ref::RealKvSource source;
    source.pages = slots;
    source.row_bytes = source.bytes_per_token = source.read_bytes = kTokenBytes;
    source.bytes.assign(static_cast<std::size_t>(slots * kTokenBytes), 0);
    kv.sources.push_back(source);
    for (std::int64_t s = slots - 1; s >= 1; --s) free_stack.push_back(s);  // slot 0 is the padding slot
  }
  std::uint8_t* bytes(std::int64_t slot) { return kv.sources[0].bytes.data() + slot * kTokenBytes; }
  Int64s allocate(std::int64_t n, std::int64_t request) {
    Int64s slots;
    for (std::int64_t i = 0; i < n; ++i) {
      slots.push_back(free_stack.back());
      free_stack.pop_back();
      owner[static_cast<std::size_t>(slots.back())] = request;
    }
    return slots;
  }
  void release(const Int64s& slots) {
    for (const std::int64_t s : slots) {
      owner[static_cast<std::size_t>(s)] = -1;
      free_stack.push_back(s);
    }
  }
};

// A tier entry: the records and bytes of a prefix of `length` tokens.
struct TierEntry {
  ref::TransferRecords records;
  std::vector<std::uint8_t> bytes;
  std::int64_t length = 0;
};

struct Request {
  std::int64_t id = 0;
  Int64s tokens;  // prompt and output, drawn at arrival
  std::int64_t prompt = 0, length = 0;  // tokens written so far
  Int64s slots;   // at the decode place, one per position < length
  TierEntry first_entry;  // what the tier stored after the prefill (a later store may fail: stale_tier)
};

class TwoPlaces : FaultModel<TransferFault, TransferSimReport> {
 public:
  TwoPlaces(TransferStages& stages, const TransferSimOptions& options)
      : FaultModel(options.seed), stages_(stages), options_(options), prefill_(options.slots_per_place, options.real_kv),
        decode_(options.slots_per_place, options.real_kv) {
    report_.backend = stages.name();
    report_.options = options;
    schedule_faults(options.faults, options.faults_per_class, options.steps);
  }

  TransferSimReport run() {
    for (step_ = 0; step_ < options_.steps; ++step_) {
      verify_decode_place();
      decode();
      admit();
      if (options_.tier_every > 0 && step_ % options_.tier_every == 0) tier_round_trip();
      if (options_.defrag_every > 0 && step_ % options_.defrag_every == 0) defragment();
    }
    verify_decode_place();  // damage of the last step is read too
    report_.steps_run = options_.steps;
    summarize();
    return report_;
  }

 private:
  bool coin() { return uniform(0, 1) == 0; }
  bool rkv() const { return options_.real_kv != RealKvMode::None; }

  TransferFaultRecord& record_fault(TransferFault f, std::int64_t victim, Int64s slots, bool covered, std::string variant) {
    TransferFaultRecord r;
    r.id = static_cast<std::int64_t>(report_.faults.size());
    r.fault = f;
    r.step = step_;
    r.victim = victim;
    r.slots = std::move(slots);
    r.covered = covered;
    r.variant = std::move(variant);
    report_.faults.push_back(r);
    return report_.faults.back();
  }

  // The KV the model computes for a token: bytes that differ between requests, positions and tokens.
  static void compute_kv(Place& place, std::int64_t slot, std::int64_t request, std::int64_t position, std::int64_t token) {
    std::uint64_t x = Impl::splitmix64(static_cast<std::uint64_t>(request) * 0x9E3779B97F4A7C15ULL ^
                                       static_cast<std::uint64_t>(position) << 20 ^ static_cast<std::uint64_t>(token));
    for (std::int64_t b = 0; b < kTokenBytes; b += 8) {
      x = Impl::splitmix64(x + 0x632BE59BD9B4E019ULL);
      std::copy_n(reinterpret_cast<const std::uint8_t*>(&x), 8, place.bytes(slot) + b);
    }
  }

  void free_slots(Place& place, const Int64s& slots) {
    if (slots.empty()) return;
    ref::ViolationRing r = ring();
    stages_.free(slots, step_, place.canary, r);
    expect_no_rows(r, "free");
    place.release(slots);
  }

  // ---- the decode place's check: every live prefix, every step ----
  void verify_decode_place() {
    std::vector<std::array<std::int64_t, 4>> entries;
    for (const Request& q : active_)
      for (std::int64_t p = 0; p < q.length; ++p)
        entries.push_back({q.slots[static_cast<std::size_t>(p)], p, p == 0 ? -1 : q.slots[static_cast<std::size_t>(p - 1)],
                           q.tokens[static_cast<std::size_t>(p)]});
    ref::ViolationRing r = ring();
    stages_.verify(ref::verify_plan_of(entries), decode_.canary, decode_.kv, r);
    std::vector<ref::RingRow> rows = r.rows;
    std::sort(rows.begin(), rows.end());  // attribution independent of the backend's row order
    report_.rows += static_cast<std::int64_t>(rows.size());
    for (const ref::RingRow& row : rows) attribute(row);
    abort_detected();
  }

  // A row is a fault's when the slot it names is held by the fault's victim now (a slot the fault damaged
  // that has since gone to another request is no longer its); a covered fault before an uncovered one,
  // which cannot produce rows and so never takes credit for another's.
  void attribute(const ref::RingRow& row) {
    const std::int64_t slot = row[kRowSlot];
    const std::int64_t holder =
        slot >= 0 && slot < options_.slots_per_place ? decode_.owner[static_cast<std::size_t>(slot)] : -1;
    for (const bool covered : {true, false})
      for (TransferFaultRecord& f : report_.faults) {
        if (f.covered != covered || holder < 0 || holder != f.victim) continue;
        if (f.detected_step >= 0 && f.detected_step < step_) continue;  // retired
        if (f.detected_step < 0) f.detected_step = step_;
        f.reason_bits |= row[kRowFailReasonBits];
        ++f.rows;
        return;
      }
    false_positive(row, "verify");
  }

  // An engine acting on its canary: a detected fault's victim is aborted (its pages freed).
  void abort_detected() {
    for (const TransferFaultRecord& f : report_.faults) {
      if (f.detected_step != step_) continue;
      const auto it = std::find_if(active_.begin(), active_.end(), [&](const Request& q) { return q.id == f.victim; });
      if (it == active_.end()) continue;
      free_slots(decode_, it->slots);
      active_.erase(it);
      ++report_.requests_aborted;
    }
  }

  // ---- decode: one token per live request, one write call ----
  void decode() {
    if (active_.empty()) return;
    ref::Outputs plan = ref::make_outputs(0, static_cast<std::int64_t>(active_.size()), 0);
    ref::StepTokens t;
    plan.write_offsets.assign(active_.size() + 1, 0);
    for (std::size_t r = 0; r < active_.size(); ++r) {
      Request& q = active_[r];
      const std::int64_t slot = decode_.allocate(1, q.id)[0];
      compute_kv(decode_, slot, q.id, q.length, q.tokens[static_cast<std::size_t>(q.length)]);
      plan.write_seed_slot_indices[r] = q.slots.back();
      plan.write_offsets[r + 1] = static_cast<std::int64_t>(r + 1);
      t.input_ids.push_back(q.tokens[static_cast<std::size_t>(q.length)]);
      t.positions.push_back(q.length);
      t.out_cache_loc.push_back(slot);
      q.slots.push_back(slot);
      ++q.length;
    }
    plan.write_num_valid_reqs = static_cast<std::int32_t>(active_.size());
    ref::ViolationRing r = ring();
    stages_.write(plan, t, decode_.kv, decode_.canary, r);
    expect_no_rows(r, "decode write");
    for (auto it = active_.begin(); it != active_.end();) {
      if (it->length < static_cast<std::int64_t>(it->tokens.size())) {
        ++it;
        continue;
      }
      free_slots(decode_, it->slots);
      it = active_.erase(it);
      ++report_.requests_finished;
    }
  }

  // ---- the prefill place, and the transfer to the decode place ----
  Request arrive() {
    Request q;
    q.id = next_id_++;
    q.prompt = uniform(2, options_.max_prompt);
    const std::int64_t total = q.prompt + uniform(2, options_.max_output);
    for (std::int64_t i = 0; i < total; ++i) q.tokens.push_back(uniform(1, 50000));
    return q;
  }

  // Prefill on the prefill place: KV bytes, then the write stamps them (seed -1, positions 0..prompt-1).
  Int64s prefill(const Request& q) {
    const Int64s slots = prefill_.allocate(q.prompt, q.id);
    ref::Outputs plan = ref::make_outputs(0, 1, 0);
    plan.write_offsets = {0, q.prompt};
    plan.write_seed_slot_indices = {-1};
    plan.write_num_valid_reqs = 1;
    ref::StepTokens t;
    for (std::int64_t p = 0; p < q.prompt; ++p) {
      compute_kv(prefill_, slots[static_cast<std::size_t>(p)], q.id, p, q.tokens[static_cast<std::size_t>(p)]);
      t.input_ids.push_back(q.tokens[static_cast<std::size_t>(p)]);
      t.positions.push_back(p);
      t.out_cache_loc.push_back(slots[static_cast<std::size_t>(p)]);
    }
    ref::ViolationRing r = ring();
    stages_.write(plan, t, prefill_.kv, prefill_.canary, r);
    expect_no_rows(r, "prefill write");
    return slots;
  }

  // How a transfer goes wrong (none: a correct one).
  struct Damage {
    std::int64_t records = -1;  // >= 0: only the first `records` records are imported
    std::int64_t bytes = -1;    // >= 0: only the first `bytes` tokens' bytes are copied
    bool swap_halves = false;   // the bytes arrive in another layout
  };

  // Records and bytes of the prefill place's `from` to the decode place's `to` (the KV transport).
  void send(const Int64s& from, const Int64s& to, const Damage& damage, ref::TransferRecords* wire_out = nullptr) {
    ref::TransferRecords wire(from.size());
    ref::ViolationRing r = ring();
    stages_.export_records(from, prefill_.canary, wire, r);
    expect_no_rows(r, "export");
    for (std::size_t i = 0; i < from.size(); ++i) {
      if (damage.bytes >= 0 && static_cast<std::int64_t>(i) >= damage.bytes) continue;
      std::copy_n(prefill_.bytes(from[i]), kTokenBytes, decode_.bytes(to[i]));
      if (damage.swap_halves) std::swap_ranges(decode_.bytes(to[i]), decode_.bytes(to[i]) + 16, decode_.bytes(to[i]) + 16);
    }
    Int64s targets = to;
    if (damage.records >= 0)
      for (std::size_t i = static_cast<std::size_t>(damage.records); i < targets.size(); ++i) targets[i] = -1;
    r = ring();
    stages_.import_records(targets, wire, decode_.canary, r);
    expect_no_rows(r, "import");
    report_.records_moved += static_cast<std::int64_t>(from.size());
    ++report_.transfers;
    if (wire_out != nullptr) *wire_out = wire;
  }

  // A request prefilled and moved to the decode place (with a transfer fault when one is due and allowed).
  void transfer(Request q, bool may_fault = true) {
    const Int64s from = prefill(q);
    Damage damage;
    std::optional<TransferFault> fault;
    for (const TransferFault f : {TransferFault::PartialTransfer, TransferFault::LayoutMixup})
      if (may_fault && !fault && take(f)) fault = f;
    std::string variant;
    if (fault == TransferFault::PartialTransfer) {
      const std::int64_t k = uniform(1, q.prompt - 1);
      variant = coin() ? "records" : "bytes";
      (variant == "records" ? damage.records : damage.bytes) = k;
    } else if (fault == TransferFault::LayoutMixup) {
      damage.swap_halves = true;
      variant = "layout";
    }
    q.slots = decode_.allocate(q.prompt, q.id);
    send(from, q.slots, damage, &q.first_entry.records);
    q.length = q.prompt;
    q.first_entry.length = q.prompt;
    for (const std::int64_t s : q.slots) q.first_entry.bytes.insert(q.first_entry.bytes.end(), decode_.bytes(s), decode_.bytes(s) + kTokenBytes);
    free_slots(prefill_, from);
    if (fault) {
      Int64s damaged = q.slots;
      const std::int64_t k = std::max(damage.records, damage.bytes);
      if (k >= 0) damaged.erase(damaged.begin(), damaged.begin() + k);
      record_fault(*fault, q.id, damaged, variant == "records" || rkv(), variant);
    }
    active_.push_back(std::move(q));
  }

  // late_write: A's destination pages are freed (A aborted) and handed to B; then A's write lands.
  void late_write(Request a) {
    const Int64s from = prefill(a);
    const Int64s late_to = decode_.allocate(a.prompt, a.id);
    free_slots(decode_, late_to);  // the abort: LIFO, so B gets these pages first
    ++report_.requests_aborted;
    Request b = arrive();
    const std::int64_t b_id = b.id;
    transfer(std::move(b), /*may_fault=*/false);  // one fault per victim
    const Request& victim = active_.back();
    const bool records = coin();
    // The late write: A's bytes, and with "records" A's canary records too (they travel in the same write).
    Damage late;
    if (!records) late.records = 0;
    send(from, late_to, late);
    free_slots(prefill_, from);
    Int64s hit;
    for (const std::int64_t s : late_to)
      if (std::find(victim.slots.begin(), victim.slots.end(), s) != victim.slots.end()) hit.push_back(s);
    record_fault(TransferFault::LateWrite, b_id, hit, records || rkv(), records ? "records" : "bytes");
  }

  void admit() {
    while (static_cast<std::int64_t>(active_.size()) < options_.max_active) {
      if (take(TransferFault::LateWrite)) {
        late_write(arrive());
      } else {
        transfer(arrive());
      }
    }
  }

  // A live request that can host an event (seeded choice), or nullptr.
  Request* pick(bool need_decoded) {
    std::vector<Request*> candidates;
    for (Request& q : active_)
      if (!need_decoded || q.length > q.first_entry.length) candidates.push_back(&q);
    if (candidates.empty()) return nullptr;
    return candidates[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(candidates.size()) - 1))];
  }

  // ---- the host tier: offload a live request and restore it at new slots ----
  void tier_round_trip() {
    const bool stale = due(TransferFault::StaleTier);
    Request* q = pick(stale);
    if (q == nullptr) return;
    if (stale) take(TransferFault::StaleTier);
    TierEntry entry;
    entry.records.resize(q->slots.size());
    ref::ViolationRing r = ring();
    stages_.export_records(q->slots, decode_.canary, entry.records, r);
    expect_no_rows(r, "offload export");
    for (const std::int64_t s : q->slots) entry.bytes.insert(entry.bytes.end(), decode_.bytes(s), decode_.bytes(s) + kTokenBytes);
    entry.length = q->length;
    free_slots(decode_, q->slots);
    ++report_.offloads;
    // The store of this entry failed: the restore serves the one the tier held (the prefill's).
    const TierEntry& served = stale ? q->first_entry : entry;
    q->slots = decode_.allocate(q->length, q->id);
    Int64s targets(q->slots.begin(), q->slots.begin() + served.length);
    for (std::int64_t i = 0; i < served.length; ++i)
      std::copy_n(served.bytes.data() + i * kTokenBytes, kTokenBytes, decode_.bytes(q->slots[static_cast<std::size_t>(i)]));
    r = ring();
    stages_.import_records(targets, served.records, decode_.canary, r);
    expect_no_rows(r, "restore import");
    report_.records_moved += served.length;
    if (stale) {
      const Int64s missing(q->slots.begin() + served.length, q->slots.end());
      record_fault(TransferFault::StaleTier, q->id, missing, true, "older entry");
    }
  }

  // ---- defragmentation: a live request's records and bytes move to other slots ----
  void defragment() {
    Request* q = pick(false);
    if (q == nullptr) return;
    const bool faulty = take(TransferFault::DefragBytes);
    const Int64s to = decode_.allocate(q->length, q->id);
    ref::TransferRecords staging(to.size());
    ref::ViolationRing r = ring();
    stages_.relocate(q->slots, to, decode_.canary, staging, r);
    expect_no_rows(r, "relocate");
    const std::int64_t garbage = faulty ? uniform(0, q->length - 1) : -1;
    for (std::size_t i = 0; i < to.size(); ++i) {
      if (static_cast<std::int64_t>(i) == garbage) std::fill_n(decode_.bytes(to[i]), kTokenBytes, std::uint8_t{0xEE});
      else std::copy_n(decode_.bytes(q->slots[i]), kTokenBytes, decode_.bytes(to[i]));
    }
    free_slots(decode_, q->slots);
    q->slots = to;
    ++report_.relocations;
    report_.records_moved += q->length;
    if (faulty) record_fault(TransferFault::DefragBytes, q->id, {to[static_cast<std::size_t>(garbage)]}, rkv(), "garbage cell");
  }

  void summarize() {
    count_skipped();
    for (const TransferFaultRecord& f : report_.faults) {
      TransferClassSummary& c = report_.classes[static_cast<int>(f.fault)];
      ++c.injected;
      c.reason_bits |= f.reason_bits;
      if (!f.covered) {
        ++c.not_covered;
        continue;
      }
      ++c.detectable;
      if (f.detected_step >= 0) ++c.detected;
      else ++c.missed;
    }
  }

  TransferStages& stages_;
  TransferSimOptions options_;
  Place prefill_, decode_;
  std::vector<Request> active_;
  std::int64_t next_id_ = 1;
};

void check_options(const TransferSimOptions& o) {
  const auto bad = [](const std::string& what) { bad_model_option("two places", what); };
  check_shared_options("two places", o);
  if (o.tier_every < 0 || o.defrag_every < 0) bad("tier_every and defrag_every must be >= 0");
  if (o.slots_per_place > (std::int64_t{1} << 22)) bad("slots_per_place must be <= 4194304");
  // Live requests, one more being moved (defragmentation), an aborted transfer's pages, and the padding slot.
  const std::int64_t needed = (o.max_active + 2) * (o.max_prompt + o.max_output) + 1;
  if (o.slots_per_place < needed)
    bad("slots_per_place is " + std::to_string(o.slots_per_place) + ", these options need " + std::to_string(needed));
}

struct ReferenceStages final : TransferStages {
  std::string name() const override { return "reference"; }
  void write(const ref::Outputs& plan, const ref::StepTokens& tokens, const ref::RealKv& kv, ref::CanaryBuffer& buffer,
             ref::ViolationRing& ring) override {
    ref::write(plan, tokens, KernelKind::HEAD_K_FULL, kv, buffer, ring);
  }
  void verify(const ref::Outputs& plan, const ref::CanaryBuffer& buffer, const ref::RealKv& kv,
              ref::ViolationRing& ring) override {
    ref::verify(plan, buffer, KernelKind::HEAD_K_FULL, kv, true, VerifyChecks{}, ring);
  }
  void free(const Int64s& slots, std::int64_t epoch, ref::CanaryBuffer& buffer, ref::ViolationRing& ring) override {
    ref::free(slots, epoch, KernelKind::HEAD_K_FULL, buffer, ring);
  }
  void export_records(const Int64s& slots, const ref::CanaryBuffer& buffer, ref::TransferRecords& out,
                      ref::ViolationRing& ring) override {
    ref::export_records(slots, buffer, out, KernelKind::HEAD_K_FULL, ring);
  }
  void import_records(const Int64s& slots, const ref::TransferRecords& in, ref::CanaryBuffer& buffer,
                      ref::ViolationRing& ring) override {
    ref::import_records(slots, in, buffer, KernelKind::HEAD_K_FULL, ring);
  }
  void relocate(const Int64s& src, const Int64s& dst, ref::CanaryBuffer& buffer, ref::TransferRecords& staging,
                ref::ViolationRing& ring) override {
    ref::relocate(src, dst, buffer, staging, KernelKind::HEAD_K_FULL, ring);
  }
};

}  // namespace

const char* transfer_fault_name(TransferFault fault) {
  return fault_name(fault, kNames);
}

std::vector<TransferFault> parse_transfer_faults(const std::string& list) {
  return parse_fault_list<TransferFault>(list, kNames, "transfer fault");
}

std::int64_t TransferSimReport::missed() const { return total_of(classes, &TransferClassSummary::missed); }

std::string format_transfer_table(const TransferSimReport& report) {
  std::ostringstream os;
  os << "two places (" << report.backend << "): " << report.steps_run << " steps, " << report.transfers
     << " transfers, " << report.offloads << " tier round trips, " << report.relocations << " relocations, "
     << report.records_moved << " records moved, " << report.requests_finished << " requests finished, "
     << report.requests_aborted << " aborted\n";
  os << std::left << std::setw(18) << "class" << std::right << std::setw(9) << "injected" << std::setw(12)
     << "not_covered" << std::setw(11) << "detectable" << std::setw(9) << "detected" << std::setw(7) << "missed"
     << std::setw(8) << "skipped" << std::setw(7) << "bits" << "\n";
  for (int k = 0; k < kTransferFaults; ++k) {
    const TransferClassSummary& c = report.classes[k];
    os << std::left << std::setw(18) << kNames[k] << std::right << std::setw(9) << c.injected << std::setw(12)
       << c.not_covered << std::setw(11) << c.detectable << std::setw(9) << c.detected << std::setw(7) << c.missed
       << std::setw(8) << c.skipped << std::setw(7) << c.reason_bits << "\n";
  }
  os << "rows " << report.rows << ", false positives " << report.false_positives << "\n";
  for (const std::string& line : report.false_positive_lines) os << "  false positive: " << line << "\n";
  os << (report.ok() ? std::string("OK: every detectable transfer fault detected, no false positive\n")
                     : "FAIL: " + std::to_string(report.missed()) + " missed, " + std::to_string(report.false_positives) +
                           " false positives\n");
  return os.str();
}

std::unique_ptr<TransferStages> reference_transfer_stages() { return std::make_unique<ReferenceStages>(); }

TransferSimReport simulate_transfer(TransferStages& stages, const TransferSimOptions& options) {
  check_options(options);
  return TwoPlaces(stages, options).run();
}

TransferSimReport simulate_transfer(const TransferSimOptions& options, const std::string& backend) {
  return on_backend(backend, [&](const auto& space) { return simulate_transfer(space, options); });
}

}  // namespace sim
}  // namespace kvcanary
