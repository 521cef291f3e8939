// The facts of SPEC-CANARY §11 (canary v2, part 1) on this backend, each also checked against the host
// reference by CanaryRunner: the free stage and the FREED record (§11.2), the slot-zero check (§11.3),
// the cross-check of the backend's metadata (§11.4), the padding-slot check (§11.5), and what the report
// makes of the new rows (§11.1, §11.6).

#include "test_canary_support.hpp"

#include <kvcanary/stages/poisoned_prefixes.hpp>
#include <kvcanary/stages/report.hpp>

namespace kvcanary_test {

using kvcanary::MetadataForm;
using Metadata = kvcanary::reference::BackendMetadata;
constexpr std::int64_t kFreed = kvcanary::kFreedToken;

class CanaryV2 : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  CanaryRunner<ExecSpace> runner;  // checks v1 until a test turns them on
  CanaryRunner<ExecSpace> v2 = [] {
    CanaryRunner<ExecSpace> r;
    r.checks = kvcanary::VerifyChecks{};
    return r;
  }();

  static Outputs verify_plan(const std::vector<std::array<std::int64_t, 4>>& entries) {  // (slot, pos, prev, token)
    return verify_plan_of(entries);
  }

  // Tokens 101, 202, 303 at positions 0-2 in slots 1-3, chained from seed -1, written over `buffer`.
  StageRun write_three(const Buffer& buffer) const {
    return runner.write(three_token_write_plan(), three_tokens_in_slots_1_to_3(), KernelKind::HEAD_K_FULL, RealKv{},
                        buffer, empty_ring(4));
  }
  Buffer three_tokens() const { return write_three(Buffer(8)).buffer; }
  static Outputs three_entries() { return verify_plan({{1, 0, -1, 101}, {2, 1, 1, 202}, {3, 2, 2, 303}}); }
};

// ---- §11.2 the free stage ----

TEST_F(CanaryV2, FreeStampsTheFreedRecordKeepingPositionAndChain) {
  Buffer buffer(4);
  buffer[3] = {42, 7, 0x1234, 99};
  const StageRun run = runner.free({3, -1}, 5, buffer, empty_ring(4));
  EXPECT_EQ(run.buffer[3], (Record{kFreed, 7, 0x1234, 5}));
  EXPECT_EQ(run.buffer[1], Record{});
  EXPECT_EQ(run.ring.count, 0);
  EXPECT_EQ(run.ring.slot_run_counter, 1);
  EXPECT_EQ(run.ring.kernel_run_counter, 1);
  EXPECT_EQ(kFreed, -302027982148LL);  // "FREED" in ASCII, negated
}

TEST_F(CanaryV2, FreeOfASlotPastTheBufferIsAnOutOfRangeRow) {
  Buffer buffer(4);
  buffer[2] = {1, 2, 3, 4};
  const StageRun run = runner.free({9, 2, std::numeric_limits<std::int64_t>::max()}, 5, buffer, empty_ring(4));
  ASSERT_EQ(run.ring.rows.size(), 2u);
  EXPECT_EQ(sorted(run.ring.rows)[0], (RingRow{0, 9, -1, -1, -1, -1, 5, 64}));
  EXPECT_EQ(run.buffer[2], (Record{kFreed, 2, 3, 5}));
  EXPECT_EQ(run.ring.slot_run_counter, 1);
}

TEST_F(CanaryV2, FreeIsIdempotentAndCountsEveryStamp) {
  Buffer buffer(4);
  buffer[3] = {42, 7, 0x1234, 99};
  const StageRun run = runner.free({3, 3, 3}, 2, buffer, empty_ring(4));
  EXPECT_EQ(run.buffer[3], (Record{kFreed, 7, 0x1234, 2}));
  EXPECT_EQ(run.ring.slot_run_counter, 3);
  // Freeing it again re-stamps the epoch only: a double free is not detected (SPEC-CANARY §11.2).
  const StageRun again = runner.free({3}, 8, run.buffer, run.ring);
  EXPECT_EQ(again.buffer[3], (Record{kFreed, 7, 0x1234, 8}));
  EXPECT_EQ(again.ring.count, 0);
  EXPECT_EQ(again.ring.kernel_run_counter, 2);
}

