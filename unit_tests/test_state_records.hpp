// SPEC-CANARY §13 on this backend: state records (a Mamba/SSM state slot holds the record of the last
// position its state summarises). state_plan() against the host reference (entries, rows, counters, host
// errors), then the stamp (write) and the resume check (verify) of its entries, every stage compared with
// the reference (CanaryRunner): a clean resume passes; another request's state (KV-BUGS row 41), a wrong
// boundary (row 42), a graph-padding dummy aliasing a parked request's state slot (row 43) and another
// identity (§11.7) fail with the bits §13.4 gives.
// Layout: 8 KV slots, state slots at canary slots 8-11. Pool row 1 (A): position p at slot 1 + p, token
// 101 (p + 1). Pool row 2 (B): shares A's slots and tokens at 0-2, then slots 6, 7 with tokens 606, 707.

#include "test_canary_support.hpp"

#include <kvcanary/stages/state.hpp>
#include <kvcanary/tools/host_bridge_state.hpp>
#include <kvcanary/tools/reference_state.hpp>

#include <random>

namespace kvcanary_test {

using StateInputs = kvcanary::reference::StateInputs;
using StatePlan = kvcanary::reference::StatePlan;

class StateRecords : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  static constexpr std::int64_t kKvSlots = 8, kStateSlots = 4, kMaxReqs = 4, kMaxSeqLen = 8;
  CanaryRunner<ExecSpace> runner;

  static StateInputs inputs(Int64s state_slots, Int64s pool_rows, Int64s positions, bool with_pool = true) {
    StateInputs in;
    in.state_slots = std::move(state_slots);
    in.req_pool_indices = std::move(pool_rows);
    in.positions = std::move(positions);
    in.max_reqs = kMaxReqs;
    in.max_seq_len = kMaxSeqLen;
    in.req_to_token.assign(static_cast<std::size_t>(kMaxReqs * kMaxSeqLen), 0);
    std::vector<std::int32_t> pool(in.req_to_token.size(), 0);
    for (std::int32_t p = 0; p < kMaxSeqLen; ++p) {
      in.req_to_token[kMaxSeqLen + p] = p < 7 ? 1 + p : 0;
      in.req_to_token[2 * kMaxSeqLen + p] = p < 3 ? 1 + p : (p < 5 ? 3 + p : 0);
      pool[kMaxSeqLen + p] = 101 * (p + 1);
      pool[2 * kMaxSeqLen + p] = p < 3 ? 101 * (p + 1) : 101 * (p + 3);
    }
    if (with_pool) {
      in.token_pool = pool;
      in.pool_rows = kMaxReqs;
      in.pool_cols = kMaxSeqLen;
    }
    return in;
  }

  // state_plan on the backend and the reference from the same plan and ring; checks both agree.
  StatePlan build(const StateInputs& in, Ring& ring, std::int64_t capacity = 4) const {
    StatePlan library = kvcanary::reference::make_state_plan(capacity, kPoison, in.identities.has_value());
    StatePlan reference = library;
    Ring library_ring = ring, reference_ring = ring;
    kvcanary::state_plan_host_data(ExecSpace(), in, library, KernelKind::HEAD_K_FULL, library_ring);
    kvcanary::reference::state_plan(in, reference, KernelKind::HEAD_K_FULL, reference_ring);
    EXPECT_TRUE(same_plan(library.plan, reference.plan));
    EXPECT_EQ(library.tokens.input_ids, reference.tokens.input_ids);
    EXPECT_EQ(library.tokens.positions, reference.tokens.positions);
    EXPECT_EQ(library.tokens.out_cache_loc, reference.tokens.out_cache_loc);
    Ring all = ring;
    all.capacity = ring.count + reference_ring.count + 1;
    StatePlan scratch = library;
    kvcanary::reference::state_plan(in, scratch, KernelKind::HEAD_K_FULL, all);
    EXPECT_TRUE(same_ring(library_ring, reference_ring, all));
    ring = library_ring;
    return library;
  }

