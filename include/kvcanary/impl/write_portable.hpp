#ifndef KVCANARY_IMPL_WRITE_PORTABLE_HPP
#define KVCANARY_IMPL_WRITE_PORTABLE_HPP

// The write stage (SPEC-CANARY §4) as one Kokkos TeamPolicy launch: a team of `lanes` threads per
// request (32 on a GPU, 1 on the host). A request's records form a serial chain (each prev_hash is the
// running hash of the tokens before it), so the tokens go in chunks of `lanes`: every lane walks the
// chunk's chain (the same addresses for all lanes: broadcast loads) and keeps the state before its own
// token, then the lanes check and store their tokens at once. The chain is the only serial part; loads,
// checks, real-KV folds and stores run in parallel, and the next chunk's tokens are loaded while the
// chain runs. A call may stamp several buffers (the K and V halves): the tokens are loaded once, the
// chain is walked once for the buffers whose seeds agree (TargetChains), and every lane stores its token
// into each buffer.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct DeviceWritePlan {
  using Array = Kokkos::View<const std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Array offsets, seeds;
  Array identities;  // SPEC-CANARY §11.7: read only when has_identities
  Kokkos::View<const std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> num_valid_reqs;
  bool has_identities = false;

  DeviceWritePlan() = default;
  explicit DeviceWritePlan(const WritePlan<MemorySpace>& p)
      : offsets(p.write_offsets),
        seeds(p.write_seed_slot_indices),
        num_valid_reqs(p.write_num_valid_reqs),
        has_identities(p.write_identities.has_value()) {
    if (has_identities) identities = Array(p.write_identities->data(), p.write_identities->extent(0));
  }

  KOKKOS_INLINE_FUNCTION std::int64_t capacity() const { return static_cast<std::int64_t>(seeds.extent(0)); }
  // clamp(write_num_valid_reqs, 0, write_req_capacity) of SPEC-CANARY §4.
  KOKKOS_INLINE_FUNCTION std::int64_t requests(std::int32_t num_valid) const {
    const std::int64_t n = num_valid;
    return n < 0 ? 0 : (n > capacity() ? capacity() : n);
  }
};

template <class MemorySpace, class Index>
struct DeviceStepTokens {
  using Vector = Kokkos::View<const Index*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Vector input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
  Kokkos::View<const std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> chain_position_assert;
  std::int64_t num_tokens = 0;
  bool input_assert = false;

  DeviceStepTokens() = default;
  explicit DeviceStepTokens(const StepTokens<MemorySpace, Index>& t)
      : input_ids(t.input_ids),
        positions(t.positions),
        out_cache_loc(t.out_cache_loc),
        chain_position_assert(t.chain_position_assert),
        num_tokens(t.num_tokens()),
        input_assert(t.expected_input_ids.has_value()) {
    if (input_assert) {
      expected_input_ids = *t.expected_input_ids;
      expected_positions = *t.expected_positions;
    }
  }
};

// One token of the step: where it goes and what it holds (the expected values: the input assert's,
// loaded only for the lane that owns the token).
struct WriteToken {
  std::int64_t slot = -1, token = 0, position = 0, expected_token = 0, expected_position = 0;
};

// The chain state before a token: the running hash and, for the chain-position assert, the position
// of the last stored token (the seed's at first).
struct ChainState {
  std::int64_t running = kAnchorHashInt64;
  std::uint64_t prev_position = 0;
  std::int64_t stored = 0;
};

// One request of the WritePlan as the kernels read it: its token range [begin, end), its seed, the mask
// of its identity (SPEC-CANARY §11.7, 0 without), whether the chain-position assert is on, and whether
// the request is among the first write_num_valid_reqs.
struct WriteRequest {
  std::int64_t begin = 0, end = 0, seed = -1, mask = 0;
  bool position_assert_on = false, active = false;
};

// Where a request's chain starts: the state before its first token, and whether the chain-position
// assert runs (only from a seed record).
struct RequestStart {
  ChainState chain;
  bool position_assert = false;
};

// One canary buffer of a write() call: its records, real-KV sources and launch tag.
template <class MemorySpace>
struct WriteTargetDevice {
  DeviceBuffer<MemorySpace> buffer;
  DeviceRealKv real_kv;
  std::int64_t kind = 0;
};