TEST_F(CanaryV2, NothingToFreeStillCountsTheCall) {
  const StageRun run = runner.free({}, 0, Buffer(2), empty_ring(0));
  EXPECT_EQ(run.ring.kernel_run_counter, 1);
  EXPECT_EQ(run.ring.slot_run_counter, 0);
}

TEST_F(CanaryV2, ReadingTheOwnFreedRecordFiresBit128Alone) {
  const Buffer written = three_tokens();
  const Buffer freed = runner.free({2}, 77, written, empty_ring(4)).buffer;
  const Ring ring = v2.verify(three_entries(), freed, empty_ring(8));
  ASSERT_EQ(ring.rows.size(), 2u);
  const std::vector<RingRow> rows = sorted(ring.rows);
  EXPECT_EQ(rows[0], (RingRow{0, 2, 1, kFreed, 202, written[2].prev_hash, 77, kvcanary::kVerifyFreed}));
  // Its successor's predecessor changed with the marker: §5's bit 1 alone.
  EXPECT_EQ(rows[1][kvcanary::kRowSlot], 3);
  EXPECT_EQ(rows[1][kvcanary::kRowFailReasonBits], kvcanary::kVerifyChainHash);
  // The same buffer, checks off: §5 reads the marker as a token (bit 32) and the epoch as a fingerprint (bit 4).
  const Ring v1 = runner.verify(three_entries(), freed, empty_ring(8));
  ASSERT_EQ(v1.rows.size(), 2u);
  EXPECT_EQ(sorted(v1.rows)[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyToken | kvcanary::kVerifyRealKvHash);
}

TEST_F(CanaryV2, ReadingAnotherChainsFreedRecordAddsChainAndPosition) {
  Buffer buffer = three_tokens();
  buffer[5] = {9, 40, kAnchorHash, 0};  // another request's record
  const Buffer freed = runner.free({5}, 3, buffer, empty_ring(4)).buffer;
  const Ring ring = v2.verify(verify_plan({{5, 1, 1, 202}}), freed, empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits],
            kvcanary::kVerifyFreed | kvcanary::kVerifyChainHash | kvcanary::kVerifyPosition);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowPosition], 40);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowExpectedAux], 3);  // the epoch
}

TEST_F(CanaryV2, AWriteOverAFreedSlotIsTheNormalReuse) {
  const Buffer freed = runner.free({1, 2, 3}, 1, three_tokens(), empty_ring(4)).buffer;
  const StageRun run = write_three(freed);
  EXPECT_EQ(run.ring.count, 0);
  EXPECT_EQ(v2.verify(three_entries(), run.buffer, empty_ring(4)).count, 0);
}

TEST_F(CanaryV2, AWriteSeededFromAFreedSlotKeepsItsPositionAndTheNextVerifyFires) {
  const Buffer freed = runner.free({3}, 4, three_tokens(), empty_ring(4)).buffer;
  Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
  plan.write_offsets = {0, 1};
  plan.write_seed_slot_indices = {3};
  plan.write_num_valid_reqs = 1;
  Tokens t;
  t.input_ids = {404};
  t.positions = {3};
  t.out_cache_loc = {4};
  const StageRun run = runner.write(plan, t, KernelKind::HEAD_K_FULL, RealKv{}, freed, empty_ring(4));
  EXPECT_EQ(run.ring.count, 0);  // the chain-position assert read the kept position 2
  const Ring ring = v2.verify(verify_plan({{1, 0, -1, 101}, {2, 1, 1, 202}, {3, 2, 2, 303}, {4, 3, 3, 404}}),
                              run.buffer, empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowSlot], 3);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyFreed);
}

// ---- §11.3 slot zero ----

