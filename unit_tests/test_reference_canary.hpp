// SPEC-CANARY §4, §5 and §8 on the host reference (reference::write / reference::verify): the facts, every
// OUT_OF_RANGE rule, the fill-once ring and its counters, the clamps, the host-side errors (nothing
// touched) and a multi-step scenario. These are the oracle's own tests; the device stages are compared
// with this reference elsewhere.

#include "test_support.hpp"

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <limits>

namespace kvcanary_test {

namespace canary = kvcanary::reference;
using canary::Record;
using canary::RingRow;
using kvcanary::KernelKind;
using kvcanary::RealKvMode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::int64_t kAnchor = -2414019407054260458LL;  // anchor_hash as int64 (SPEC-CANARY §2)
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();

inline std::int64_t hash_of(std::int64_t prev_hash, std::int64_t token, std::int64_t position) {
  return kvcanary::Impl::record_hash(prev_hash, token, position);
}

// A WritePlan of one call (the verify half empty): offsets has one entry more than seeds.
inline Outputs write_plan(Int64s offsets, Int64s seeds, std::int64_t num_valid_reqs) {
  Outputs plan = kvcanary::reference::make_outputs(0, static_cast<std::int64_t>(seeds.size()), 0);
  plan.write_offsets = std::move(offsets);
  plan.write_seed_slot_indices = std::move(seeds);
  plan.write_num_valid_reqs = static_cast<std::int32_t>(num_valid_reqs);
  return plan;
}

// A VerifyPlan whose every entry is active (enable 1); the write half empty.
inline Outputs verify_plan(Int64s slots, Int64s positions, Int64s prevs, Int64s tokens) {
  Outputs plan = kvcanary::reference::make_outputs(0, 0, 0);
  plan.verify_num_valid = static_cast<std::int32_t>(slots.size());
  plan.enable = 1;
  plan.verify_slot_indices = std::move(slots);
  plan.verify_expected_positions = std::move(positions);
  plan.verify_prev_slot_indices = std::move(prevs);
  plan.verify_expected_tokens = std::move(tokens);
  return plan;
}

inline canary::StepTokens step_tokens(Int64s input_ids, Int64s positions, Int64s out_cache_loc) {
  canary::StepTokens tokens;
  tokens.input_ids = std::move(input_ids);
  tokens.positions = std::move(positions);
  tokens.out_cache_loc = std::move(out_cache_loc);
  return tokens;
}

inline canary::ViolationRing ring_of(std::int64_t capacity) {
  canary::ViolationRing ring;
  ring.capacity = capacity;
  return ring;
}

inline RingRow row_of(KernelKind kind, std::int64_t slot, std::int64_t position, std::int64_t stored_token,
                      std::int64_t expected_token, std::int64_t chain_hash, std::int64_t aux, std::int64_t bits) {
  return RingRow{static_cast<std::int64_t>(kind), slot, position, stored_token, expected_token, chain_hash, aux, bits};
}

constexpr KernelKind kKind = KernelKind::TAIL_V_SWA;  // 9: field 0 must carry the caller's tag, not 0

// One call of each stage with the test's defaults (no real-KV).
inline void write_call(const Outputs& plan, const canary::StepTokens& tokens, canary::CanaryBuffer& buffer,
                       canary::ViolationRing& ring, const canary::RealKv& real_kv = {}) {
  canary::write(plan, tokens, kKind, real_kv, buffer, ring);
}
inline void verify_call(const Outputs& plan, const canary::CanaryBuffer& buffer, canary::ViolationRing& ring,
                        bool check_expected_token = true, const canary::RealKv& real_kv = {}) {
  canary::verify(plan, buffer, kKind, real_kv, check_expected_token, ring);
}

// ---- SPEC-CANARY §8 write facts ----

TEST(ReferenceWrite, SeedMinusOneStampsAnchorHash) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  write_call(write_plan({0, 1}, {-1}, 1), step_tokens({42}, {0}, {3}), buffer, ring);
  EXPECT_EQ(buffer[3], (Record{42, 0, kAnchor, 0}));
  for (std::size_t s = 0; s < buffer.size(); ++s)
    if (s != 3) EXPECT_EQ(buffer[s], Record{}) << "slot " << s;
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(ring.slot_run_counter, 1);
  EXPECT_EQ(ring.kernel_run_counter, 1);
}

TEST(ReferenceWrite, SeedSlotChainsFromItsRecord) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, 4, kAnchor, 0};
  auto ring = ring_of(4);
  write_call(write_plan({0, 1}, {7}, 1), step_tokens({55}, {5}, {2}), buffer, ring);
  EXPECT_EQ(kvcanary::Impl::as_uint64(buffer[2].prev_hash), 0x5022670B6356AF64ull);
  EXPECT_EQ(ring.count, 0);
}

TEST(ReferenceWrite, FiveTokensAfterSeedFortyTwoVerifyClean) {
  canary::CanaryBuffer buffer(64);
  buffer[42] = Record{7, 10, kAnchor, 0};
  auto ring = ring_of(8);
  write_call(write_plan({0, 5}, {42}, 1), step_tokens({101, 202, 303, 404, 505}, {11, 12, 13, 14, 15}, {0, 1, 2, 3, 4}),
             buffer, ring);
  EXPECT_EQ(kvcanary::Impl::as_uint64(buffer[0].prev_hash), 0x5E35681BCFCE7CF6ull);
  EXPECT_EQ(buffer[1].prev_hash, hash_of(buffer[0].prev_hash, 101, 11));
  EXPECT_EQ(ring.count, 0);
  verify_call(verify_plan({0, 1, 2, 3, 4}, {11, 12, 13, 14, 15}, {42, 0, 1, 2, 3}, {101, 202, 303, 404, 505}), buffer,
              ring);
  EXPECT_EQ(ring.count, 0);
  EXPECT_TRUE(ring.rows.empty());
}

