#ifndef KVCANARY_PERF_CANARY_WORKLOADS_HPP
#define KVCANARY_PERF_CANARY_WORKLOADS_HPP

// The data of the verify and write benchmarks (SPEC-CANARY §4–§5), on the host:
// * VerifyCase: a SPEC §7 workload redrawn with distinct slots, its reference plan, and a canary buffer
//   stamped (by kvcanary::reference::write) so that the plan verifies clean;
// * WriteCase: one write call (decode or a prefill chunk) with distinct slots, its stamped seeds, and the
//   buffer and ring kvcanary::reference::write makes of it.
//
// Why distinct slots (GPU-FLOORS.md): workloads.hpp draws every req_to_token cell with replacement, so
// 17–55% of a plan's entries share a slot and no buffer verifies clean. An engine's allocator hands a
// request distinct slots; so do these cases, keeping the slot range, the entry counts and a random order.

#include "workloads.hpp"

#include <kvcanary/tools/reference_canary.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvcanary_perf {

namespace canary = kvcanary::reference;

// Values of [lo, hi) without replacement, in random order: a partial Fisher–Yates shuffle.
class DistinctDraw {
 public:
  DistinctDraw(std::int64_t lo, std::int64_t hi, std::mt19937_64& rng) : rng_(rng), values_(static_cast<std::size_t>(hi - lo)) {
    for (std::size_t i = 0; i < values_.size(); ++i) values_[i] = lo + static_cast<std::int64_t>(i);
  }
  std::int64_t operator()() {
    if (next_ == values_.size()) throw std::logic_error("kvcanary_perf: a workload needs more distinct slots than its range holds");
    const std::size_t j = std::uniform_int_distribution<std::size_t>(next_, values_.size() - 1)(rng_);
    std::swap(values_[next_], values_[j]);
    return values_[next_++];
  }

 private:
  std::mt19937_64& rng_;
  std::vector<std::int64_t> values_;
  std::size_t next_ = 0;
};

// A request row's cells: pool row rp, positions [first, end).
struct RowCells {
  std::int64_t rp, first, end;
};

// The cells a request row uses in one step: its prefix and its extend, and for a windowed row only the
// window, its real predecessor and the extend (what plan() reads; the rest of the prefix stays as drawn).
inline std::vector<RowCells> used_cells(const Inputs& in) {
  std::vector<RowCells> rows;
  for (std::size_t r = 0; r < in.req_pool_indices.size(); ++r) {
    const std::int64_t prefix = in.prefix_lens[r];
    const std::int64_t window_start = in.swa_window_size > 0 ? std::max<std::int64_t>(0, prefix - in.swa_window_size) : 0;
    rows.push_back({in.req_pool_indices[r], std::max<std::int64_t>(0, window_start - 1), prefix + in.extend_seq_lens[r]});
  }
  return rows;
}

// Redraws the used cells of `w` as distinct slots in [1, full_slots) (slot 0 is the engine's padding
// slot, never verified), and with a LUT maps those full slots to distinct SWA slots in [1, swa_slots).
inline void draw_distinct_slots(Workload& w, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs& in = w.inputs;
  const std::int64_t cells = in.max_reqs * in.max_seq_len;
  const std::int64_t full_slots = std::min<std::int64_t>(cells, INT32_MAX);  // as build_workload draws them
  DistinctDraw full(1, full_slots, rng);
  const std::vector<RowCells> rows = used_cells(in);
  for (const RowCells& row : rows)
    for (std::int64_t p = 0; p < row.end; ++p)  // the whole prefix: its full slots index the LUT
      in.req_to_token[static_cast<std::size_t>(row.rp * in.max_seq_len + p)] = static_cast<std::int32_t>(full());
  if (in.full_to_swa_index_mapping) {
    std::vector<std::int64_t>& lut = *in.full_to_swa_index_mapping;
    const std::int64_t bs = static_cast<std::int64_t>(in.req_pool_indices.size());
    DistinctDraw swa(1, std::max<std::int64_t>(2, 2 * bs * in.swa_window_size), rng);
    for (const RowCells& row : rows)
      for (std::int64_t p = row.first; p < row.end; ++p)
        lut[static_cast<std::size_t>(in.req_to_token[static_cast<std::size_t>(row.rp * in.max_seq_len + p)])] = swa();
  }
}

// SPEC §4's T(): the LUT translation of a full slot (identity without a LUT).
inline std::int64_t translate(const Inputs& in, std::int64_t full_slot) {
  if (!in.full_to_swa_index_mapping || full_slot < 0) return full_slot;
  const std::vector<std::int64_t>& lut = *in.full_to_swa_index_mapping;
  return lut[static_cast<std::size_t>(std::min<std::int64_t>(full_slot, static_cast<std::int64_t>(lut.size()) - 1))];
}

inline std::int64_t num_canary_slots(const Inputs& in) {
  if (in.full_to_swa_index_mapping)
    return std::max<std::int64_t>(2, 2 * static_cast<std::int64_t>(in.req_pool_indices.size()) * in.swa_window_size);
  return std::min<std::int64_t>(in.max_reqs * in.max_seq_len, INT32_MAX);
}