  // The stamp after the update (positions = p) and the check before a resume (positions = L - 1).
  Buffer stamp(const StateInputs& in, const Buffer& buffer) const {
    Ring ring = empty_ring(8);
    const StatePlan plan = build(in, ring);
    const StageRun run = runner.write(plan.plan, plan.tokens, KernelKind::TAIL_K_FULL, RealKv{}, buffer, ring);
    EXPECT_EQ(run.ring.count, 0);
    return run.buffer;
  }
  Ring check(const StateInputs& in, const Buffer& buffer, bool with_pool = true) const {
    Ring ring = empty_ring(8);
    const StatePlan plan = build(in, ring);
    return runner.verify(plan.plan, buffer, ring, with_pool);
  }

  // Tokens of pool row `row` at positions [first, last) written into their slots (seed: the slot before).
  Buffer write_kv(std::int64_t row, std::int64_t first, std::int64_t last, const Buffer& buffer,
                  std::optional<std::int64_t> identity = std::nullopt) const {
    const StateInputs in = inputs({}, {}, {});
    Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
    plan.write_offsets = {0, last - first};
    plan.write_seed_slot_indices = {
        first == 0 ? -1 : in.req_to_token[static_cast<std::size_t>(row * kMaxSeqLen + first - 1)]};
    plan.write_num_valid_reqs = 1;
    if (identity) plan.write_identities = Int64s{*identity};
    Tokens t;
    for (std::int64_t p = first; p < last; ++p) {
      t.input_ids.push_back((*in.token_pool)[static_cast<std::size_t>(row * kMaxSeqLen + p)]);
      t.positions.push_back(p);
      t.out_cache_loc.push_back(in.req_to_token[static_cast<std::size_t>(row * kMaxSeqLen + p)]);
    }
    const StageRun run = runner.write(plan, t, KernelKind::HEAD_K_FULL, RealKv{}, buffer, empty_ring(4));
    EXPECT_EQ(run.ring.count, 0);
    return run.buffer;
  }
  Buffer a_through_4() const { return write_kv(1, 0, 5, Buffer(kKvSlots + kStateSlots)); }

  static std::int64_t bits(const Ring& ring) { return ring.rows.at(0)[kvcanary::kRowFailReasonBits]; }
};

TEST_F(StateRecords, TheStampIsTheChainsRecordAtThePositionWithoutAFingerprint) {
  const Buffer kv = a_through_4();
  const Buffer without_pool = stamp(inputs({9}, {1}, {4}, false), kv);
  EXPECT_EQ(without_pool[9], (Record{-1, 4, kv[5].prev_hash, 0}));
  const Buffer with_pool = stamp(inputs({9}, {1}, {4}), kv);
  EXPECT_EQ(with_pool[9], (Record{505, 4, kv[5].prev_hash, 0}));
  EXPECT_EQ(check(inputs({9}, {1}, {4}), with_pool).count, 0);  // resume at L = 5
  const Ring early = check(inputs({9}, {1}, {3}), with_pool);   // resume at L = 4
  ASSERT_EQ(early.count, 1);
  EXPECT_EQ(early.rows[0], (RingRow{0, 9, 4, 505, 404, kv[5].prev_hash, kvcanary::reference::slot_hash(kv, 3), 35}));
}

TEST_F(StateRecords, TheEntriesAreTheTriplesRoutedThroughReqToToken) {
  Ring ring = empty_ring(8);
  const StatePlan plan = build(inputs({9, -1, 10, 11, 8}, {1, 1, 7, 2, 2}, {4, 2, 4, -1, 9}), ring, 6);
  EXPECT_EQ(plan.plan.verify_num_valid, 1);
  EXPECT_EQ(plan.plan.write_num_valid_reqs, 1);
  EXPECT_EQ(plan.plan.enable, 1);
  EXPECT_EQ(head(plan.plan.verify_slot_indices, 2), (Int64s{9, kPoison}));
  EXPECT_EQ(plan.plan.verify_prev_slot_indices[0], 4);
  EXPECT_EQ(plan.plan.verify_expected_tokens[0], 505);
  EXPECT_EQ(head(plan.plan.write_offsets, 3), (Int64s{0, 1, kPoison}));
  EXPECT_EQ(sorted(ring.rows), sorted({RingRow{0, 7, 4, -1, -1, -1, 2, 64}, RingRow{0, 9, 9, -1, -1, -1, 4, 64}}));
  EXPECT_EQ(ring.slot_run_counter, 1);
  EXPECT_EQ(ring.kernel_run_counter, 1);
}