TEST(ReferenceWrite, NegativeSlotIsSkippedEntirely) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  write_call(write_plan({0, 2}, {-1}, 1), step_tokens({10, 11}, {0, 1}, {4, -1}), buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 1);
  EXPECT_EQ(buffer[4], (Record{10, 0, kAnchor, 0}));
  EXPECT_EQ(ring.count, 0);
}

// A skipped token takes no chain step: the next stored token chains from the last stored one.
TEST(ReferenceWrite, NegativeSlotTakesNoChainStep) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  write_call(write_plan({0, 3}, {-1}, 1), step_tokens({10, 11, 12}, {0, 1, 2}, {4, -1, 5}), buffer, ring);
  EXPECT_EQ(buffer[5].prev_hash, hash_of(kAnchor, 10, 0));
  EXPECT_EQ(ring.slot_run_counter, 2);
}

TEST(ReferenceWrite, OffsetsZeroTwoFiveStoreFiveTokens) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  write_call(write_plan({0, 2, 5}, {-1, -1}, 2), step_tokens({1, 2, 3, 4, 5}, {0, 1, 0, 1, 2}, {1, 2, 3, 4, 5}), buffer,
             ring);
  EXPECT_EQ(ring.slot_run_counter, 5);
  EXPECT_EQ(ring.kernel_run_counter, 1);
  // Each request starts its own chain from its seed.
  EXPECT_EQ(buffer[3].prev_hash, kAnchor);
  EXPECT_EQ(buffer[2].prev_hash, hash_of(kAnchor, 1, 0));
}

TEST(ReferenceWrite, ZeroValidRequestsOnlyCountTheCall) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  const Outputs plan = write_plan({0, 2, 5}, {-1, 9}, 0);  // seed 9 is out of range: would be a row
  const auto tokens = step_tokens({1, 2, 3, 4, 5}, {0, 1, 0, 1, 2}, {1, 2, 3, 4, 5});
  for (int call = 0; call < 3; ++call) write_call(plan, tokens, buffer, ring);
  EXPECT_EQ(ring.kernel_run_counter, 3);
  EXPECT_EQ(ring.slot_run_counter, 0);
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(buffer, canary::CanaryBuffer(8));
}

TEST(ReferenceWrite, ValidRequestsAreClampedToCapacity) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  write_call(write_plan({0, 1, 2}, {-1, -1}, 1000), step_tokens({1, 2}, {0, 0}, {1, 2}), buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 2);
  write_call(write_plan({0, 1, 2}, {-1, -1}, -5), step_tokens({1, 2}, {0, 0}, {3, 4}), buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 2);
  EXPECT_EQ(buffer[3], Record{});
  EXPECT_EQ(ring.kernel_run_counter, 2);
}

TEST(ReferenceWrite, EmptyRangeReadsNothingNotEvenTheSeed) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  // Request 0: [2, 2) empty with an out-of-range seed; request 1: [2, 1) reversed with one too.
  write_call(write_plan({2, 2, 1}, {100, 200}, 2), step_tokens({1, 2}, {0, 0}, {1, 2}), buffer, ring);
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(ring.slot_run_counter, 0);
  EXPECT_EQ(ring.kernel_run_counter, 1);
}

// ---- input assert ----

// §8: token 42 vs 99 → bits 8, stored 42; position 7 vs 0 → bits 16, stored 7; both in one row → 24. The
// token is stored anyway: the chain follows actual values.
TEST(ReferenceWrite, InputAssertMismatchesAreOneRowWithBitsEightAndSixteen) {
  struct Case {
    std::int64_t token, position, expected_token, expected_position, bits;
  };
  for (const Case c : {Case{42, 0, 99, 0, 8}, Case{42, 7, 42, 0, 16}, Case{42, 7, 99, 0, 24}}) {
    SCOPED_TRACE("bits " + std::to_string(c.bits));
    canary::CanaryBuffer buffer(8);
    auto ring = ring_of(4);
    auto tokens = step_tokens({c.token}, {c.position}, {3});
    tokens.expected_input_ids = Int64s{c.expected_token};
    tokens.expected_positions = Int64s{c.expected_position};
    write_call(write_plan({0, 1}, {-1}, 1), tokens, buffer, ring);
    EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 3, c.position, c.token, c.expected_token, kAnchor,
                                              c.expected_position, c.bits)));
    EXPECT_EQ(buffer[3], (Record{c.token, c.position, kAnchor, 0}));
  }
}

TEST(ReferenceWrite, AllTokensWrongGiveThreeRowsAndACleanVerify) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(8);
  auto tokens = step_tokens({11, 12, 13}, {0, 1, 2}, {1, 2, 3});
  tokens.expected_input_ids = Int64s{21, 22, 23};
  tokens.expected_positions = Int64s{0, 1, 2};
  write_call(write_plan({0, 3}, {-1}, 1), tokens, buffer, ring);
  const std::int64_t h1 = hash_of(kAnchor, 11, 0), h2 = hash_of(h1, 12, 1);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 1, 0, 11, 21, kAnchor, 0, 8), row_of(kKind, 2, 1, 12, 22, h1, 1, 8),
                                     row_of(kKind, 3, 2, 13, 23, h2, 2, 8)));
  verify_call(verify_plan({1, 2, 3}, {0, 1, 2}, {-1, 1, 2}, {11, 12, 13}), buffer, ring);
  EXPECT_EQ(ring.count, 3);
}

