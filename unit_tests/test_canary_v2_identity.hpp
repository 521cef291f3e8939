// SPEC-CANARY §11.7 on this backend: a request's identity (LoRA adapter, cache salt, multimodal hash) masks
// every chain link it writes and verify expects. Facts (identity 0 is the original's format byte for byte;
// the masked links of a pinned chain; a prefix-cache hit across identities fails with bit 1 on every
// entry), the plan's identity arrays (written, left alone, host errors), and randomized plan -> write ->
// verify steps with identities against the host reference, every stage compared record by record and row
// by row (CanaryRunner, PlanTest's comparison).

#include "test_canary_cases.hpp"
#include "test_canary_support.hpp"

#include <kvcanary/impl/hash.hpp>

#include <algorithm>
#include <random>

namespace kvcanary_test {

class CanaryIdentity : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  CanaryRunner<ExecSpace> runner;
  std::mt19937_64 rng{20261205};

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }
  bool coin(int one_in) { return uniform(0, one_in - 1) == 0; }

  // The library's plan (from poisoned outputs, with identity arrays when `in` has identities), checked
  // against the reference's.
  static Outputs plan_both(const Inputs& in, const Capacities& caps) {
    Outputs library = poisoned(caps), reference = poisoned(caps);
    if (in.req_identities) {
      library.verify_identities = reference.verify_identities = Int64s(static_cast<std::size_t>(caps.verify), kPoison);
      library.write_identities = reference.write_identities = Int64s(static_cast<std::size_t>(caps.write), kPoison);
    }
    kvcanary::reference::plan(in, reference);
    kvcanary::plan_host_data(ExecSpace(), in, library);
    EXPECT_TRUE(same_plan(library, reference));
    return library;
  }

  // Tokens 101, 202, 303 at positions 0-2 into slots 1-3 from seed -1, the request's identity `id`.
  StageRun write_three(std::int64_t id) const {
    Outputs plan = three_token_write_plan();
    plan.write_identities = Int64s{id};
    return runner.write(plan, three_tokens_in_slots_1_to_3(), KernelKind::HEAD_K_FULL, RealKv{}, Buffer(8), empty_ring(4));
  }
  static Outputs three_entries(std::int64_t id) {
    Outputs plan = verify_plan_of({{1, 0, -1, 101}, {2, 1, 1, 202}, {3, 2, 2, 303}});
    plan.verify_identities = Int64s(3, id);
    return plan;
  }
};

TEST_F(CanaryIdentity, TheMaskIsSplitmixOfTheIdentityAndZeroForIdentityZero) {
  EXPECT_EQ(kvcanary::Impl::identity_mask(0), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(kvcanary::Impl::identity_mask(7)), 0x12AE30237B17DF14ull);
}

TEST_F(CanaryIdentity, EveryLinkOfTheChainIsMaskedByTheIdentity) {
  const StageRun run = write_three(7);
  EXPECT_EQ(static_cast<std::uint64_t>(run.buffer[1].prev_hash), 0xCCD19E00D2B66802ull);  // anchor_hash ^ mask(7)
  EXPECT_EQ(static_cast<std::uint64_t>(run.buffer[2].prev_hash), 0x8A80B4B80003AF07ull);
  EXPECT_EQ(static_cast<std::uint64_t>(run.buffer[3].prev_hash), 0xA9CDB353ACF9E6A2ull);
  EXPECT_EQ(run.buffer[2].token, 202);  // tokens, positions and fingerprints are the original's
  EXPECT_EQ(run.buffer[2].position, 1);
  EXPECT_EQ(run.ring.count, 0);
  EXPECT_EQ(runner.verify(three_entries(7), run.buffer, empty_ring(8), true).count, 0);
}