// "; first row [...]" of a host ring for a failure message, or "" without a row.
inline std::string first_row(const canary::ViolationRing& ring) {
  if (ring.rows.empty()) return "";
  std::string text = "; first row [";
  for (std::size_t f = 0; f < ring.rows[0].size(); ++f) text += (f ? ", " : "") + std::to_string(ring.rows[0][f]);
  return text + "]";
}

// ---- verify ----

struct VerifyCase {
  Workload workload;                 // the SPEC §7 workload with distinct slots
  canary::Outputs plan;              // reference::plan of it
  canary::CanaryBuffer stamped;      // every entry's record (and every window's predecessor) as written
  std::int64_t predecessor_reads = 0;  // rows whose first entry's predecessor is not in the plan (windows)

  // Floor bytes of one verify call over `targets` buffers (GPU-FLOORS.md): per entry the 4 plan int64 and
  // one 32-byte record per buffer; a predecessor is the previous entry's record (counted once) except at a
  // window's start, where it is one more record read.
  std::int64_t bytes(int targets) const {
    return workload.entries * (32 + 32 * std::int64_t{targets}) + predecessor_reads * 32 * targets;
  }
};

// Stamps what an engine's writes of every prefix leave behind: reference::write of each row's used
// positions before the extend (seed -1: the chain starts at anchor_hash, as at position 0). Tokens are the
// expected-token pool's (so bit 32 stays quiet), or a token of the position without a pool.
inline canary::CanaryBuffer stamp_prefixes(const Inputs& in) {
  canary::StepTokens tokens;
  tokens.chain_position_assert = 0;
  const std::vector<RowCells> rows = used_cells(in);
  canary::Outputs plan = canary::make_outputs(0, static_cast<std::int64_t>(rows.size()), -1);
  if (in.req_identities) plan.write_identities = *in.req_identities;  // each row's records masked by its identity
  plan.write_offsets[0] = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t prefix = in.prefix_lens[r];
    for (std::int64_t p = rows[r].first; p < prefix; ++p) {
      const auto cell = static_cast<std::size_t>(rows[r].rp * in.max_seq_len + p);
      tokens.input_ids.push_back(in.req_to_verify_expected_tokens ? (*in.req_to_verify_expected_tokens)[cell]
                                                                  : (p * 7919 + rows[r].rp) % 151936);
      tokens.positions.push_back(p);
      tokens.out_cache_loc.push_back(translate(in, in.req_to_token[cell]));
    }
    plan.write_offsets[r + 1] = static_cast<std::int64_t>(tokens.input_ids.size());
  }
  plan.write_num_valid_reqs = static_cast<std::int32_t>(rows.size());
  canary::CanaryBuffer buffer(static_cast<std::size_t>(num_canary_slots(in)));
  canary::ViolationRing ring;
  ring.capacity = 16;
  canary::write(plan, tokens, kvcanary::KernelKind::HEAD_K_FULL, {}, buffer, ring);
  if (ring.count != 0) throw std::logic_error("kvcanary_perf: stamping the prefixes reported a violation");
  return buffer;
}

// SPEC-CANARY §11.7: a random non-zero (odd) 64-bit identity per request row (as LoRA adapters or cache salts).
inline void draw_identities(Inputs& in, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> identities(in.req_pool_indices.size());
  for (std::int64_t& id : identities) id = static_cast<std::int64_t>(rng() | 1);
  in.req_identities = identities;
}

// reference::plan of `w` into outputs of its capacities filled with `fill`, with the identity arrays exactly
// when the inputs hold identities (as plan() requires).
inline canary::Outputs reference_plan(const Workload& w, std::int64_t fill) {
  canary::Outputs plan = canary::make_outputs(w.verify_capacity, w.write_req_capacity, fill);
  if (w.inputs.req_identities) {
    plan.verify_identities.emplace(static_cast<std::size_t>(w.verify_capacity), 0);
    plan.write_identities.emplace(static_cast<std::size_t>(w.write_req_capacity), 0);
  }
  canary::plan(w.inputs, plan);
  return plan;
}

// The benchmarks of one workload are registered next to each other, so caching the last case built
// keeps the host memory to one workload at a time (decode bs 256: a 270 MB buffer). With `identities`,
// every request has one (SPEC-CANARY §11.7): the plan carries them and the prefixes are stamped with them.
inline std::shared_ptr<VerifyCase> verify_case(const WorkloadShape& shape, bool identities = false) {
  static std::shared_ptr<VerifyCase> cached;
  if (cached && cached->workload.name == shape.name && cached->workload.inputs.req_identities.has_value() == identities)
    return cached;
  cached.reset();
  auto built = std::make_shared<VerifyCase>();
  built->workload = build_workload(shape);
  draw_distinct_slots(built->workload, shape.seed ^ 0x64697374696e6374ULL);  // "distinct"
  if (identities) draw_identities(built->workload.inputs, shape.seed ^ 0x6964656e74697479ULL);  // "identity"
  const Inputs& in = built->workload.inputs;
  built->plan = reference_plan(built->workload, kPoison);
  if (built->plan.enable != 1 || built->plan.input_error_bits != 0)
    throw std::logic_error("kvcanary_perf: the canary workload's plan is not enabled and clean");
  for (const RowCells& row : used_cells(in))
    if (in.swa_window_size > 0 && row.first > 0) ++built->predecessor_reads;
  built->stamped = stamp_prefixes(in);
  cached = built;
  return cached;
}