TEST_F(StateRecords, ACleanResumePassesStepAfterStep) {
  Buffer buffer = stamp(inputs({9}, {1}, {4}), a_through_4());
  EXPECT_EQ(check(inputs({9}, {1}, {4}), buffer).count, 0);
  buffer = write_kv(1, 5, 6, buffer);  // a decode step: position 5, then the update through 5
  buffer = stamp(inputs({9}, {1}, {5}), buffer);
  EXPECT_EQ(check(inputs({9}, {1}, {5}), buffer).count, 0);
  // A state over the same tokens through exactly the boundary is the state B needs: content-addressed.
  const Buffer shared = stamp(inputs({10}, {1}, {2}), buffer);
  EXPECT_EQ(check(inputs({10}, {2}, {2}), shared).count, 0);
}

TEST_F(StateRecords, AFreshSlotHoldingAnotherRequestsStateFails) {  // KV-BUGS row 41
  const Buffer buffer = stamp(inputs({9}, {1}, {4}), a_through_4());
  const Ring with_pool = check(inputs({9}, {2}, {2}), buffer);  // B resumes at L = 3 from A's state
  ASSERT_EQ(with_pool.count, 1);
  EXPECT_EQ(bits(with_pool), 1 | 2 | 32);
  const Ring without_pool = check(inputs({9}, {2}, {2}, false), buffer, false);
  ASSERT_EQ(without_pool.count, 1);
  EXPECT_EQ(bits(without_pool), 1 | 2);
  runner.checks = kvcanary::VerifyChecks{};  // the free stage on released state slots: FREED
  const StageRun freed = runner.free({9}, 3, buffer, empty_ring(4));
  const Ring read = check(inputs({9}, {2}, {2}), freed.buffer);
  ASSERT_EQ(read.count, 1);
  EXPECT_EQ(bits(read), 128 | 1 | 2);
}

TEST_F(StateRecords, AResumeAtAnotherBoundaryThanTheStatesFailsWithBit2) {  // KV-BUGS row 42
  Buffer buffer = stamp(inputs({9}, {1}, {4}), a_through_4());
  buffer = write_kv(1, 5, 7, buffer);  // the attention group holds positions 5-6 too
  for (const std::int64_t boundary : {7, 4}) {
    const Ring ring = check(inputs({9}, {1}, {boundary - 1}), buffer);
    ASSERT_EQ(ring.count, 1) << "L = " << boundary;
    EXPECT_EQ(bits(ring), 1 | 2 | 32) << "L = " << boundary;
    const Ring without_pool = check(inputs({9}, {1}, {boundary - 1}, false), buffer, false);
    EXPECT_EQ(bits(without_pool), 1 | 2) << "L = " << boundary;
  }
  const Ring never_stamped = check(inputs({10}, {1}, {4}), buffer);  // a zero record: 1 | 2 | 32
  ASSERT_EQ(never_stamped.count, 1);
  EXPECT_EQ(never_stamped.rows[0], (RingRow{0, 10, 0, 0, 505, 0, kvcanary::reference::slot_hash(buffer, 4), 35}));
}

