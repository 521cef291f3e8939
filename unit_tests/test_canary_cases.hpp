#ifndef KVCANARY_TEST_CANARY_CASES_HPP
#define KVCANARY_TEST_CANARY_CASES_HPP

// Random write and verify calls for the canary differential tests, each a pure function of its seed.
// Values are drawn to hit the edges of SPEC-CANARY §4–§5: never-written, stamped and garbage records,
// slots and predecessors out of range, slot 0, seeds past the buffer, offsets past the token arrays,
// clamped request and entry counts, enable 0, the input and chain-position asserts, real-KV sources
// in every mode, and rings that overflow. Requests of one write call use disjoint slots (two requests
// writing one slot is unspecified by the SPEC).

#include "test_canary_support.hpp"

#include <limits>
#include <random>

namespace kvcanary_test {

struct WriteCase {
  Outputs plan;
  Tokens tokens;
  KernelKind kind = KernelKind::HEAD_K_FULL;
  RealKv real_kv;
  Buffer buffer;
  Ring ring;
};

struct VerifyCase {
  Outputs plan;
  Buffer buffer;
  KernelKind kind = KernelKind::HEAD_K_FULL;
  RealKv real_kv;
  bool check_expected_token = true;
  Ring ring;
};

// The shape of a write call's requests. Short: up to 5 requests of 1–6 tokens, one in seven slots
// invalid (the edges). Long: up to 100 tokens, so a request spans chunks of 32 (the GPU kernels' unit)
// and many chunks have every token stored; few slots per request, so a chunk often writes one slot
// twice. Many: up to 600 requests (more than a GPU has SMs: the CUDA kernel's other block shape).
struct WriteShape {
  std::int64_t max_slots = 48, max_length = 6, max_requests = 5;
  bool long_requests = false;
  static WriteShape long_ones() { return WriteShape{160, 100, 5, true}; }
  static WriteShape many() { return WriteShape{12000, 40, 600, true}; }
};

class CanaryCaseGenerator {
 public:
  explicit CanaryCaseGenerator(std::uint64_t seed) : rng_(seed) {}

  WriteCase next_write(const WriteShape& shape = WriteShape{}) {
    WriteCase c;
    const std::int64_t slots = between(1, shape.max_slots);
    // Long requests: per call, no invalid slot, a rare one, or the short shape's rate.
    const double invalid = shape.long_requests ? (chance(0.4) ? 0.0 : chance(0.5) ? 0.004 : 0.14) : 0.14;
    c.buffer = buffer(slots);
    c.real_kv = real_kv(slots);
    c.kind = static_cast<KernelKind>(between(0, kvcanary::kKernelKinds - 1));
    c.ring = ring();
    const std::int64_t requests = between(0, shape.max_requests);
    const std::int64_t capacity = requests + between(0, 2);
    Outputs& plan = c.plan;
    plan.write_offsets.assign(static_cast<std::size_t>(capacity + 1), 0);
    plan.write_seed_slot_indices.assign(static_cast<std::size_t>(capacity), -1);
    // Each request owns slots [r * span, (r + 1) * span) for its tokens and its seed.
    const std::int64_t span = std::max<std::int64_t>(slots / std::max<std::int64_t>(requests, 1), 1);
    std::int64_t next = 0;
    for (std::int64_t r = 0; r < capacity; ++r) {
      plan.write_offsets[static_cast<std::size_t>(r)] = next;
      if (r >= requests) continue;
      const std::int64_t length = chance(0.15) ? 0 : between(1, shape.max_length);
      const std::int64_t first = r * span, last = std::min(first + span, slots) - 1;
      plan.write_seed_slot_indices[static_cast<std::size_t>(r)] =
          chance(0.1) ? slots + between(0, 3) : chance(0.3) ? -1 : between(first, std::max(first, last));
      std::int64_t position = chance(0.5) ? between(0, 5) : between(-3, 40);
      for (std::int64_t j = 0; j < length; ++j, ++position) {
        const double pick = uniform();
        std::int64_t slot = first <= last ? between(first, last) : -1;
        // Of the invalid slots, 8 in 14 negative (skipped), the rest past the buffer (OUT_OF_RANGE rows).
        if (pick < invalid * (8.0 / 14.0)) slot = -1 - between(0, 2);
        else if (pick < invalid) slot = slots + between(0, 5);
        if (chance(0.05)) ++position;  // a gap: the chain-position assert fires
        const std::int64_t token = between(-2, 1000);
        c.tokens.input_ids.push_back(token);
        c.tokens.positions.push_back(chance(0.02) ? extreme() : position);
        c.tokens.out_cache_loc.push_back(slot);
      }
      next += length;
    }
    plan.write_offsets[static_cast<std::size_t>(capacity)] = next;
    const auto num_tokens = static_cast<std::int64_t>(c.tokens.input_ids.size());
    // A WritePlan that does not match the token arrays: the first request starting before them, or the
    // last one ending past them (ranges that overlap another request's tokens would write one slot
    // from two requests, which the SPEC leaves unspecified).
    if (requests > 0 && chance(0.1)) {
      if (chance(0.5)) plan.write_offsets[0] = -between(1, 3);
      else plan.write_offsets[static_cast<std::size_t>(requests)] = num_tokens + between(1, 4);
    }
    plan.write_num_valid_reqs = static_cast<std::int32_t>(chance(0.85) ? requests : between(-2, capacity + 2));
    if (chance(0.4)) {
      c.tokens.expected_input_ids = c.tokens.input_ids;
      c.tokens.expected_positions = c.tokens.positions;
      for (std::int64_t i = 0; i < num_tokens; ++i) {
        if (chance(0.1)) (*c.tokens.expected_input_ids)[static_cast<std::size_t>(i)] += between(1, 3);
        std::int64_t& expected_position = (*c.tokens.expected_positions)[static_cast<std::size_t>(i)];
        if (chance(0.1) && expected_position > std::numeric_limits<std::int64_t>::min() + 3) expected_position -= between(1, 3);
      }
    }
    c.tokens.chain_position_assert = chance(0.7) ? 1 : 0;
    return c;
  }