// ---- write ----

// One write call: `requests` requests of `tokens_per_request` tokens at positions [prefix, prefix + n).
// prefix 0 is a first prefill chunk (seed -1); otherwise each request's seed is a stamped record at
// position prefix - 1 and the chain-position assert checks every token.
struct WriteShape {
  std::string name;
  std::int64_t requests = 1;
  std::int64_t tokens_per_request = 1;
  std::int64_t prefix = 0;
  Regime regime = Regime::Latency;
  std::uint64_t seed = 0;
};

// Fixed seeds, as workload_shapes() has them.
inline std::vector<WriteShape> write_shapes() {
  constexpr std::int64_t K = 1024;
  constexpr Regime L = Regime::Latency, C = Regime::Chain;
  std::vector<WriteShape> shapes = {
      //  name                          requests  tokens  prefix  regime
      {"decode_bs1",                    1,        1,      1 * K,  L},
      {"decode_bs64",                   64,       1,      1 * K,  L},
      {"decode_bs256",                  256,      1,      1 * K,  L},
      {"decode_bs4096",                 4096,     1,      1 * K,  L},
      {"prefill_bs32x2k_first_chunk",   32,       2 * K,  0,      C},
      {"prefill_bs32x2k_next_chunk",    32,       2 * K,  2 * K,  C},
      {"prefill_bs1x8k_first_chunk",    1,        8 * K,  0,      C},
      {"prefill_bs1x8k_next_chunk",     1,        8 * K,  8 * K,  C}};
  for (std::size_t i = 0; i < shapes.size(); ++i) shapes[i].seed = 0x7772697465000000ULL + i;  // "write"
  return shapes;
}

constexpr std::int64_t kWriteSlots = std::int64_t{1} << 20;  // a 32 MB canary buffer

struct WriteCase {
  WriteShape shape;
  canary::Outputs plan;          // write_offsets, write_seed_slot_indices, write_num_valid_reqs
  canary::StepTokens tokens;     // the input assert on (expected = given), chain-position assert on
  canary::CanaryBuffer initial;  // the seeds stamped
  canary::CanaryBuffer expected;     // reference::write of `initial` (a replay rewrites the same records)
  canary::ViolationRing expected_ring;

  std::int64_t num_tokens() const { return shape.requests * shape.tokens_per_request; }
  // Bytes of one call: per token the 5 int64 token arrays read and the 32-byte record written; per
  // request its offsets and seed (24) and, with a seed, the seed's record read.
  std::int64_t bytes() const {
    return num_tokens() * (5 * 8 + 32) + shape.requests * (24 + (shape.prefix > 0 ? 32 : 0));
  }
  // The bytes of one buffer alone: the records written and the seeds read.
  std::int64_t buffer_bytes() const { return num_tokens() * 32 + shape.requests * (shape.prefix > 0 ? 32 : 0); }
};

inline WriteCase build_write_case(const WriteShape& shape) {
  std::mt19937_64 rng(shape.seed);
  std::uniform_int_distribution<std::int64_t> token(0, 151935), hash(INT64_MIN, INT64_MAX);
  DistinctDraw slots(1, kWriteSlots, rng);
  WriteCase c;
  c.shape = shape;
  c.plan = canary::make_outputs(0, shape.requests, -1);
  c.initial.resize(static_cast<std::size_t>(kWriteSlots));
  c.plan.write_offsets[0] = 0;
  for (std::int64_t r = 0; r < shape.requests; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    if (shape.prefix > 0) {
      const std::int64_t s = slots();
      c.plan.write_seed_slot_indices[ru] = s;
      c.initial[static_cast<std::size_t>(s)] = {token(rng), shape.prefix - 1, hash(rng), 0};
    }
    for (std::int64_t j = 0; j < shape.tokens_per_request; ++j) {
      c.tokens.input_ids.push_back(token(rng));
      c.tokens.positions.push_back(shape.prefix + j);
      c.tokens.out_cache_loc.push_back(slots());
    }
    c.plan.write_offsets[ru + 1] = static_cast<std::int64_t>(c.tokens.input_ids.size());
  }
  c.plan.write_num_valid_reqs = static_cast<std::int32_t>(shape.requests);
  c.tokens.expected_input_ids = c.tokens.input_ids;
  c.tokens.expected_positions = c.tokens.positions;
  c.tokens.chain_position_assert = 1;
  c.expected = c.initial;
  c.expected_ring.capacity = 1024;
  canary::write(c.plan, c.tokens, kvcanary::KernelKind::HEAD_K_FULL, {}, c.expected, c.expected_ring);
  if (c.expected_ring.count != 0) throw std::logic_error("kvcanary_perf: the write case is not clean in the reference");
  return c;
}

}  // namespace kvcanary_perf

#endif