TEST_F(CanaryIdentity, IdentityZeroIsTheOriginalsFormatByteForByte) {
  const StageRun masked = write_three(0);
  const StageRun original = runner.write(three_token_write_plan(), three_tokens_in_slots_1_to_3(), KernelKind::HEAD_K_FULL,
                                         RealKv{}, Buffer(8), empty_ring(4));
  EXPECT_TRUE(same_buffer(masked.buffer, original.buffer));
  EXPECT_EQ(static_cast<std::uint64_t>(original.buffer[2].prev_hash), 0x542FE5061275A6ABull);  // SPEC-CANARY §2
}

// The random write and verify calls of the v1 differential tests, each run without identity arrays and
// with identity arrays of zeros: the same buffers, rows and counters, byte for byte (on the backend and
// against the reference: CanaryRunner compares both runs with it).
TEST_F(CanaryIdentity, ZeroIdentitiesAreByteEqualToNoIdentitiesOnRandomCalls) {
  CanaryCaseGenerator generator(0x1D0);
  for (int k = 0; k < 150; ++k) {
    const WriteCase w = generator.next_write(k % 3 == 0 ? WriteShape::long_ones() : WriteShape{});
    Outputs zeros = w.plan;
    zeros.write_identities = Int64s(w.plan.write_seed_slot_indices.size(), 0);
    const StageRun plain = runner.write(w.plan, w.tokens, w.kind, w.real_kv, w.buffer, w.ring);
    const StageRun masked = runner.write(zeros, w.tokens, w.kind, w.real_kv, w.buffer, w.ring);
    EXPECT_TRUE(same_buffer(masked.buffer, plain.buffer)) << "write case " << k;
    // Which rows a full ring keeps is unspecified across threads (SPEC-CANARY §1): all rows when all fit.
    EXPECT_EQ(masked.ring.count, plain.ring.count) << "write case " << k;
    if (plain.ring.count <= plain.ring.capacity)
      EXPECT_EQ(sorted(masked.ring.rows), sorted(plain.ring.rows)) << "write case " << k;
    EXPECT_EQ(masked.ring.slot_run_counter, plain.ring.slot_run_counter);

    const VerifyCase v = generator.next_verify();
    Outputs zero_entries = v.plan;
    zero_entries.verify_identities = Int64s(v.plan.verify_slot_indices.size(), 0);
    const Ring a = runner.verify(v.plan, v.buffer, v.ring, v.check_expected_token, v.kind, v.real_kv);
    const Ring b = runner.verify(zero_entries, v.buffer, v.ring, v.check_expected_token, v.kind, v.real_kv);
    EXPECT_EQ(b.count, a.count) << "verify case " << k;
    if (a.count <= a.capacity) EXPECT_EQ(sorted(b.rows), sorted(a.rows)) << "verify case " << k;
    if (HasFailure()) return;
  }
}

TEST_F(CanaryIdentity, AnotherIdentityFailsTheChainOfEveryEntry) {
  const StageRun run = write_three(7);
  for (std::int64_t reader : {std::int64_t{0}, std::int64_t{8}}) {
    const Ring ring = runner.verify(three_entries(reader), run.buffer, empty_ring(8), true);
    ASSERT_EQ(ring.rows.size(), 3u) << "reader identity " << reader;
    const std::int64_t expected_first = kvcanary::Impl::kAnchorHashInt64 ^ kvcanary::Impl::identity_mask(reader);
    EXPECT_EQ(sorted(ring.rows)[0], (RingRow{0, 1, 0, 101, 101, run.buffer[1].prev_hash, expected_first, 1}));
    for (const RingRow& row : ring.rows) EXPECT_EQ(row[kvcanary::kRowFailReasonBits], kvcanary::kVerifyChainHash);
  }
  // A plan without identities reads as identity 0.
  Outputs plain = three_entries(0);
  plain.verify_identities.reset();
  EXPECT_EQ(runner.verify(plain, run.buffer, empty_ring(8), true).count, 3);
}