// ---- chain-position assert ----

TEST(ReferenceWrite, ChainPositionAssertFiresOnAGapAndFollowsActualPositions) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, 4, kAnchor, 0};
  auto ring = ring_of(8);
  // After position 4: 5 fine, 9 a gap (expected 6), 10 follows 9 (prev_pos = pos after the row).
  write_call(write_plan({0, 3}, {7}, 1), step_tokens({1, 2, 3}, {5, 9, 10}, {1, 2, 3}), buffer, ring);
  const std::int64_t h0 = hash_of(kAnchor, 100, 4), h1 = hash_of(h0, 1, 5);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 2, 9, 2, 2, h1, 6, 16)));
  EXPECT_EQ(buffer[2], (Record{2, 9, h1, 0}));  // stored anyway
}

TEST(ReferenceWrite, ChainPositionAssertIsOffWithFlagZeroOrNegativeSeed) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, 4, kAnchor, 0};
  auto ring = ring_of(8);
  auto tokens = step_tokens({1}, {50}, {1});
  tokens.chain_position_assert = 0;
  write_call(write_plan({0, 1}, {7}, 1), tokens, buffer, ring);
  tokens.chain_position_assert = 1;
  write_call(write_plan({0, 1}, {-1}, 1), tokens, buffer, ring);
  write_call(write_plan({0, 1}, {-9}, 1), tokens, buffer, ring);
  EXPECT_EQ(ring.count, 0);
  tokens.chain_position_assert = -3;  // any value != 0 turns it on
  write_call(write_plan({0, 1}, {7}, 1), tokens, buffer, ring);
  EXPECT_EQ(ring.count, 1);
}

TEST(ReferenceWrite, InputAssertRowComesBeforeChainPositionRow) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, 4, kAnchor, 0};
  auto ring = ring_of(8);
  auto tokens = step_tokens({1}, {8}, {2});
  tokens.expected_input_ids = Int64s{1};
  tokens.expected_positions = Int64s{6};
  write_call(write_plan({0, 1}, {7}, 1), tokens, buffer, ring);
  const std::int64_t h0 = hash_of(kAnchor, 100, 4);
  // The input assert's aux is expected_positions[i] (6), the chain assert's prev_pos + 1 (5).
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 2, 8, 1, 1, h0, 6, 16), row_of(kKind, 2, 8, 1, 1, h0, 5, 16)));
}

TEST(ReferenceWrite, PrevPosPlusOneWrapsModTwoToTheSixtyFour) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, kInt64Max, kAnchor, 0};
  auto ring = ring_of(8);
  write_call(write_plan({0, 1}, {7}, 1), step_tokens({1}, {kInt64Min}, {2}), buffer, ring);
  EXPECT_EQ(ring.count, 0);
  write_call(write_plan({0, 1}, {7}, 1), step_tokens({1}, {0}, {2}), buffer, ring);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowExpectedAux], kInt64Min);
}

// ---- write OUT_OF_RANGE ----

TEST(ReferenceWrite, SlotBeyondBufferIsARowAndOtherwiseSkipped) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{100, 4, kAnchor, 0};
  auto ring = ring_of(8);
  // Token 1 targets slot 8 (== num_slots) with a wrong expected token and a position gap: only the
  // OUT_OF_RANGE row; token 2 (position 5) then follows position 4 and chains from the seed.
  auto tokens = step_tokens({1, 2}, {70, 5}, {8, 3});
  tokens.expected_input_ids = Int64s{99, 2};
  tokens.expected_positions = Int64s{99, 5};
  write_call(write_plan({0, 2}, {7}, 1), tokens, buffer, ring);
  const std::int64_t h0 = hash_of(kAnchor, 100, 4);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 8, 70, 1, -1, h0, -1, 64)));
  EXPECT_EQ(buffer[3], (Record{2, 5, h0, 0}));
  EXPECT_EQ(ring.slot_run_counter, 1);
}

TEST(ReferenceWrite, SeedBeyondBufferIsOneRowAndChainsFromAnchor) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(8);
  write_call(write_plan({0, 2}, {8}, 1), step_tokens({1, 2}, {50, 51}, {1, 2}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 8, -1, -1, -1, kAnchor, -1, 64)));  // no position row
  EXPECT_EQ(buffer[1], (Record{1, 50, kAnchor, 0}));
  EXPECT_EQ(buffer[2].prev_hash, hash_of(kAnchor, 1, 50));
  EXPECT_EQ(ring.slot_run_counter, 2);
}

TEST(ReferenceWrite, TokenIndexBeyondTokensStopsTheRequest) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(8);
  // Request 0 reads tokens 0..1; request 1 reads 2 then index 3 (num_tokens 3): a row, and 4 is never read;
  // requests 2 and 3 start beyond the tokens: one row each, from their own seed's anchor.
  write_call(write_plan({0, 2, 5, 7, 8}, {-1, -1, -1, -1}, 4), step_tokens({1, 2, 3}, {0, 1, 0}, {1, 2, 3}), buffer,
             ring);
  const std::int64_t h3 = hash_of(kAnchor, 3, 0);
  EXPECT_THAT(ring.rows,
              ElementsAre(row_of(kKind, 3, -1, -1, -1, h3, -1, 64), row_of(kKind, 5, -1, -1, -1, kAnchor, -1, 64),
                          row_of(kKind, 7, -1, -1, -1, kAnchor, -1, 64)));
  EXPECT_EQ(ring.slot_run_counter, 3);
}