TEST_F(CanaryV2, SlotZeroEntriesFireWithTheCheckOnAndOnlyThen) {
  const Outputs plan = verify_plan({{0, 11, 42, 101}});
  EXPECT_EQ(runner.verify(plan, Buffer(8), empty_ring(4)).count, 0);
  const Ring ring = v2.verify(plan, Buffer(8), empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{0, 0, 11, -1, 101, -1, 42, 256}));
  const Ring no_token = v2.verify(verify_plan({{0, 5, 3, 9}}), Buffer(8), empty_ring(4), false);
  ASSERT_EQ(no_token.rows.size(), 1u);
  EXPECT_EQ(no_token.rows[0], (RingRow{0, 0, 5, -1, -1, -1, 3, 256}));
}

TEST_F(CanaryV2, FortyThousandSlotZeroEntries) {
  const std::vector<std::array<std::int64_t, 4>> entries(40000, {0, 0, -1, -1});
  const Ring on = v2.verify(verify_plan(entries), Buffer(2), empty_ring(4));
  EXPECT_EQ(on.count, 40000);
  EXPECT_EQ(on.slot_run_counter, 40000);
  EXPECT_EQ(runner.verify(verify_plan(entries), Buffer(2), empty_ring(4)).count, 0);
}

TEST_F(CanaryV2, APageTableEntryOfZeroIsFoundThroughThePlan) {
  Inputs in = linear(4, 16);
  set_batch(in, {1}, {3}, {1});
  in.req_to_token[16 + 1] = 0;  // a live position routed to the padding slot (vLLM PR #7018)
  Outputs plan = kvcanary::reference::make_outputs(64, 4, 0);
  kvcanary::reference::plan(in, plan);
  Buffer buffer(64);
  const Ring ring = v2.verify(plan, buffer, empty_ring(8), false);
  bool found = false;
  for (const RingRow& row : ring.rows)
    found |= row[kvcanary::kRowSlot] == 0 && row[kvcanary::kRowPosition] == 1 && row[7] == kvcanary::kVerifySlotZero;
  EXPECT_TRUE(found);
}

TEST_F(CanaryV2, DefaultVerifyOptionsHaveTheChecksOn) {
  const kvcanary::VerifyOptions options;
  EXPECT_TRUE(options.checks.slot_zero);
  EXPECT_TRUE(options.checks.freed);
  EXPECT_FALSE(kvcanary::VerifyChecks::v1().slot_zero || kvcanary::VerifyChecks::v1().freed);
}

// ---- §11.4 the cross-check ----

class CrossCheckFacts : public CanaryV2 {
 protected:
  static Inputs two_rows() {
    Inputs in = linear(4, 16);
    set_batch(in, {1, 2}, {3, 2}, {1, 0});
    return in;
  }
  static Metadata csr(Int64s indptr, Int64s indices) {
    Metadata m;
    m.form = MetadataForm::Csr;
    m.kv_indptr = std::move(indptr);
    m.kv_indices = std::move(indices);
    return m;
  }
  static Metadata dense(Int64s table, std::int64_t max_blocks, Int64s seq_lens, std::int64_t page_size) {
    Metadata m;
    m.form = MetadataForm::Dense;
    m.block_table = std::move(table);
    m.max_blocks = max_blocks;
    m.seq_lens = std::move(seq_lens);
    m.page_size = page_size;
    return m;
  }
};

TEST_F(CrossCheckFacts, CsrFacts) {
  const Ring clean = runner.cross_check(two_rows(), csr({0, 4, 6}, {16, 17, 18, 19, 32, 33}), empty_ring(4));
  EXPECT_EQ(clean.count, 0);
  EXPECT_EQ(clean.slot_run_counter, 6);
  EXPECT_EQ(clean.kernel_run_counter, 1);
  const Ring zero = runner.cross_check(two_rows(), csr({0, 4, 6}, {16, 0, 18, 19, 32, 33}), empty_ring(4));
  ASSERT_EQ(zero.rows.size(), 1u);
  EXPECT_EQ(zero.rows[0], (RingRow{0, 17, 1, 0, 1, 0, 17, 512}));
  const Ring short_row = runner.cross_check(two_rows(), csr({0, 4, 5}, {16, 17, 18, 19, 32}), empty_ring(4));
  ASSERT_EQ(short_row.rows.size(), 1u);
  EXPECT_EQ(short_row.rows[0], (RingRow{0, -1, 2, 1, 2, 1, 2, 512}));
  EXPECT_EQ(short_row.slot_run_counter, 5);
}