  VerifyCase next_verify() {
    VerifyCase c;
    const std::int64_t slots = between(1, 48);
    c.real_kv = real_kv(slots);
    c.buffer = buffer(slots);
    c.kind = static_cast<KernelKind>(between(0, kvcanary::kKernelKinds - 1));
    c.check_expected_token = chance(0.7);
    c.ring = ring();
    const std::int64_t capacity = between(0, 40);
    c.plan = kvcanary::reference::make_outputs(capacity, 0, 0);
    std::int64_t previous = -1;
    for (std::int64_t i = 0; i < capacity; ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      std::int64_t slot = between(0, slots - 1);
      const double pick = uniform();
      if (pick < 0.05) slot = -between(1, 3);
      else if (pick < 0.1) slot = slots + between(0, 3);
      std::int64_t prev = chance(0.6) ? previous : between(-1, slots - 1);
      if (chance(0.05)) prev = slots + between(0, 3);
      if (chance(0.05)) prev = 0;
      c.plan.verify_slot_indices[k] = slot;
      c.plan.verify_prev_slot_indices[k] = prev;
      // Mostly what the record holds (clean entries), sometimes not.
      const Record* r = (slot >= 0 && slot < slots) ? &c.buffer[static_cast<std::size_t>(slot)] : nullptr;
      c.plan.verify_expected_positions[k] = (r != nullptr && chance(0.8)) ? r->position : between(-1, 30);
      c.plan.verify_expected_tokens[k] = chance(0.3) ? -1 : (r != nullptr && chance(0.8)) ? r->token : between(0, 1000);
      previous = slot;
    }
    c.plan.enable = chance(0.9) ? 1 : 0;
    c.plan.verify_num_valid = static_cast<std::int32_t>(chance(0.8) ? between(0, capacity) : between(-3, capacity + 5));
    return c;
  }

  // A buffer of `slots` records: never written, stamped in chains (some of them clean), or garbage.
  Buffer buffer(std::int64_t slots) {
    Buffer b(static_cast<std::size_t>(slots));
    std::int64_t running = kAnchorHash;
    for (std::int64_t s = 0; s < slots; ++s) {
      Record& r = b[static_cast<std::size_t>(s)];
      const double pick = uniform();
      if (pick < 0.25) continue;  // never written
      if (pick < 0.85) {          // the next link of a chain, as write() would stamp it
        if (chance(0.1)) running = kAnchorHash;
        r = {between(0, 1000), s, running, 0};
        running = kvcanary::Impl::record_hash(r.prev_hash, r.token, r.position);
      } else {
        r = {between(-5, 1000), between(-5, 60), garbage(), garbage()};
      }
    }
    return b;
  }

  // Sources covering `slots` (or none), in any mode.
  RealKv real_kv(std::int64_t slots) {
    RealKv kv;
    if (chance(0.6)) return kv;
    kv.mode = static_cast<kvcanary::RealKvMode>(between(0, 2));
    const std::int64_t sources = between(0, kvcanary::kMaxRealKvSources);
    for (std::int64_t k = 0; k < sources; ++k) {
      kvcanary::reference::RealKvSource s;
      s.page_size = between(1, 4);
      s.bytes_per_token = 16 * between(1, 3);
      s.read_bytes = 16 * between(1, s.bytes_per_token / 16);
      s.pages = (slots + s.page_size - 1) / s.page_size + between(0, 1);
      s.row_bytes = s.page_size * s.bytes_per_token + 16 * between(0, 1);
      s.bytes.resize(static_cast<std::size_t>(s.pages * s.row_bytes));
      for (auto& byte : s.bytes) byte = static_cast<std::uint8_t>(between(0, 255));
      kv.sources.push_back(std::move(s));
    }
    return kv;
  }

  // Sometimes empty, sometimes with earlier rows, often small enough to overflow.
  Ring ring() {
    Ring r = empty_ring(chance(0.3) ? between(0, 3) : between(4, 64));
    if (chance(0.2)) {
      r.kernel_run_counter = between(0, 100);
      r.slot_run_counter = between(0, 1000);
      const std::int64_t earlier = between(0, r.capacity);
      for (std::int64_t i = 0; i < earlier; ++i) r.rows.push_back({3, i, 1, 2, 3, 4, 5, 8});
      r.count = earlier;
    }
    return r;
  }

  std::int64_t between(std::int64_t lo, std::int64_t hi) {  // inclusive
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  bool chance(double p) { return uniform() < p; }

 private:
  std::int64_t extreme() {
    return chance(0.5) ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  }
  std::int64_t garbage() { return static_cast<std::int64_t>(rng_()); }

  std::mt19937_64 rng_;
};

}  // namespace kvcanary_test

#endif