TEST_F(StateRecords, APaddingDummyAliasingAParkedRequestsStateIsCaughtWhenTheStampFollowsTheMapping) {  // row 43
  Buffer buffer = stamp(inputs({9}, {1}, {4}), a_through_4());  // A parks with its state through 4
  buffer = write_kv(2, 3, 5, buffer);                           // B's step: positions 3-4
  // The padded batch: B (state slot 10) and a dummy (pool row 0, position 0) whose stale index is A's slot.
  const Buffer aliased = stamp(inputs({10, 9}, {2, 0}, {4, 0}), buffer);
  const Ring caught = check(inputs({9}, {1}, {4}), aliased);  // A resumes at L = 5
  ASSERT_EQ(caught.count, 1);
  EXPECT_EQ(bits(caught), 1 | 2 | 32);
  const Buffer correct = stamp(inputs({10, -1}, {2, 0}, {4, 0}), buffer);  // the dummy's slot is padding
  EXPECT_EQ(check(inputs({9, 10}, {1, 2}, {4, 4}), correct).count, 0);
}

TEST_F(StateRecords, AStateOfAnotherIdentityOverTheSameTokensFailsWithBit1Only) {
  const Buffer kv = write_kv(1, 0, 5, Buffer(kKvSlots + kStateSlots), 5);
  StateInputs stamped = inputs({9}, {1}, {2});
  stamped.identities = Int64s{5};
  const Buffer buffer = stamp(stamped, kv);
  StateInputs resumed = inputs({9}, {2}, {2});
  resumed.identities = Int64s{6};
  const Ring other = check(resumed, buffer);
  ASSERT_EQ(other.count, 1);
  EXPECT_EQ(bits(other), 1);
  resumed.identities = Int64s{5};
  EXPECT_EQ(check(resumed, buffer).count, 0);
}

TEST_F(StateRecords, RandomTriplesGiveTheReferencesEntriesRowsAndCounters) {
  std::mt19937_64 rng{20261204};
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int round = 0; round < 60; ++round) {
    const auto n = static_cast<std::size_t>(uniform(0, 6));
    Int64s slots(n), rows(n), positions(n), identities(n);
    for (std::size_t i = 0; i < n; ++i) {
      slots[i] = uniform(-2, 12);
      rows[i] = uniform(-1, kMaxReqs);
      positions[i] = uniform(-1, kMaxSeqLen);
      identities[i] = uniform(-3, 3);
    }
    StateInputs in = inputs(slots, rows, positions, uniform(0, 1) == 1);
    if (in.token_pool && uniform(0, 1) == 1) {  // a pool narrower than req_to_token: -1 past it
      in.pool_rows = 3;
      in.pool_cols = 5;
      in.token_pool->resize(15);
    }
    if (uniform(0, 1) == 1) in.identities = identities;
    Ring ring = empty_ring(uniform(0, 3));
    build(in, ring, static_cast<std::int64_t>(n) + uniform(0, 2));
  }
}

TEST_F(StateRecords, TheDevicePlanStampsAndChecksThroughSharedArrays) {
  using MemorySpace = ExecSpace::memory_space;
  const ExecSpace space;
  const StateInputs host_in = inputs({9}, {1}, {4});
  const auto buffer = kvcanary::upload_canary_buffer(space, a_through_4());
  const auto ring = kvcanary::allocate_violation_ring(space, 4);
  const auto plan = kvcanary::allocate_state_plan(space, 2);
  kvcanary::StateInputs<MemorySpace> in;
  in.state_slots = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "slots", host_in.state_slots);
  in.req_pool_indices = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "rows", host_in.req_pool_indices);
  const auto positions = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "positions", host_in.positions);
  in.positions = positions;
  in.req_to_token =
      kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "r2t", host_in.req_to_token, kMaxReqs, kMaxSeqLen);
  in.token_pool =
      kvcanary::Impl::upload<std::int32_t, MemorySpace>(space, "pool", *host_in.token_pool, kMaxReqs, kMaxSeqLen);
  kvcanary::state_plan(space, in, plan, ring);
  kvcanary::write(space, plan.stamp, plan.tokens, buffer, ring);
  kvcanary::verify(space, plan.check, buffer, ring);
  kvcanary::Impl::copy_into(space, positions, Int64s{3});  // a resume at L = 4: one row
  kvcanary::state_plan(space, in, plan, ring);
  kvcanary::verify(space, plan.check, buffer, ring);
  const Ring rows = kvcanary::download_violation_ring(space, ring);
  const Buffer records = kvcanary::download_canary_buffer(space, buffer);
  EXPECT_EQ(records[9], (Record{505, 4, records[5].prev_hash, 0}));
  ASSERT_EQ(rows.count, 1);
  EXPECT_EQ(bits(rows), 1 | 2 | 32);
  EXPECT_EQ(rows.kernel_run_counter, 5);  // two plans, a write, two verifies
  EXPECT_EQ(rows.slot_run_counter, 5);    // 1 + 1 stored + 1 checked + 1 + 1 checked
}