TEST_F(CrossCheckFacts, DenseFacts) {
  Inputs in = linear(4, 16);
  set_batch(in, {1}, {5}, {0});
  EXPECT_EQ(runner.cross_check(in, dense({4, 5}, 2, {5}, 4), empty_ring(4)).count, 0);
  const Ring ring = runner.cross_check(in, dense({4, 0}, 2, {5}, 4), empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{0, 20, 4, 0, 1, 0, 5, 512}));
  // seq_lens wrong: one length row, entries compared up to the shorter.
  const Ring length = runner.cross_check(in, dense({4, 5}, 2, {4}, 4), empty_ring(4));
  ASSERT_EQ(length.rows.size(), 1u);
  EXPECT_EQ(length.rows[0], (RingRow{0, -1, 5, 0, 1, 4, 5, 512}));
  // seq_lens asks for more blocks than the table has: OUT_OF_RANGE, then the table's blocks.
  const Ring past = runner.cross_check(in, dense({4, 5}, 2, {12}, 4), empty_ring(4));
  EXPECT_EQ(sorted(past.rows), sorted({RingRow{0, -1, 12, 0, 1, 3, 2, 64}, RingRow{0, -1, 5, 0, 1, 12, 5, 512}}));
}

TEST_F(CrossCheckFacts, CsrOffsetsOutsideTheIndicesAreOutOfRangeAndSkipped) {
  const Ring ring = runner.cross_check(two_rows(), csr({0, 4, 9}, {16, 17, 18, 19, 32, 33}), empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{0, -1, -1, 1, 2, 4, 9, 64}));
  const Ring backwards = runner.cross_check(two_rows(), csr({-3, 4, 6}, {16, 17, 18, 19, 32, 33}), empty_ring(4));
  ASSERT_EQ(backwards.rows.size(), 1u);
  EXPECT_EQ(backwards.rows[0][7], 64);
}

TEST_F(CrossCheckFacts, PaddingAndBadRowsAreNotInspectedAndTheLutTranslates) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 0, 9}, {2, 99, 3}, {0, 99, 1});
  in.full_to_swa_index_mapping = shifted_lut(64, 100);
  const Ring ring = runner.cross_check(in, csr({0, 2, 2, 2}, {116, 117}), empty_ring(4));
  EXPECT_EQ(ring.count, 0);
  EXPECT_EQ(ring.slot_run_counter, 2);
}

TEST_F(CrossCheckFacts, HostErrors) {
  const auto message = [&](const Metadata& m) {
    return invalid_argument_message([&] { runner.cross_check(two_rows(), m, empty_ring(4)); }).value_or("");
  };
  EXPECT_THAT(message(csr({0, 4}, {})), ::testing::HasSubstr("kv_indptr has 2 entries, must be batch rows + 1 = 3"));
  Metadata bad_page = csr({0, 4, 6}, {16, 17, 18, 19, 32, 33});
  bad_page.page_size = 0;
  EXPECT_THAT(message(bad_page), ::testing::HasSubstr("page_size is 0"));
  EXPECT_THAT(message(dense({1, 2, 3}, 2, {1, 1}, 1)), ::testing::HasSubstr("block_table"));
}

// ---- §11.5 the padding slot ----