TEST(ReferenceWrite, NegativeTokenIndexIsARow) {
  canary::CanaryBuffer buffer(8);
  buffer[6] = Record{5, 9, kAnchor, 0};
  auto ring = ring_of(8);
  write_call(write_plan({kInt64Min, 1}, {6}, 1), step_tokens({1}, {10}, {1}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, kInt64Min, -1, -1, -1, hash_of(kAnchor, 5, 9), -1, 64)));
  EXPECT_EQ(buffer[1], Record{});
}

TEST(ReferenceWrite, ExtremeValuesHashWithoutOverflow) {
  canary::CanaryBuffer buffer(8);
  buffer[7] = Record{kInt64Min, kInt64Max, kInt64Min, 0};
  auto ring = ring_of(8);
  ring.slot_run_counter = kInt64Max;
  ring.kernel_run_counter = kInt64Max;
  write_call(write_plan({0, 1}, {7}, 1), step_tokens({kInt64Max}, {kInt64Min}, {2}), buffer, ring);
  EXPECT_EQ(buffer[2].prev_hash, hash_of(kInt64Min, kInt64Min, kInt64Max));
  EXPECT_EQ(ring.count, 0);  // kInt64Max + 1 wraps to kInt64Min: the assert sees no gap
  EXPECT_EQ(ring.slot_run_counter, kInt64Min);
  EXPECT_EQ(ring.kernel_run_counter, kInt64Min);
}

// ---- real-KV in write and verify ----

// Four pages of 2 tokens (8 slots), 32 bytes per token, 16 read; byte b of the source = b.
inline canary::RealKv counting_real_kv(RealKvMode mode) {
  canary::RealKvSource source;
  source.pages = 4;
  source.row_bytes = 64;
  source.page_size = 2;
  source.bytes_per_token = 32;
  source.read_bytes = 16;
  source.bytes.resize(256);
  for (std::size_t b = 0; b < source.bytes.size(); ++b) source.bytes[b] = static_cast<std::uint8_t>(b);
  return canary::RealKv{mode, {source}};
}

TEST(ReferenceWrite, StoresTheFoldOfTheSlot) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  const auto real_kv = counting_real_kv(RealKvMode::All);
  write_call(write_plan({0, 1}, {-1}, 1), step_tokens({1}, {0}, {5}), buffer, ring, real_kv);
  EXPECT_EQ(buffer[5].real_kv_hash, canary::fold(real_kv, 5));
  EXPECT_NE(buffer[5].real_kv_hash, 0);
}

TEST(ReferenceVerify, FlippedRealKvByteIsBitFourOnly) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  auto real_kv = counting_real_kv(RealKvMode::Partial);
  write_call(write_plan({0, 2}, {-1}, 1), step_tokens({1, 2}, {0, 1}, {4, 5}), buffer, ring, real_kv);
  const Outputs plan = verify_plan({4, 5}, {0, 1}, {-1, 4}, {1, 2});
  verify_call(plan, buffer, ring, true, real_kv);
  EXPECT_EQ(ring.count, 0);
  // Slot 5: row 2, column 32: byte 2 * 64 + 32 + 3.
  real_kv.sources[0].bytes[2 * 64 + 32 + 3] ^= 0x01;
  verify_call(plan, buffer, ring, true, real_kv);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 5, 1, 2, 2, buffer[5].prev_hash, buffer[5].prev_hash, 4)));
}

TEST(ReferenceVerify, PartialModeIgnoresBytesPastSixteenAndAllModeReadsThem) {
  for (const RealKvMode mode : {RealKvMode::Partial, RealKvMode::All}) {
    canary::CanaryBuffer buffer(8);
    auto ring = ring_of(4);
    auto real_kv = counting_real_kv(mode);
    real_kv.sources[0].read_bytes = 32;
    write_call(write_plan({0, 1}, {-1}, 1), step_tokens({1}, {0}, {5}), buffer, ring, real_kv);
    real_kv.sources[0].bytes[2 * 64 + 32 + 20] ^= 0xFF;  // byte 20 of slot 5's token
    verify_call(verify_plan({5}, {0}, {-1}, {1}), buffer, ring, true, real_kv);
    EXPECT_EQ(ring.count, mode == RealKvMode::All ? 1 : 0) << "mode " << static_cast<int>(mode);
  }
}

// ---- SPEC-CANARY §5 verify ----

TEST(ReferenceVerify, PositionMismatchFactRow) {
  canary::CanaryBuffer buffer(8);
  buffer[5] = Record{33, 0, kAnchor, 0};
  for (const bool check_expected_token : {true, false}) {
    auto ring = ring_of(4);
    // With the check on, the plan's expected token is -1 (none); with it off, the plan's 77 is ignored.
    verify_call(verify_plan({5}, {99}, {-1}, {check_expected_token ? -1 : 77}), buffer, ring, check_expected_token);
    EXPECT_THAT(ring.rows, ElementsAre(RingRow{9, 5, 0, 33, -1, -2414019407054260458LL, -2414019407054260458LL, 2}));
    EXPECT_EQ(ring.count, 1);
  }
}