TEST_F(StateRecords, HostErrorsNameTheArgument) {
  const ExecSpace space;
  using MemorySpace = ExecSpace::memory_space;
  const auto ring = kvcanary::allocate_violation_ring(space, 4);
  const auto plan = kvcanary::allocate_state_plan(space, 1);
  kvcanary::StateInputs<MemorySpace> in;
  in.state_slots = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "slots", Int64s{9, 10});
  in.req_pool_indices = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "rows", Int64s{1, 1});
  in.positions = kvcanary::Impl::upload<std::int64_t, MemorySpace>(space, "positions", Int64s{1});
  // `call` throws std::invalid_argument whose message holds `needle`.
  const auto throws = [](const auto& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "no error, expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto run_with = [&](const kvcanary::StatePlan<MemorySpace>& p) {
    return [&] { kvcanary::state_plan(space, in, p, ring); };
  };
  throws(run_with(plan), "positions");
  in.positions = in.req_pool_indices;
  throws(run_with(plan), "capacity");
  const auto wide = kvcanary::allocate_state_plan(space, 2);
  in.identities = in.positions;  // for a plan without identity arrays
  throws(run_with(wide), "identities");
  in.identities.reset();
  auto copied = wide;  // a stamp with arrays of its own would not stamp what the builder wrote
  copied.stamp.write_seed_slot_indices = decltype(copied.stamp.write_seed_slot_indices)("seeds", 2);
  throws(run_with(copied), "allocate_state_plan");
  auto short_tokens = wide;  // every array of the plan has the capacity's extent
  short_tokens.check.verify_expected_tokens = decltype(short_tokens.check.verify_expected_tokens)("tokens", 1);
  throws(run_with(short_tokens), "verify_expected_tokens has 1 entries, must be 2");
  const auto with_slots = in.state_slots;  // a View with entries but no memory
  in.state_slots = decltype(in.state_slots)(static_cast<const std::int64_t*>(nullptr), 2);
  throws(run_with(wide), "state_slots has 2 entries but no memory");
  in.state_slots = with_slots;
  throws([&] { kvcanary::allocate_state_plan(space, std::int64_t{1} << 31); }, "capacity is 2147483648");
  throws([&] { kvcanary::allocate_state_plan(space, -1); }, "allocate_state_plan: capacity is -1");
  const auto buffer = kvcanary::allocate_canary_buffer(space, 12);
  throws([&] { kvcanary::leading_slots(buffer, 13); }, "num_slots is 13");
  EXPECT_EQ(kvcanary::leading_slots(buffer, 8).num_slots(), 8);
  EXPECT_EQ(kvcanary::leading_slots(buffer, 8).records.data(), buffer.records.data());
  Ring host_ring = empty_ring(4);
  StatePlan host_plan = kvcanary::reference::make_state_plan(1, 0);
  const auto reference = [&](const StateInputs& host_in) {
    return [&, host_in] { kvcanary::reference::state_plan(host_in, host_plan, KernelKind::HEAD_K_FULL, host_ring); };
  };
  throws(reference(inputs({9, 10}, {1, 1}, {1, 1})), "capacity is 1");
  host_plan.tokens.positions.clear();
  throws(reference(inputs({9}, {1}, {1})), "tokens.positions has 0 entries, must be 1");
}

}  // namespace kvcanary_test