TEST_F(CanaryV2, PaddingSlotKeptZeroIsCleanAndAFlippedByteFires) {
  RealKv kv;
  kv.mode = kvcanary::RealKvMode::All;
  kvcanary::reference::RealKvSource source;
  source.pages = 2;
  source.row_bytes = 64;
  source.page_size = 2;
  source.bytes_per_token = 32;
  source.read_bytes = 32;
  source.bytes.assign(128, 0);
  source.bytes[64] = 7;  // slot 2's bytes: not the padding slot
  kv.sources.push_back(source);
  const std::int64_t zeros = kvcanary::reference::padding_fold_of_zeros(kv);
  EXPECT_EQ(zeros, kvcanary::reference::fold(kv, 0));
  const auto run = [&](const RealKv& real_kv) {
    Ring library = empty_ring(4), reference = empty_ring(4);
    kvcanary::check_padding_slot_host_data(ExecSpace(), real_kv, zeros, KernelKind::SWEEP_K_FULL, library);
    kvcanary::reference::check_padding_slot(real_kv, zeros, KernelKind::SWEEP_K_FULL, reference);
    EXPECT_TRUE(same_ring(library, reference, reference));
    return library;
  };
  EXPECT_EQ(run(kv).count, 0);
  EXPECT_EQ(run(kv).slot_run_counter, 1);
  kv.sources[0].bytes[17] = 0xFF;  // NaN bytes written into slot 0 by a padding row
  const Ring ring = run(kv);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{4, 0, -1, -1, -1, kvcanary::reference::fold(kv, 0), zeros, 1024}));
  kv.mode = kvcanary::RealKvMode::None;
  const Ring none = run(kv);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.slot_run_counter, 0);
  EXPECT_EQ(none.kernel_run_counter, 1);
}

// ---- §11.1 / §11.6 the report ----

TEST(CanaryV2Report, RowsOfTheNewBitsAreNeverDroppedAsNeverWritten) {
  EXPECT_TRUE(kvcanary::is_never_written(RingRow{0, 5, 0, 0, 7, 0, 3, 2}));
  EXPECT_FALSE(kvcanary::is_never_written(RingRow{0, 5, 0, 0, 1, 0, 5, 512}));  // batch row 0, position 0, value 0
  EXPECT_FALSE(kvcanary::is_never_written(RingRow{0, 0, 0, 0, -1, 0, 0, 256}));
}

TEST(CanaryV2Report, PoisonedPrefixFact) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2}, {4, 3}, {1, 1});
  const auto prefixes = kvcanary::poisoned_prefixes({RingRow{0, 18, 2, 0, 0, 0, 0, 1}}, in);
  ASSERT_EQ(prefixes.size(), 1u);
  EXPECT_EQ(prefixes[0].batch_row, 0);
  EXPECT_EQ(prefixes[0].pool_row, 1);
  EXPECT_EQ(prefixes[0].first_bad_position, 2);
  EXPECT_EQ(prefixes[0].slots, (Int64s{18, 19, 20}));
  EXPECT_EQ(kvcanary::poisoned_prefixes_json(prefixes),
            "{\"poisoned_prefixes\": [{\"batch_row\": 0, \"pool_row\": 1, \"first_bad_position\": 2, \"slots\": [18, 19, 20]}]}");
}

TEST(CanaryV2Report, PoisonedPrefixesFollowSharedSlotsKindsAndMetadata) {
  Inputs in = linear(4, 16);
  set_batch(in, {1, 2, 0}, {4, 3, 0}, {1, 1, 0});
  in.req_to_token[2 * 16 + 1] = 17;  // request 2 shares slot 17 at its position 1
  const std::vector<RingRow> rows = {RingRow{0, 17, 1, 0, 0, 0, 0, 32}, RingRow{0, 99, -1, -1, -1, -1, -1, 64}};
  const auto both = kvcanary::poisoned_prefixes(rows, in);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].first_bad_position, 1);
  EXPECT_EQ(both[1].batch_row, 1);
  EXPECT_EQ(both[1].slots, (Int64s{17, 34, 35}));
  // Rows of another group's kinds do not count.
  EXPECT_TRUE(kvcanary::poisoned_prefixes(rows, in, kvcanary::kind_bit(KernelKind::HEAD_K_SWA)).empty());
  // A metadata row poisons what the step computes: from the row's prefix.
  const auto metadata = kvcanary::poisoned_prefixes({RingRow{0, 33, 1, 1, 2, 0, 33, 512}}, in);
  ASSERT_EQ(metadata.size(), 1u);
  EXPECT_EQ(metadata[0].batch_row, 1);
  EXPECT_EQ(metadata[0].first_bad_position, 3);
  EXPECT_EQ(metadata[0].slots, (Int64s{35}));
}

}  // namespace kvcanary_test
