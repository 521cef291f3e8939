// The serial host reference of SPEC-CANARY §2–§5: the write and verify stages in the SPEC's own words,
// one loop each, on std::vector.
//
// Host-side rules (std::invalid_argument "kvcanary::write: ..." / "kvcanary::verify: ...", thrown before
// the buffer or the ring is modified). The SPEC's own (§3, §4, §5, §6):
//   * write: input_ids, positions, out_cache_loc of different lengths; only one of expected_input_ids /
//     expected_positions; an expected array of another length than input_ids; write_offsets not
//     write_seed_slot_indices + 1 entries;
//   * verify: the four verify arrays of different extents;
//   * both: real-KV sources that break §3 (canary_shape_checks.hpp), a ring capacity < 0.
// Where the SPEC is silent, decided here:
//   * a kernel_kind outside the 12 launch tags of §1 and a real-KV mode outside none/partial/all are
//     rejected (a row would carry a tag no report can name; a mode would silently fingerprint as 0);
//   * the host ring must be consistent: rows.size() == min(count, capacity), count read as uint64 (a
//     snapshot that lost rows, or was edited, would make "fill once" append at the wrong seq);
//   * a real-KV source's bytes must hold exactly pages x row_bytes values (the reference's flat vector).
// Device data is never a host error: indices out of range become OUT_OF_RANGE rows (§4, §5), counts are
// clamped. The counters and the ring's count wrap mod 2^64 (no signed overflow on any input), and a seq
// is compared with the capacity as uint64, so a count that wrapped past 2^63 writes no row.

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/impl/hash.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include "reference_ring.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