TEST(ReferenceVerify, FillOnceRingKeepsFirstCapacityRowsAndCountsAll) {
  canary::CanaryBuffer buffer(16);
  const Int64s slots = range(1, 11);
  const Int64s positions(10, 5);  // every stored position is 0: 10 violations
  const Int64s prevs(10, 0);
  const Int64s tokens(10, -1);
  auto ring = ring_of(4);
  verify_call(verify_plan(slots, positions, prevs, tokens), buffer, ring);
  EXPECT_EQ(ring.count, 10);
  ASSERT_EQ(ring.rows.size(), 4u);
  for (std::int64_t r = 0; r < 4; ++r) EXPECT_EQ(ring.rows[static_cast<std::size_t>(r)][1], r + 1);
  auto empty = ring_of(0);
  verify_call(verify_plan(slots, positions, prevs, tokens), buffer, empty);
  EXPECT_EQ(empty.count, 10);
  EXPECT_TRUE(empty.rows.empty());
  // A second call appends nothing to a full ring but keeps counting.
  verify_call(verify_plan(slots, positions, prevs, tokens), buffer, ring);
  EXPECT_EQ(ring.count, 20);
  EXPECT_EQ(ring.rows.size(), 4u);
}

TEST(ReferenceVerify, CountWrapsWithoutKeepingARow) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(2);
  ring.rows.assign(2, RingRow{});
  ring.count = kInt64Max;
  verify_call(verify_plan({1, 2}, {5, 5}, {0, 0}, {-1, -1}), buffer, ring);
  EXPECT_EQ(ring.count, kInt64Min + 1);
  EXPECT_EQ(ring.rows.size(), 2u);
}

TEST(ReferenceVerify, EnableZeroOnlyCountsTheCall) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(4);
  Outputs plan = verify_plan({1, 9, -3}, {5, 5, 5}, {0, 0, 0}, {7, 7, 7});  // would be 3 rows
  plan.enable = 0;
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.kernel_run_counter, 1);
  EXPECT_EQ(ring.slot_run_counter, 0);
  EXPECT_EQ(ring.count, 0);
  plan.enable = 1;
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.count, 3);
}

TEST(ReferenceVerify, ActiveEntriesAreClampedAndCounted) {
  canary::CanaryBuffer buffer(8);
  Outputs plan = verify_plan({1, 2, 3}, {5, 5, 5}, {0, 0, 0}, {-1, -1, -1});
  plan.verify_num_valid = 2;
  auto ring = ring_of(8);
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 2);
  EXPECT_EQ(ring.count, 2);
  plan.verify_num_valid = std::numeric_limits<std::int32_t>::max();
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 5);
  EXPECT_EQ(ring.count, 5);
  plan.verify_num_valid = -4;
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 5);
  EXPECT_EQ(ring.count, 5);
  EXPECT_EQ(ring.kernel_run_counter, 3);
}

TEST(ReferenceVerify, FortyThousandEntriesCountAndReplaysCountEachTime) {
  canary::CanaryBuffer buffer(8);
  const Outputs plan = verify_plan(Int64s(40000, 0), Int64s(40000, 0), Int64s(40000, 0), Int64s(40000, -1));
  auto ring = ring_of(4);
  verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 40000);
  for (int replay = 0; replay < 3; ++replay) verify_call(plan, buffer, ring);
  EXPECT_EQ(ring.slot_run_counter, 4 * 40000);
  EXPECT_EQ(ring.kernel_run_counter, 4);
  EXPECT_EQ(ring.count, 0);  // slot 0 is never checked
}

TEST(ReferenceVerify, SlotZeroIsSkippedWhateverPrevHolds) {
  canary::CanaryBuffer buffer(8);
  buffer[0] = Record{1, 2, 3, 4};
  auto ring = ring_of(4);
  verify_call(verify_plan({0, 0, 0}, {9, 9, 9}, {100, -5, 3}, {8, 8, 8}), buffer, ring);
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(ring.slot_run_counter, 3);
}

TEST(ReferenceVerify, PrevZeroSkipsChainCheckButPositionStillFires) {
  canary::CanaryBuffer buffer(8);
  buffer[3] = Record{7, 2, 0x1234, 0};  // a prev_hash no chain produced
  auto ring = ring_of(4);
  verify_call(verify_plan({3}, {2}, {0}, {7}), buffer, ring);
  EXPECT_EQ(ring.count, 0);
  verify_call(verify_plan({3}, {6}, {0}, {7}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 3, 2, 7, 7, 0x1234, 0x1234, 2)));
  // The same record with a real predecessor (-1: the anchor) fails the chain check as well.
  verify_call(verify_plan({3}, {2}, {-1}, {7}), buffer, ring);
  EXPECT_EQ(ring.rows.back(), row_of(kKind, 3, 2, 7, 7, 0x1234, kAnchor, 1));
}

TEST(ReferenceVerify, StoredTokenAgainstExpectedIsBitThirtyTwoOnly) {
  canary::CanaryBuffer buffer(8);
  buffer[3] = Record{42, 0, kAnchor, 0};
  auto ring = ring_of(4);
  verify_call(verify_plan({3}, {0}, {-1}, {99}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 3, 0, 42, 99, kAnchor, kAnchor, 32)));
  verify_call(verify_plan({3}, {0}, {-1}, {99}), buffer, ring, false);  // check off: clean
  EXPECT_EQ(ring.count, 1);
}