// A request's chain state for each target, and which targets share a walk: a target whose buffer has the
// slot count of an earlier one and whose seed gives the same start walks the same chain (the same tokens
// skipped, the same hashes), so it takes that target's states instead of walking again. K and V buffers
// stamped by the same calls agree on every seed; a buffer that does not (a corrupted seed record, a
// buffer of another size) gets its own walk.
template <int kTargets>
struct TargetChains {
  ChainState chain[kTargets];
  bool position_assert[kTargets] = {};
  int leader[kTargets] = {};
};

// kTargets: room for that many targets, known to the compiler, so that every loop over targets unrolls
// and the per-target states stay in registers (a run-time count in arrays of 4 cost the CUDA write
// 10% and the portable one 41% on one buffer: local memory and 190 registers, docs/perf-notes.md). The
// host picks 1, 2 or kMaxWriteTargets; only the last reads a run-time count (3 or 4).
template <class ExecutionSpace, class MemorySpace, class Index, int kTargets = 1>
struct WriteFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecutionSpace>::member_type;
  static_assert(kTargets >= 1 && kTargets <= kMaxWriteTargets, "kvcanary: 1 to kMaxWriteTargets targets");
  static constexpr int kTargetCount = kTargets;

  DeviceWritePlan<MemorySpace> plan;
  DeviceStepTokens<MemorySpace, Index> tokens;
  WriteTargetDevice<MemorySpace> targets[kTargets];
  int num_targets = kTargets;  // <= kTargets; read only when kTargets > 2
  DeviceRing<MemorySpace> ring;

  // The targets of this call: a constant for 1 and 2.
  KOKKOS_INLINE_FUNCTION int target_count() const { return kTargets <= 2 ? kTargets : num_targets; }

  KOKKOS_INLINE_FUNCTION WriteToken token_at(std::int64_t i) const {
    return WriteToken{static_cast<std::int64_t>(tokens.out_cache_loc(i)), static_cast<std::int64_t>(tokens.input_ids(i)),
                      static_cast<std::int64_t>(tokens.positions(i)), 0, 0};
  }

  // A lane's own token i, with what the input assert needs; an empty one (slot -1) past `stop`.
  KOKKOS_INLINE_FUNCTION WriteToken own_token(std::int64_t i, std::int64_t stop) const {
    if (i >= stop) return WriteToken{};
    WriteToken t = token_at(i);
    if (tokens.input_assert) {
      t.expected_token = tokens.expected_input_ids(i);
      t.expected_position = tokens.expected_positions(i);
    }
    return t;
  }

  // Request r (< capacity): every read of the plan at once (all in bounds), before any branch on them.
  KOKKOS_INLINE_FUNCTION WriteRequest request(std::int64_t r) const {
    const std::int32_t num_valid = plan.num_valid_reqs();
    const std::int64_t begin = plan.offsets(r), end = plan.offsets(r + 1), seed = plan.seeds(r);
    const std::int32_t position_assert_on = tokens.chain_position_assert();
    // A uniform branch: a plan without identities reads nothing more and its mask stays 0.
    const std::int64_t mask = plan.has_identities ? identity_mask(plan.identities(r)) : 0;
    return WriteRequest{begin, end, seed, mask, position_assert_on != 0, r < plan.requests(num_valid)};
  }

  // The tokens a request can read: [begin, min(end, num_tokens)).
  KOKKOS_INLINE_FUNCTION std::int64_t stop(const WriteRequest& q) const {
    return q.end < tokens.num_tokens ? q.end : tokens.num_tokens;
  }

  // A request's chain before its first token in target t (SPEC-CANARY §4): the seed record's hash and
  // position, anchor_hash without a seed, either XOR the request's mask (§11.7: `running` is the link the
  // next record stores); a seed past the buffer gives one OUT_OF_RANGE row (by lane 0).
  KOKKOS_INLINE_FUNCTION RequestStart start_request(const WriteRequest& q, int t, int lane) const {
    const DeviceBuffer<MemorySpace>& buffer = targets[t].buffer;
    RequestStart start;
    start.chain.running = kAnchorHashInt64 ^ q.mask;
    if (q.seed >= buffer.num_slots) {
      if (lane == 0) ring.push(targets[t].kind, q.seed, -1, -1, -1, start.chain.running, -1, kOutOfRange);
    } else if (q.seed >= 0) {
      const std::int64_t seed_prev = buffer.field(q.seed, kPrevHash), seed_token = buffer.field(q.seed, kToken);
      const std::int64_t seed_position = buffer.field(q.seed, kPosition);
      start.chain.running = record_hash(seed_prev, seed_token, seed_position) ^ q.mask;
      start.chain.prev_position = as_uint64(seed_position);
      start.position_assert = q.position_assert_on;
    }
    return start;
  }

  // Every target's start, and the earlier target each one shares its walk with (itself when none).
  KOKKOS_INLINE_FUNCTION TargetChains<kTargets> start_targets(const WriteRequest& q, int lane) const {
    TargetChains<kTargets> c;
    for (int t = 0; t < kTargets; ++t) {
      if (t >= target_count()) continue;
      const RequestStart start = start_request(q, t, lane);
      c.chain[t] = start.chain;
      c.position_assert[t] = start.position_assert;
      c.leader[t] = t;
      for (int u = 0; u < t; ++u)
        if (c.leader[t] == t && targets[u].buffer.num_slots == targets[t].buffer.num_slots &&
            c.chain[u].running == start.chain.running && c.chain[u].prev_position == start.chain.prev_position &&
            c.position_assert[u] == start.position_assert)
          c.leader[t] = c.leader[u];
    }
    return c;
  }

  // A WritePlan that does not match the token arrays ends the request at its first index outside them,
  // with one row per target (SPEC-CANARY §4): `index` is a negative begin, or max(begin, num_tokens)
  // past the end.
  KOKKOS_INLINE_FUNCTION void push_outside_tokens(int t, std::int64_t index, std::int64_t running) const {
    ring.push(targets[t].kind, index, -1, -1, -1, running, -1, kOutOfRange);
  }
  KOKKOS_INLINE_FUNCTION void end_request(const WriteRequest& q, int lane, const TargetChains<kTargets>& c) const {
    if (q.end > tokens.num_tokens && lane == 0)
      for (int t = 0; t < kTargets; ++t)
        if (t < target_count())
          push_outside_tokens(t, q.begin > tokens.num_tokens ? q.begin : tokens.num_tokens, c.chain[t].running);
  }

  // The tokens stored in every target by a request whose chains are `c`.
  KOKKOS_INLINE_FUNCTION std::int64_t stored(const TargetChains<kTargets>& c) const {
    std::int64_t total = 0;
    for (int t = 0; t < kTargets; ++t)
      if (t < target_count()) total += c.chain[t].stored;
    return total;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int lane = team.team_rank();
    // Every call, even with nothing to write; each target counts as one call.
    if (team.league_rank() == 0 && lane == 0) ring.add_runs(0, target_count());
    std::int64_t stored = 0;
    for (std::int64_t r = team.league_rank(); r < plan.capacity(); r += team.league_size()) {
      const WriteRequest q = request(r);
      if (!q.active) break;
      stored += write_request(team, q);
    }
    if (lane == 0) ring.add_runs(stored, 0);
  }

  // The tokens of one request; returns the tokens stored in all targets (the same on every lane). Rows
  // are pushed by the lane that owns the token (request-level rows by lane 0).
  KOKKOS_INLINE_FUNCTION std::int64_t write_request(const member_type& team, const WriteRequest& q) const {
    if (q.begin >= q.end) return 0;  // nothing at all, seed included
    const int lane = team.team_rank(), lanes = team.team_size();
    const std::int64_t begin = q.begin, stop = this->stop(q);
    // The lane's first token loads beside the seeds' records: the reads in flight at once, one wait.
    // (begin < stop <= num_tokens: begin + lane cannot overflow, whatever the offsets hold.)
    WriteToken mine = begin >= 0 && begin < stop ? own_token(begin + lane, stop) : WriteToken{};
    TargetChains<kTargets> c = start_targets(q, lane);
    // Every lane has read the seeds before any stores: a request whose seed is one of its own targets
    // chains to the seed's old record, as one thread walking the tokens in order would.
    team.team_barrier();
    if (begin < 0) {
      if (lane == 0)
        for (int t = 0; t < kTargets; ++t)
          if (t < target_count()) push_outside_tokens(t, begin, c.chain[t].running);
      return 0;
    }
    for (std::int64_t base = begin; base < stop; base += lanes) {
      const std::int64_t count = stop - base < lanes ? stop - base : lanes;
      // The next chunk's own token, loaded now and used after this chunk's chain.
      const WriteToken next = own_token(base + lanes + lane, stop);
      ChainState before[kTargets];
      bool overwritten = false;  // a later token of the chunk targets my slot: its record is the one kept
      for (int t = 0; t < kTargets; ++t) {
        if (t >= target_count()) continue;
        if (c.leader[t] != t) {  // walked already, by the leader of its class (an earlier target)
          for (int u = 0; u < t; ++u)
            if (c.leader[t] == u) {
              before[t] = before[u];
              c.chain[t] = c.chain[u];
            }
          continue;
        }
        before[t] = c.chain[t];
        // A uniform branch per request: without an identity the walk is the original's, XOR and all gone.
        overwritten = q.mask != 0 ? walk_chunk<true>(base, count, lane, mine.slot, targets[t].buffer.num_slots,
                                                     q.mask, c.chain[t], before[t])
                                  : walk_chunk<false>(base, count, lane, mine.slot, targets[t].buffer.num_slots,
                                                      0, c.chain[t], before[t]);
      }
      if (lane < count)
        for (int t = 0; t < kTargets; ++t)
          if (t < target_count()) store_token(t, mine, before[t], c.position_assert[t], !overwritten);
      mine = next;
      // The chunk's stores land before the next chunk's: a slot written twice in one request keeps the
      // later token, as one thread walking the tokens in order would (and the reference does).
      team.team_barrier();
    }
    end_request(q, lane, c);
    return stored(c);
  }

  // The chain over the chunk's `count` tokens from `base` for a buffer of n slots; `before` gets the
  // state before token `lane`. Returns whether a later token of the chunk targets `my_slot`.
  // kMasked: every link XOR `mask` (SPEC-CANARY §11.7), a request with an identity.
  template <bool kMasked>
  KOKKOS_INLINE_FUNCTION bool walk_chunk(std::int64_t base, std::int64_t count, int lane, std::int64_t my_slot,
                                         std::int64_t n, std::int64_t mask, ChainState& chain, ChainState& before) const {
    bool overwritten = false;
    // The walk loads token j + 1 before it hashes token j, so the load hides behind the chain.
    WriteToken ahead = token_at(base);
    for (std::int64_t j = 0; j < count; ++j) {
      const WriteToken t = ahead;
      if (j + 1 < count) ahead = token_at(base + j + 1);
      if (j == lane) before = chain;
      overwritten = overwritten || (j > lane && t.slot == my_slot);
      if (t.slot < 0 || t.slot >= n) continue;
      chain.running = record_hash(chain.running, t.token, t.position);
      if constexpr (kMasked) chain.running ^= mask;
      chain.prev_position = as_uint64(t.position);
      ++chain.stored;
    }
    return overwritten;
  }

  // Checks and stores one token into target t (SPEC-CANARY §4) with the chain state before it.
  KOKKOS_INLINE_FUNCTION void store_token(int target, const WriteToken& t, const ChainState& before,
                                          bool position_assert, bool keep) const {
    const WriteTargetDevice<MemorySpace>& w = targets[target];
    if (t.slot < 0) return;
    if (t.slot >= w.buffer.num_slots) {
      ring.push(w.kind, t.slot, t.position, t.token, -1, before.running, -1, kOutOfRange);
      return;
    }
    if (tokens.input_assert) {
      const std::int64_t bits =
          (t.token != t.expected_token ? kWriteToken : 0) | (t.position != t.expected_position ? kWritePosition : 0);
      if (bits != 0)
        ring.push(w.kind, t.slot, t.position, t.token, t.expected_token, before.running, t.expected_position, bits);
    }
    if (position_assert) {
      const std::uint64_t next = before.prev_position + 1u;  // mod 2^64
      if (as_uint64(t.position) != next)
        ring.push(w.kind, t.slot, t.position, t.token, t.token, before.running, as_int64(next), kWritePosition);
    }
    if (!keep) return;
    w.buffer.field(t.slot, kToken) = t.token;
    w.buffer.field(t.slot, kPosition) = t.position;
    w.buffer.field(t.slot, kPrevHash) = before.running;
    w.buffer.field(t.slot, kRealKvHash) = w.real_kv.fold(t.slot);
  }
};

// `lanes`: TeamShape::write_lanes() in write(); the tests run other widths too.
template <class ExecutionSpace, class MemorySpace, class Index, int kTargets>
void launch_write_portable(const ExecutionSpace& space,
                           const WriteFunctor<ExecutionSpace, MemorySpace, Index, kTargets>& functor, int lanes) {
  using Functor = WriteFunctor<ExecutionSpace, MemorySpace, Index, kTargets>;
  static_assert(sizeof(Functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  // A team per request up to a league that fills the machine many times over; teams then stride.
  constexpr std::int64_t kMaxLeague = 65535;
  const std::int64_t capacity = functor.plan.capacity();
  const std::int64_t league = capacity < 1 ? 1 : (capacity < kMaxLeague ? capacity : kMaxLeague);
  Kokkos::parallel_for("kvcanary::write[portable]",
                       light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league), lanes)),
                       functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