namespace kvcanary {
namespace reference {

namespace {

using detail::check_ring;
using detail::record_violation;
using detail::rows_held;
using detail::size_of;
using detail::wrapping_add;
using Impl::as_int64;
using Impl::as_uint64;

constexpr std::int64_t kAnchorHash = Impl::kAnchorHashInt64;

std::uint64_t load_le64(const std::uint8_t* bytes) {
  std::uint64_t value = 0;
  for (int b = 7; b >= 0; --b) value = (value << 8) | bytes[b];
  return value;
}

RealKvSourceShape shape_of(const RealKvSource& source) {
  return RealKvSourceShape{source.pages,     source.row_bytes,       source.row_bytes,
                           source.page_size, source.bytes_per_token, source.read_bytes};
}

}  // namespace

std::int64_t slot_hash(const CanaryBuffer& buffer, std::int64_t slot) {
  if (slot < 0) return kAnchorHash;
  if (slot >= static_cast<std::int64_t>(buffer.size()))
    Impl::throw_invalid_in("slot_hash", "slot ", slot, " is outside the buffer of ", buffer.size(), " records");
  const Record& record = buffer[static_cast<std::size_t>(slot)];
  return Impl::record_hash(record.prev_hash, record.token, record.position);
}

std::int64_t fold(const RealKv& real_kv, std::int64_t slot) {
  if (real_kv.mode == RealKvMode::None || real_kv.sources.empty()) return 0;
  // write/verify have checked the sources against the whole buffer; a direct call is checked against
  // this slot, so that no call reads outside the bytes.
  if (slot < 0 || slot == std::numeric_limits<std::int64_t>::max())
    Impl::throw_invalid_in("fold", "slot is ", slot, ", must be in [0, 2^63 - 1)");
  check_real_kv(real_kv, slot + 1, "fold");
  std::uint64_t total = 0;
  for (const RealKvSource& source : real_kv.sources) {
    const std::int64_t eff = real_kv.mode == RealKvMode::Partial ? 16 : source.read_bytes;
    const std::int64_t row = slot / source.page_size;
    const std::int64_t column = (slot % source.page_size) * source.bytes_per_token;
    const std::uint8_t* bytes = source.bytes.data() + row * source.row_bytes + column;
    std::uint64_t acc = 0;
    for (std::int64_t o = 0; o < eff; o += 16) {
      acc = Impl::splitmix64(acc ^ load_le64(bytes + o));
      acc = Impl::splitmix64(acc ^ load_le64(bytes + o + 8));
    }
    total = Impl::splitmix64(total ^ acc);
  }
  return as_int64(total);
}

void check_real_kv(const RealKv& real_kv, std::int64_t num_slots, const char* function) {
  Impl::check_real_kv_mode(function, real_kv.mode);
  Impl::check_real_kv_source_count(function, static_cast<std::int64_t>(real_kv.sources.size()));
  for (std::size_t k = 0; k < real_kv.sources.size(); ++k) {
    const RealKvSource& source = real_kv.sources[k];
    Impl::check_real_kv_source(function, static_cast<std::int64_t>(k), shape_of(source), num_slots);
    if (!Impl::holds(source.bytes.size(), source.pages, source.row_bytes))
      Impl::throw_invalid_in(function, "real_kv.sources[", k, "].bytes holds ", source.bytes.size(), " bytes, not ",
                             source.pages, " x ", source.row_bytes);
  }
}

ViolationRing ring_snapshot(const std::int64_t* rows, std::int64_t capacity, std::int64_t count,
                            std::int64_t slot_run_counter, std::int64_t kernel_run_counter) {
  Impl::check_ring_capacity("ring_snapshot", capacity);
  ViolationRing ring;
  ring.capacity = capacity;
  ring.count = count;
  ring.slot_run_counter = slot_run_counter;
  ring.kernel_run_counter = kernel_run_counter;
  const std::uint64_t held = rows_held(count, capacity);
  if (held > 0 && rows == nullptr) Impl::throw_invalid_in("ring_snapshot", "rows is null but ", held, " rows are held");
  ring.rows.resize(static_cast<std::size_t>(held));
  for (std::size_t r = 0; r < ring.rows.size(); ++r)
    std::memcpy(ring.rows[r].data(), rows + r * kRingFields, sizeof(RingRow));
  return ring;
}

void write(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind, const RealKv& real_kv,
           CanaryBuffer& buffer, ViolationRing& ring) {
  constexpr const char* function = "write";
  const std::int64_t num_tokens = size_of(tokens.input_ids);
  const std::int64_t num_slots = static_cast<std::int64_t>(buffer.size());

  // ---- host-side errors, before anything is modified ----
  if (size_of(tokens.positions) != num_tokens)
    Impl::throw_invalid_in(function, "positions has ", size_of(tokens.positions), " entries but input_ids has ",
                           num_tokens);
  if (size_of(tokens.out_cache_loc) != num_tokens)
    Impl::throw_invalid_in(function, "out_cache_loc has ", size_of(tokens.out_cache_loc), " entries but input_ids has ",
                           num_tokens);
  if (tokens.expected_input_ids.has_value() != tokens.expected_positions.has_value())
    Impl::throw_invalid_in(function, tokens.expected_input_ids ? "expected_input_ids" : "expected_positions",
                           " is given without ",
                           tokens.expected_input_ids ? "expected_positions" : "expected_input_ids",
                           " (the input assert takes both or neither)");
  if (tokens.expected_input_ids && size_of(*tokens.expected_input_ids) != num_tokens)
    Impl::throw_invalid_in(function, "expected_input_ids has ", size_of(*tokens.expected_input_ids),
                           " entries but input_ids has ", num_tokens);
  if (tokens.expected_positions && size_of(*tokens.expected_positions) != num_tokens)
    Impl::throw_invalid_in(function, "expected_positions has ", size_of(*tokens.expected_positions),
                           " entries but input_ids has ", num_tokens);
  const std::int64_t write_req_capacity = size_of(plan.write_seed_slot_indices);
  if (size_of(plan.write_offsets) != write_req_capacity + 1)
    Impl::throw_invalid_in(function, "write_offsets has ", size_of(plan.write_offsets),
                           " entries but write_seed_slot_indices has ", write_req_capacity, " (must be one more)");
  if (plan.write_identities && size_of(*plan.write_identities) != write_req_capacity)
    Impl::throw_invalid_in(function, "write_identities has ", size_of(*plan.write_identities),
                           " entries but write_seed_slot_indices has ", write_req_capacity);
  Impl::check_kernel_kind(function, kernel_kind);
  check_real_kv(real_kv, num_slots, function);
  check_ring(function, ring);

  // ---- §4 ----
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  const std::int64_t reqs = std::clamp<std::int64_t>(plan.write_num_valid_reqs, 0, write_req_capacity);
  std::int64_t stored = 0;
  for (std::int64_t r = 0; r < reqs; ++r) {
    const std::int64_t seed = plan.write_seed_slot_indices[static_cast<std::size_t>(r)];
    const Record seed_record = seed >= 0 && seed < num_slots ? buffer[static_cast<std::size_t>(seed)] : Record{};
    stored += write_request(plan, tokens, kernel_kind, real_kv, num_slots, r, seed_record, ring,
                            [&](std::int64_t slot, const Record& record) { buffer[static_cast<std::size_t>(slot)] = record; });
  }
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, stored);
}

std::int64_t write_request(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind, const RealKv& real_kv,
                           std::int64_t num_slots, std::int64_t r, const Record& seed_record, ViolationRing& ring,
                           const std::function<void(std::int64_t, const Record&)>& store) {
  const auto at = [](const std::vector<std::int64_t>& values, std::int64_t i) {
    return values[static_cast<std::size_t>(i)];
  };
  const auto violation = [&](std::int64_t slot, std::int64_t position, std::int64_t stored_token,
                             std::int64_t expected_token, std::int64_t chain_hash, std::int64_t aux,
                             std::int64_t bits) {
    record_violation(ring, kernel_kind, slot, position, stored_token, expected_token, chain_hash, aux, bits);
  };
  const bool input_assert = tokens.expected_input_ids.has_value();
  const std::int64_t num_tokens = size_of(tokens.input_ids);
  const std::int64_t first = at(plan.write_offsets, r);
  const std::int64_t last = at(plan.write_offsets, r + 1);
  if (first >= last) return 0;  // nothing at all, seed included

  const std::int64_t seed = at(plan.write_seed_slot_indices, r);
  // SPEC-CANARY §11.7: `running` is the link the next record stores, its predecessor's hash XOR the mask
  // of the request's identity (0 without identities).
  const std::int64_t mask = plan.write_identities ? Impl::identity_mask(at(*plan.write_identities, r)) : 0;
  std::int64_t running = kAnchorHash ^ mask;
  bool position_assert = false;
  std::int64_t prev_pos = 0;
  if (seed >= num_slots) {
    violation(seed, -1, -1, -1, running, -1, kOutOfRange);
  } else if (seed >= 0) {
    running = Impl::record_hash(seed_record.prev_hash, seed_record.token, seed_record.position) ^ mask;
    position_assert = tokens.chain_position_assert != 0;
    if (position_assert) prev_pos = seed_record.position;
  }

  std::int64_t stored = 0;
  for (std::int64_t i = first; i < last; ++i) {
    if (i < 0 || i >= num_tokens) {
      violation(i, -1, -1, -1, running, -1, kOutOfRange);
      break;  // the request stops here
    }
    const std::int64_t slot = at(tokens.out_cache_loc, i);
    if (slot < 0) continue;  // padding: no store, no count, no chain step
    const std::int64_t token = at(tokens.input_ids, i);
    const std::int64_t pos = at(tokens.positions, i);
    if (slot >= num_slots) {
      violation(slot, pos, token, -1, running, -1, kOutOfRange);
      continue;
    }
    if (input_assert) {
      const std::int64_t expected_token = at(*tokens.expected_input_ids, i);
      const std::int64_t expected_pos = at(*tokens.expected_positions, i);
      const std::int64_t bits =
          (token != expected_token ? kWriteToken : 0) | (pos != expected_pos ? kWritePosition : 0);
      if (bits != 0) violation(slot, pos, token, expected_token, running, expected_pos, bits);
    }
    if (position_assert) {
      const std::int64_t expected_pos = wrapping_add(prev_pos, 1);
      if (pos != expected_pos) violation(slot, pos, token, token, running, expected_pos, kWritePosition);
      prev_pos = pos;
    }
    store(slot, Record{token, pos, running, fold(real_kv, slot)});
    running = Impl::record_hash(running, token, pos) ^ mask;
    ++stored;
  }
  return stored;
}

void verify(const Outputs& plan, const CanaryBuffer& buffer, KernelKind kernel_kind, const RealKv& real_kv,
            bool check_expected_token, ViolationRing& ring) {
  verify(plan, buffer, kernel_kind, real_kv, check_expected_token, VerifyChecks::v1(), ring);
}

void verify(const Outputs& plan, const CanaryBuffer& buffer, KernelKind kernel_kind, const RealKv& real_kv,
            bool check_expected_token, const VerifyChecks& checks, ViolationRing& ring) {
  constexpr const char* function = "verify";
  const std::int64_t num_slots = static_cast<std::int64_t>(buffer.size());
  const std::int64_t verify_capacity = size_of(plan.verify_slot_indices);

  // ---- host-side errors, before anything is modified ----
  const std::vector<std::int64_t>* arrays[3] = {&plan.verify_expected_tokens, &plan.verify_expected_positions,
                                                &plan.verify_prev_slot_indices};
  static const char* const names[3] = {"verify_expected_tokens", "verify_expected_positions",
                                       "verify_prev_slot_indices"};
  for (int k = 0; k < 3; ++k)
    if (size_of(*arrays[k]) != verify_capacity)
      Impl::throw_invalid_in(function, names[k], " has ", size_of(*arrays[k]), " entries but verify_slot_indices has ",
                             verify_capacity, " (the four verify arrays must have one extent)");
  if (plan.verify_identities && size_of(*plan.verify_identities) != verify_capacity)
    Impl::throw_invalid_in(function, "verify_identities has ", size_of(*plan.verify_identities),
                           " entries but verify_slot_indices has ", verify_capacity);
  Impl::check_kernel_kind(function, kernel_kind);
  check_real_kv(real_kv, num_slots, function);
  check_ring(function, ring);

  // ---- §5 ----
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  if (plan.enable == 0) return;
  const std::int64_t active = std::clamp<std::int64_t>(plan.verify_num_valid, 0, verify_capacity);
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, active);
  for (std::int64_t e = 0; e < active; ++e) {
    const auto entry = static_cast<std::size_t>(e);
    const std::int64_t slot = plan.verify_slot_indices[entry];
    const std::int64_t exp_pos = plan.verify_expected_positions[entry];
    const std::int64_t prev = plan.verify_prev_slot_indices[entry];
    const std::int64_t exp_tok = check_expected_token ? plan.verify_expected_tokens[entry] : -1;
    if (slot == 0) {  // the reserved padding slot, whatever prev holds; §11.3: a live position on it
      if (checks.slot_zero) record_violation(ring, kernel_kind, 0, exp_pos, -1, exp_tok, -1, prev, kVerifySlotZero);
      continue;
    }
    const bool slot_out_of_range = slot < 0 || slot >= num_slots;
    if (slot_out_of_range || prev >= num_slots) {
      record_violation(ring, kernel_kind, slot_out_of_range ? slot : prev, exp_pos, -1, exp_tok, -1, -1, kOutOfRange);
      continue;
    }
    const Record& stored = buffer[static_cast<std::size_t>(slot)];
    const bool prev_reachable = prev != 0;
    // SPEC-CANARY §11.7: the link the entry's identity writes is the predecessor's hash XOR its mask.
    const std::int64_t mask = plan.verify_identities ? Impl::identity_mask((*plan.verify_identities)[entry]) : 0;
    const std::int64_t expected_chain = prev_reachable ? slot_hash(buffer, prev) ^ mask : stored.prev_hash;
    std::int64_t bits = 0;
    if (prev_reachable && stored.prev_hash != expected_chain) bits |= kVerifyChainHash;
    if (checks.freed && stored.token == kFreedToken) {  // §11.2: the position and chain only; aux = the epoch
      bits |= kVerifyFreed | (stored.position != exp_pos ? kVerifyPosition : 0);
      record_violation(ring, kernel_kind, slot, stored.position, stored.token, exp_tok, stored.prev_hash,
                       stored.real_kv_hash, bits);
      continue;
    }
    if (exp_tok != -1 && stored.token != exp_tok) bits |= kVerifyToken;
    if (stored.position != exp_pos) bits |= kVerifyPosition;
    if (stored.real_kv_hash != fold(real_kv, slot)) bits |= kVerifyRealKvHash;
    if (bits != 0)
      record_violation(ring, kernel_kind, slot, stored.position, stored.token, exp_tok, stored.prev_hash,
                       expected_chain, bits);
  }
}

}  // namespace reference
}  // namespace kvcanary