TEST(ReferenceVerify, SlotOutOfRangeIsARowAndNothingRead) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(8);
  verify_call(verify_plan({-2, 8, kInt64Max}, {3, 4, 5}, {1, 1, 1}, {11, 12, 13}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, -2, 3, -1, 11, -1, -1, 64), row_of(kKind, 8, 4, -1, 12, -1, -1, 64),
                                     row_of(kKind, kInt64Max, 5, -1, 13, -1, -1, 64)));
}

TEST(ReferenceVerify, PrevOutOfRangeIsARowNamingPrev) {
  canary::CanaryBuffer buffer(8);
  auto ring = ring_of(8);
  // Entry 0: prev 8 out of range; entry 1: both out of range (the row names the slot); entry 2: slot 0 with
  // an out-of-range prev is still skipped. Check off: exp_tok is -1 in the row.
  verify_call(verify_plan({3, 9, 0}, {4, 5, 6}, {8, 10, 8}, {11, 12, 13}), buffer, ring, false);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 8, 4, -1, -1, -1, -1, 64), row_of(kKind, 9, 5, -1, -1, -1, -1, 64)));
}

TEST(ReferenceVerify, NeverWrittenRecordAfterAWrittenOneIsChainAndPositionAndToken) {
  // SPEC-CANARY §10: a zero record whose predecessor is written fails the chain (bit 1), and the position
  // and token when they differ from 0.
  canary::CanaryBuffer buffer(8);
  buffer[1] = Record{5, 0, kAnchor, 0};
  auto ring = ring_of(4);
  verify_call(verify_plan({2}, {1}, {1}, {6}), buffer, ring);
  EXPECT_THAT(ring.rows, ElementsAre(row_of(kKind, 2, 0, 0, 6, 0, hash_of(kAnchor, 5, 0), 1 | 2 | 32)));
}

// ---- a multi-step scenario ----

TEST(ReferenceScenario, WriteVerifyCorruptAndDecode) {
  canary::CanaryBuffer buffer(16);
  auto ring = ring_of(16);
  // Step 1 (prefill): one request of 5 tokens into slots 1..5.
  write_call(write_plan({0, 5}, {-1}, 1), step_tokens({101, 202, 303, 404, 505}, range(0, 5), range(1, 6)), buffer,
             ring);
  const Outputs prefix = verify_plan(range(1, 6), range(0, 5), {-1, 1, 2, 3, 4}, {101, 202, 303, 404, 505});
  verify_call(prefix, buffer, ring);
  EXPECT_EQ(ring.count, 0);
  // The stored chain is the §2 example's.
  EXPECT_EQ(kvcanary::Impl::as_uint64(buffer[5].prev_hash), 0xC749AFFE5A5A9634ull);

  // Step 2 (decode): token 606 at position 5 into slot 6, seeded by slot 5; the whole prefix verifies clean.
  write_call(write_plan({0, 1}, {5}, 1), step_tokens({606}, {5}, {6}), buffer, ring);
  const Outputs longer = verify_plan(range(1, 7), range(0, 6), {-1, 1, 2, 3, 4, 5}, {101, 202, 303, 404, 505, 606});
  verify_call(longer, buffer, ring);
  EXPECT_EQ(ring.count, 0);

  // Corrupt slot 2's token: with the expected-token check it gets bit 32, its successor bit 1 only.
  const Record saved = buffer[2];
  buffer[2].token = 999;
  verify_call(longer, buffer, ring);
  EXPECT_THAT(ring.rows,
              ElementsAre(row_of(kKind, 2, 1, 999, 202, saved.prev_hash, saved.prev_hash, 32),
                          row_of(kKind, 3, 2, 303, 303, buffer[3].prev_hash, hash_of(saved.prev_hash, 999, 1), 1)));
  // Without the check only the successor sees it.
  ring = ring_of(16);
  verify_call(longer, buffer, ring, false);
  EXPECT_THAT(ring.rows,
              ElementsAre(row_of(kKind, 3, 2, 303, -1, buffer[3].prev_hash, hash_of(saved.prev_hash, 999, 1), 1)));

  // Restored, and then a position corruption of slot 4: bit 2 on it, bit 1 on slot 5.
  buffer[2] = saved;
  buffer[4].position = 30;
  ring = ring_of(16);
  verify_call(longer, buffer, ring);
  ASSERT_EQ(ring.rows.size(), 2u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowSlot], 4);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], 2);
  EXPECT_EQ(ring.rows[1][kvcanary::kRowSlot], 5);
  EXPECT_EQ(ring.rows[1][kvcanary::kRowFailReasonBits], 1);
  EXPECT_EQ(ring.slot_run_counter, 6);
}

// ---- host-side errors: std::invalid_argument naming the argument; buffer and ring untouched ----

class ReferenceCanaryHostErrors : public ::testing::Test {
 protected:
  canary::CanaryBuffer buffer = canary::CanaryBuffer(8, Record{1, 2, 3, 4});
  canary::ViolationRing ring = [] {
    auto r = ring_of(4);
    r.rows.push_back(RingRow{1, 2, 3, 4, 5, 6, 7, 8});
    r.count = 1;
    r.slot_run_counter = 10;
    r.kernel_run_counter = 20;
    return r;
  }();
  Outputs write_plan_ = write_plan({0, 2}, {-1}, 1);
  canary::StepTokens tokens_ = step_tokens({1, 2}, {0, 1}, {1, 2});
  Outputs verify_plan_ = verify_plan({1, 2}, {0, 1}, {-1, 1}, {1, 2});
  canary::RealKv real_kv_ = counting_real_kv(RealKvMode::All);