TEST_F(CanaryIdentity, AFreedRecordOfTheReadersOwnIdentityIsBit128Alone) {
  CanaryRunner<ExecSpace> v2 = runner;
  v2.checks = kvcanary::VerifyChecks{};
  const Buffer freed = v2.free({2}, 77, write_three(7).buffer, empty_ring(4)).buffer;
  const Ring ring = v2.verify(three_entries(7), freed, empty_ring(8), true);
  ASSERT_EQ(ring.rows.size(), 2u);  // slot 2: 128 alone; slot 3: its predecessor changed (bit 1)
  EXPECT_EQ(sorted(ring.rows)[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyFreed);
  EXPECT_EQ(sorted(ring.rows)[1][kvcanary::kRowFailReasonBits], kvcanary::kVerifyChainHash);
}

// vLLM #38606 / SGLang #24568: two requests with equal tokens but different adapters or salts share a
// cached prefix. Request A (pool row 1, identity 5) writes 4 tokens; request B (pool row 2) maps its
// first 4 positions to A's slots and extends by one.
TEST_F(CanaryIdentity, APrefixCacheHitAcrossIdentitiesFailsVerify) {
  Inputs in = linear(4, 16);
  set_pool(in, 4, 16, {16});
  for (int p = 0; p < 16; ++p) in.req_to_verify_expected_tokens->at(static_cast<std::size_t>(2 * 16 + p)) = 1000 + p;
  set_batch(in, {1}, {0}, {4});
  in.req_identities = Int64s{5};
  const Outputs write_a = plan_both(in, {64, 4});
  Tokens a;
  a.input_ids = {1000, 1001, 1002, 1003};
  a.positions = {0, 1, 2, 3};
  a.out_cache_loc = {16, 17, 18, 19};
  const Buffer cache = runner.write(write_a, a, KernelKind::HEAD_K_FULL, RealKv{}, Buffer(64), empty_ring(4)).buffer;
  for (int p = 0; p < 4; ++p) in.req_to_token[static_cast<std::size_t>(2 * 16 + p)] = 16 + p;  // the hit
  set_batch(in, {2}, {4}, {1});
  for (std::int64_t b : {std::int64_t{6}, std::int64_t{0}, std::int64_t{5}}) {
    in.req_identities = Int64s{b};
    const Outputs step_b = plan_both(in, {64, 4});
    Int64s expected(64, kPoison);
    std::fill(expected.begin(), expected.begin() + 4, b);
    EXPECT_EQ(*step_b.verify_identities, expected) << "entries [0, 4) written, the rest left alone";
    const Ring ring = runner.verify(step_b, cache, empty_ring(8), true);
    EXPECT_EQ(ring.count, b == 5 ? 0 : 4) << "identity " << b;
    for (const RingRow& row : ring.rows) EXPECT_EQ(row[kvcanary::kRowFailReasonBits], kvcanary::kVerifyChainHash);
  }
}

TEST_F(CanaryIdentity, ThePlanCopiesEachRowsIdentityAndLeavesTheRestAlone) {
  Inputs in = linear(4, 32);
  set_batch(in, {1, 0, 2, 3}, {3, 9, 2, 40}, {1, 1, 0, 1});  // a padding row, a bad row (prefix > 32)
  in.req_identities = Int64s{11, 12, -13, 14};
  const Outputs out = plan_both(in, {8, 6});
  EXPECT_EQ(*out.verify_identities, (Int64s{11, 11, 11, -13, -13, kPoison, kPoison, kPoison}));
  EXPECT_EQ(*out.write_identities, (Int64s{11, 12, -13, 14, kPoison, kPoison}));
  // Overflow: no verify array is touched, identities included; the write identities are written.
  const Outputs over = plan_both(in, {4, 4});
  EXPECT_EQ(over.enable, 0);
  EXPECT_EQ(*over.verify_identities, Int64s(4, kPoison));
  EXPECT_EQ(*over.write_identities, (Int64s{11, 12, -13, 14}));
}

TEST_F(CanaryIdentity, IdentitiesAreGivenWithIdentityArraysOrNotAtAll) {
  Inputs in = linear(4, 16);
  set_batch(in, {1}, {3}, {1});
  const auto plan_error = [&](const Inputs& inputs, Outputs out) {
    return invalid_argument_message([&] { kvcanary::plan_host_data(ExecSpace(), inputs, out); });
  };
  Outputs plain = poisoned({});
  Outputs with = plain;
  with.verify_identities = Int64s(64, 0);
  with.write_identities = Int64s(4, 0);
  in.req_identities = Int64s{1};
  EXPECT_THAT(plan_error(in, plain).value_or(""), ::testing::HasSubstr("req_identities is given but the plans hold no"));
  in.req_identities = Int64s{1, 2};
  EXPECT_THAT(plan_error(in, with).value_or(""), ::testing::HasSubstr("req_identities has 2 entries"));
  in.req_identities.reset();
  EXPECT_THAT(plan_error(in, with).value_or(""), ::testing::HasSubstr("req_identities is missing"));
  in.req_identities = Int64s{1};
  with.write_identities = Int64s(3, 0);
  EXPECT_THAT(plan_error(in, with).value_or(""), ::testing::HasSubstr("write_identities has 3 entries"));
  // write() and verify() check the extents too (the reference says the same).
  Outputs plan = three_entries(1);
  plan.verify_identities = Int64s{1};
  EXPECT_TRUE(invalid_argument_message([&] {
                Ring ring = empty_ring(4);
                kvcanary::reference::verify(plan, Buffer(8), KernelKind::HEAD_K_FULL, RealKv{}, true, ring);
              }).has_value());
  const Buffer buffer(8);
  const RealKv none;
  EXPECT_TRUE(invalid_argument_message([&] {
                Ring ring = empty_ring(4);
                kvcanary::verify_host_data(ExecSpace(), plan, {&buffer}, {KernelKind::HEAD_K_FULL}, {&none}, true, ring);
              }).has_value());
}

// Random engines' steps: plan (with identities, some 0, some shared, some rows sharing pool rows' slots
// across identities), write the extend tokens, then verify the next step's prefixes; every stage on the
// backend and the reference, compared. Over several buffers, widths and int32 tokens now and then.
TEST_F(CanaryIdentity, RandomStepsWithIdentitiesMatchTheReference) {
  std::int64_t cross_rows = 0;
  for (int c = 0; c < 400; ++c) {
    CanaryRunner<ExecSpace> r;
    r.layout.int32_tokens = coin(3);
    const int widest = std::min(8, static_cast<int>(ExecSpace().concurrency()));  // Serial: width 1 only
    r.layout.write_lanes = coin(3) ? static_cast<int>(uniform(1, widest)) : 0;
    r.algorithm = coin(2) ? CanaryAlgorithm::Portable : CanaryAlgorithm::Default;
    r.checks = coin(2) ? kvcanary::VerifyChecks{} : kvcanary::VerifyChecks::v1();
    const std::int64_t rows = uniform(2, 6), cols = uniform(2, 20), slots = rows * cols + 1;
    Inputs in = linear(rows, cols);
    for (std::int32_t& v : in.req_to_token) v += 1;  // slot 0 stays padding
    std::int64_t shared = 0;
    if (rows > 2 && coin(3)) {  // a prefix shared by pool rows 1 and 2 (a cache hit, maybe across identities)
      shared = uniform(1, cols - 1);
      for (std::int64_t p = 0; p < shared; ++p)
        in.req_to_token[static_cast<std::size_t>(2 * cols + p)] = in.req_to_token[static_cast<std::size_t>(cols + p)];
    }
    // Distinct pool rows, and rows 1 and 2 past their shared prefix: no slot is written twice in the call,
    // none is one request's seed and another's target (SPEC-CANARY §4 leaves those outcomes open).
    Int64s pool_rows = range(1, rows);
    std::shuffle(pool_rows.begin(), pool_rows.end(), rng);
    const std::int64_t bs = uniform(0, 4);
    Int64s rpi, prefix, extend, ids;
    for (std::int64_t b = 0; b < bs; ++b) {
      const bool padding = coin(6) || b >= static_cast<std::int64_t>(pool_rows.size());
      rpi.push_back(padding ? 0 : pool_rows[static_cast<std::size_t>(b)]);
      prefix.push_back(rpi.back() == 1 || rpi.back() == 2 ? uniform(shared, cols - 1) : uniform(0, cols - 1));
      extend.push_back(uniform(0, 3));
      ids.push_back(coin(3) ? 0 : coin(2) ? uniform(1, 3) : uniform(INT64_MIN, INT64_MAX));
    }
    set_batch(in, rpi, prefix, extend);
    in.req_identities = ids;
    const Outputs plan = plan_both(in, {uniform(0, 60), bs + uniform(0, 2)});
    // The step's tokens: each good row's extend tokens at the positions after its prefix, into its row's slots.
    Tokens t;
    for (std::int64_t b = 0; b < bs; ++b) {
      const auto i = static_cast<std::size_t>(b);
      if (rpi[i] == 0) continue;
      for (std::int64_t p = prefix[i]; p < std::min(cols, prefix[i] + extend[i]); ++p) {
        t.input_ids.push_back(uniform(0, 99));
        t.positions.push_back(p);
        t.out_cache_loc.push_back(coin(15) ? -1 : in.req_to_token[static_cast<std::size_t>(rpi[i] * cols + p)]);
      }
      // Rows whose span the plan gives past the end of what was pushed read padding tokens (a partial row).
      for (std::int64_t p = std::min(cols, prefix[i] + extend[i]); p < prefix[i] + extend[i]; ++p) {
        t.input_ids.push_back(0);
        t.positions.push_back(p);
        t.out_cache_loc.push_back(-1);
      }
    }
    t.chain_position_assert = coin(2) ? 1 : 0;
    // A cache written by earlier steps of random identities, then this step's write, then a verify.
    Buffer buffer(static_cast<std::size_t>(slots));
    Outputs earlier = kvcanary::reference::make_outputs(0, 1, 0);
    earlier.write_offsets = {0, cols};
    earlier.write_seed_slot_indices = {-1};
    earlier.write_num_valid_reqs = 1;
    for (std::int64_t row = 1; row < rows; ++row) {
      earlier.write_identities = Int64s{coin(2) ? 0 : uniform(1, 3)};
      Tokens e;
      for (std::int64_t p = 0; p < cols; ++p) {
        e.input_ids.push_back(uniform(0, 99));
        e.positions.push_back(p);
        e.out_cache_loc.push_back(in.req_to_token[static_cast<std::size_t>(row * cols + p)]);
      }
      buffer = r.write(earlier, e, KernelKind::HEAD_K_FULL, RealKv{}, buffer, empty_ring(0)).buffer;
    }
    if (static_cast<std::int64_t>(t.input_ids.size()) == plan.write_offsets[static_cast<std::size_t>(bs)]) {
      if (coin(4)) {
        const RealKv none;
        buffer = r.write(plan, t, {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL}, {&none, &none},
                         {buffer, buffer}, empty_ring(uniform(0, 6)))[0];
      } else {
        buffer = r.write(plan, t, KernelKind::HEAD_K_FULL, RealKv{}, buffer, empty_ring(uniform(0, 6))).buffer;
      }
    }
    const Ring ring = r.verify(plan, buffer, empty_ring(uniform(0, 12)), coin(2));
    cross_rows += ring.count;
  }
  EXPECT_GT(cross_rows, 0) << "the random steps never read a record of another identity";
}

}  // namespace kvcanary_test