  template <class Matcher>
  void expect_write_rejected(const Matcher& matcher, KernelKind kind = kKind) {
    const canary::CanaryBuffer buffer_before = buffer;
    const canary::ViolationRing ring_before = ring;
    const auto message =
        invalid_argument_message([&] { canary::write(write_plan_, tokens_, kind, real_kv_, buffer, ring); });
    ASSERT_TRUE(message.has_value()) << "reference::write accepted the call";
    EXPECT_THAT(*message, ::testing::AllOf(HasSubstr("kvcanary::write: "), matcher));
    EXPECT_EQ(buffer, buffer_before) << "buffer changed by a rejected write";
    expect_ring_unchanged(ring_before);
  }

  template <class Matcher>
  void expect_verify_rejected(const Matcher& matcher, KernelKind kind = kKind) {
    const canary::ViolationRing ring_before = ring;
    const auto message =
        invalid_argument_message([&] { canary::verify(verify_plan_, buffer, kind, real_kv_, true, ring); });
    ASSERT_TRUE(message.has_value()) << "reference::verify accepted the call";
    EXPECT_THAT(*message, ::testing::AllOf(HasSubstr("kvcanary::verify: "), matcher));
    expect_ring_unchanged(ring_before);
  }

  template <class Matcher>
  void expect_both_rejected(const Matcher& matcher) {
    expect_write_rejected(matcher);
    expect_verify_rejected(matcher);
  }

  void expect_ring_unchanged(const canary::ViolationRing& before) const {
    EXPECT_EQ(ring.capacity, before.capacity);
    EXPECT_EQ(ring.rows, before.rows);
    EXPECT_EQ(ring.count, before.count);
    EXPECT_EQ(ring.slot_run_counter, before.slot_run_counter);
    EXPECT_EQ(ring.kernel_run_counter, before.kernel_run_counter);
  }
};

TEST_F(ReferenceCanaryHostErrors, ValidCallsAreAccepted) {
  EXPECT_EQ(invalid_argument_message([&] { canary::write(write_plan_, tokens_, kKind, real_kv_, buffer, ring); }),
            std::nullopt);
  EXPECT_EQ(invalid_argument_message([&] { canary::verify(verify_plan_, buffer, kKind, real_kv_, true, ring); }),
            std::nullopt);
  EXPECT_EQ(ring.kernel_run_counter, 22);
}

TEST_F(ReferenceCanaryHostErrors, TokenArraysOfDifferentLengths) {
  tokens_.positions = {0};
  expect_write_rejected(HasSubstr("positions has 1 entries but input_ids has 2"));
  tokens_.positions = {0, 1};
  tokens_.out_cache_loc = {1, 2, 3};
  expect_write_rejected(HasSubstr("out_cache_loc has 3 entries but input_ids has 2"));
}

TEST_F(ReferenceCanaryHostErrors, OnlyOneExpectedArray) {
  tokens_.expected_input_ids = Int64s{1, 2};
  expect_write_rejected(HasSubstr("expected_input_ids is given without expected_positions"));
  tokens_.expected_input_ids.reset();
  tokens_.expected_positions = Int64s{0, 1};
  expect_write_rejected(HasSubstr("expected_positions is given without expected_input_ids"));
}

TEST_F(ReferenceCanaryHostErrors, ExpectedArraysOfAnotherLength) {
  tokens_.expected_input_ids = Int64s{1};
  tokens_.expected_positions = Int64s{0, 1};
  expect_write_rejected(HasSubstr("expected_input_ids has 1 entries but input_ids has 2"));
  tokens_.expected_input_ids = Int64s{1, 2};
  tokens_.expected_positions = Int64s{0, 1, 2};
  expect_write_rejected(HasSubstr("expected_positions has 3 entries but input_ids has 2"));
}

TEST_F(ReferenceCanaryHostErrors, WriteOffsetsNotOneMoreThanSeeds) {
  write_plan_.write_offsets = {0, 2, 2};
  expect_write_rejected(HasSubstr("write_offsets has 3 entries but write_seed_slot_indices has 1"));
  write_plan_.write_offsets = {0, 1};
  write_plan_.write_seed_slot_indices = {};
  expect_write_rejected(HasSubstr("write_offsets has 2 entries but write_seed_slot_indices has 0"));
  write_plan_.write_offsets = {};  // even with no request, the shape must hold
  expect_write_rejected(HasSubstr("write_offsets has 0 entries"));
}

TEST_F(ReferenceCanaryHostErrors, VerifyArraysOfDifferentExtents) {
  verify_plan_.verify_expected_tokens = {1};
  expect_verify_rejected(HasSubstr("verify_expected_tokens has 1 entries but verify_slot_indices has 2"));
  verify_plan_.verify_expected_tokens = {1, 2};
  verify_plan_.verify_expected_positions = {0, 1, 2};
  expect_verify_rejected(HasSubstr("verify_expected_positions has 3 entries but verify_slot_indices has 2"));
  verify_plan_.verify_expected_positions = {0, 1};
  verify_plan_.verify_prev_slot_indices = {};
  expect_verify_rejected(HasSubstr("verify_prev_slot_indices has 0 entries but verify_slot_indices has 2"));
}

TEST_F(ReferenceCanaryHostErrors, UnknownKernelKindAndRealKvMode) {
  expect_write_rejected(HasSubstr("kernel_kind is 12"), static_cast<KernelKind>(12));
  expect_verify_rejected(HasSubstr("kernel_kind is -1"), static_cast<KernelKind>(-1));
  real_kv_.mode = static_cast<RealKvMode>(3);
  expect_both_rejected(HasSubstr("real_kv.mode is 3"));
}

TEST_F(ReferenceCanaryHostErrors, RingCapacityBelowZeroAndInconsistentRing) {
  ring.capacity = -1;
  expect_both_rejected(HasSubstr("ring capacity is -1"));
  ring.capacity = 4;
  ring.count = 3;  // but one row held
  expect_both_rejected(HasSubstr("ring holds 1 rows but its count 3 and capacity 4 say 3"));
}

TEST_F(ReferenceCanaryHostErrors, MoreThanFourSources) {
  real_kv_.sources.assign(5, real_kv_.sources[0]);
  expect_both_rejected(HasSubstr("real_kv has 5 sources, at most 4 are allowed"));
  real_kv_.sources.resize(4);
  EXPECT_EQ(invalid_argument_message([&] { canary::verify(verify_plan_, buffer, kKind, real_kv_, true, ring); }),
            std::nullopt);
}

// Each §3 rule broken on a copy of a valid source; `second` puts the broken source after a valid one.
struct BrokenSource {
  const char* rule;
  void (*mutate)(canary::RealKvSource&);
  const char* message;
};

inline std::vector<BrokenSource> broken_sources() {
  using S = canary::RealKvSource;
  return {
      {"page_size 0", [](S& s) { s.page_size = 0; }, "page_size is 0, must be >= 1"},
      {"page_size -3", [](S& s) { s.page_size = -3; }, "page_size is -3, must be >= 1"},
      {"bytes_per_token 24", [](S& s) { s.bytes_per_token = 24; },
       "bytes_per_token is 24, must be a positive multiple of 16"},
      {"bytes_per_token 0", [](S& s) { s.bytes_per_token = 0; },
       "bytes_per_token is 0, must be a positive multiple of 16"},
      {"bytes_per_token -16", [](S& s) { s.bytes_per_token = -16; }, "bytes_per_token is -16"},
      {"read_bytes 0", [](S& s) { s.read_bytes = 0; }, "read_bytes is 0, must be a positive multiple of 16"},
      {"read_bytes 8", [](S& s) { s.read_bytes = 8; }, "read_bytes is 8, must be a positive multiple of 16"},
      {"read_bytes 48 > bytes_per_token", [](S& s) { s.read_bytes = 48; },
       "read_bytes is 48, must be a positive multiple of 16 and <= bytes_per_token (32)"},
      {"row stride 72",
       [](S& s) {
         s.row_bytes = 72;
         s.bytes.assign(4 * 72, 0);
       },
       "bytes has a row stride of 72 bytes, must be a multiple of 16"},
      {"3 pages for 8 slots",
       [](S& s) {
         s.pages = 3;
         s.bytes.resize(3 * 64);
       },
       "bytes has 3 rows, fewer than the 4 that 8 slots need at page_size 2"},
      {"page_size * bytes_per_token > row_bytes", [](S& s) { s.page_size = 3; },
       "page_size * bytes_per_token is 3 x 32, more than the 64 bytes of a row"},
      {"page_size at int64 max", [](S& s) { s.page_size = kInt64Max; }, "page_size * bytes_per_token is"},
      {"bytes_per_token near int64 max", [](S& s) { s.bytes_per_token = kInt64Max - 15; },
       "page_size * bytes_per_token is 2 x 9223372036854775792"},
      {"negative pages", [](S& s) { s.pages = -1; }, "bytes is -1 x 64, extents must be >= 0"},
      {"bytes of another size", [](S& s) { s.bytes.resize(255); }, "bytes holds 255 bytes, not 4 x 64"},
      {"no bytes for int64-max rows",
       [](S& s) {
         s.pages = kInt64Max;
         s.row_bytes = 64;
       },
       "bytes holds 256 bytes, not 9223372036854775807 x 64"},
  };
}

TEST_F(ReferenceCanaryHostErrors, RealKvSourceRulesWhateverTheMode) {
  const canary::RealKvSource valid = real_kv_.sources[0];
  for (const BrokenSource& broken : broken_sources()) {
    for (const RealKvMode mode : {RealKvMode::None, RealKvMode::Partial, RealKvMode::All}) {
      for (const bool second : {false, true}) {
        SCOPED_TRACE(std::string(broken.rule) + ", mode " + std::to_string(static_cast<int>(mode)) +
                     (second ? ", second source" : ", first source"));
        canary::RealKvSource source = valid;
        broken.mutate(source);
        real_kv_.mode = mode;
        real_kv_.sources =
            second ? std::vector<canary::RealKvSource>{valid, source} : std::vector<canary::RealKvSource>{source};
        const std::string prefix = second ? "real_kv.sources[1]." : "real_kv.sources[0].";
        expect_both_rejected(HasSubstr(prefix + broken.message));
      }
    }
  }
}

TEST_F(ReferenceCanaryHostErrors, RealKvSourceMustHoldEverySlot) {
  buffer.resize(9);  // slot 8 is on page 4 of a 4-page source
  expect_both_rejected(HasSubstr("real_kv.sources[0].bytes has 4 rows, fewer than the 5 that 9 slots need"));
  buffer.resize(8);
  real_kv_.sources.clear();  // no source: nothing to check, fold is 0
  EXPECT_EQ(invalid_argument_message([&] { canary::write(write_plan_, tokens_, kKind, real_kv_, buffer, ring); }),
            std::nullopt);
  EXPECT_EQ(buffer[1].real_kv_hash, 0);
}

}  // namespace kvcanary_test
