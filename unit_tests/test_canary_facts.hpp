// The facts of SPEC-CANARY §2, §5 and §8 through write() and verify() on this backend (each also
// checked against the reference by CanaryRunner), the OUT_OF_RANGE rows of §4–§5, the fill-once ring,
// and the host-side errors of §6.

#include "test_canary_support.hpp"

#include <limits>

namespace kvcanary_test {

class CanaryFacts : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  CanaryRunner<ExecSpace> runner;

  // A WritePlan of one request per (seed, token count), offsets in order.
  static Outputs write_plan(const Int64s& seeds, const Int64s& lengths) {
    Outputs plan = kvcanary::reference::make_outputs(0, static_cast<std::int64_t>(seeds.size()), 0);
    std::int64_t next = 0;
    for (std::size_t r = 0; r < seeds.size(); ++r) {
      plan.write_offsets[r] = next;
      next += lengths[r];
    }
    plan.write_offsets[seeds.size()] = next;
    plan.write_seed_slot_indices = seeds;
    plan.write_num_valid_reqs = static_cast<std::int32_t>(seeds.size());
    return plan;
  }

  static Tokens tokens(const Int64s& ids, const Int64s& positions, const Int64s& slots) {
    Tokens t;
    t.input_ids = ids;
    t.positions = positions;
    t.out_cache_loc = slots;
    return t;
  }

  // A VerifyPlan of entries (slot, expected position, prev, expected token).
  static Outputs verify_plan(const std::vector<std::array<std::int64_t, 4>>& entries) { return verify_plan_of(entries); }

  StageRun write(const Outputs& plan, const Tokens& t, Buffer buffer, const RealKv& real_kv = RealKv{}) const {
    return runner.write(plan, t, KernelKind::HEAD_K_FULL, real_kv, buffer, empty_ring(16));
  }
};

TEST_F(CanaryFacts, ChainOfFiveTokensStoresThePinnedPrevHashes) {
  const StageRun run = write(write_plan({-1}, {5}), tokens({101, 202, 303, 404, 505}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5}),
                             Buffer(8));
  const std::uint64_t expected[] = {0xDE7FAE23A9A1B716ull, 0x542FE5061275A6ABull, 0x9890D56BDE53142Eull,
                                    0x5213C65EEE8A1DD1ull, 0xC749AFFE5A5A9634ull};
  for (int k = 0; k < 5; ++k)
    EXPECT_EQ(static_cast<std::uint64_t>(run.buffer[static_cast<std::size_t>(k + 1)].prev_hash), expected[k]) << k;
  EXPECT_EQ(run.ring.slot_run_counter, 5);
  EXPECT_EQ(run.ring.count, 0);
}

TEST_F(CanaryFacts, WriteWithoutSeedStampsTheAnchor) {
  const StageRun run = write(write_plan({-1}, {1}), tokens({42}, {0}, {3}), Buffer(4));
  EXPECT_EQ(run.buffer[3], (Record{42, 0, kAnchorHash, 0}));
}

TEST_F(CanaryFacts, SeedRecordStartsTheChain) {
  Buffer buffer(8);
  buffer[7] = {100, 4, kAnchorHash, 0};
  EXPECT_EQ(static_cast<std::uint64_t>(write(write_plan({7}, {1}), tokens({1}, {5}, {2}), buffer).buffer[2].prev_hash),
            0x5022670B6356AF64ull);

  Buffer stamped(64);
  stamped[42] = {7, 10, kAnchorHash, 0};
  const StageRun run =
      write(write_plan({42}, {5}), tokens({101, 202, 303, 404, 505}, {11, 12, 13, 14, 15}, {0, 1, 2, 3, 4}), stamped);
  EXPECT_EQ(static_cast<std::uint64_t>(run.buffer[0].prev_hash), 0x5E35681BCFCE7CF6ull);
  EXPECT_EQ(run.ring.count, 0);
  const Outputs plan = verify_plan({{0, 11, 42, 101}, {1, 12, 0, 202}, {2, 13, 1, 303}, {3, 14, 2, 404}, {4, 15, 3, 505}});
  EXPECT_EQ(runner.verify(plan, run.buffer, empty_ring(8)).count, 0);
}

TEST_F(CanaryFacts, VerifyRowOfAPositionMismatch) {
  Buffer buffer(8);
  buffer[5] = {33, 0, kAnchorHash, 0};
  const Ring ring = runner.verify(verify_plan({{5, 99, -1, -1}}), buffer, empty_ring(8), true, KernelKind::TAIL_V_SWA);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{9, 5, 0, 33, -1, kAnchorHash, kAnchorHash, kvcanary::kVerifyPosition}));
  EXPECT_EQ(ring.kernel_run_counter, 1);
  EXPECT_EQ(ring.slot_run_counter, 1);
}

TEST_F(CanaryFacts, RingFillsOnceAndKeepsCounting) {
  const Ring ring = runner.verify(verify_plan(std::vector<std::array<std::int64_t, 4>>(10, {3, 1, -1, -1})), Buffer(4),
                                  empty_ring(4));
  EXPECT_EQ(ring.count, 10);
  EXPECT_EQ(ring.rows.size(), 4u);
  const Ring count_only = runner.verify(verify_plan({{3, 1, -1, -1}, {2, 1, -1, -1}}), Buffer(4), empty_ring(0));
  EXPECT_EQ(count_only.count, 2);
  EXPECT_TRUE(count_only.rows.empty());
}

TEST_F(CanaryFacts, DisabledPlanOnlyCountsTheKernel) {
  Outputs plan = verify_plan({{3, 1, -1, -1}, {-4, 1, -1, -1}});
  plan.enable = 0;
  const Ring ring = runner.verify(plan, Buffer(4), empty_ring(4));
  EXPECT_EQ(ring.kernel_run_counter, 1);
  EXPECT_EQ(ring.slot_run_counter, 0);
  EXPECT_EQ(ring.count, 0);
}

TEST_F(CanaryFacts, RunCounters) {
  EXPECT_EQ(write(write_plan({-1}, {2}), tokens({1, 2}, {0, 1}, {4, -1}), Buffer(8)).ring.slot_run_counter, 1);
  EXPECT_EQ(write(write_plan({-1, -1}, {2, 3}), tokens({1, 2, 3, 4, 5}, {0, 1, 0, 1, 2}, {1, 2, 3, 4, 5}), Buffer(8))
                .ring.slot_run_counter,
            5);
  Outputs none = write_plan({-1}, {1});
  none.write_num_valid_reqs = 0;
  StageRun run{Buffer(4), empty_ring(4)};
  for (int call = 0; call < 3; ++call)
    run = runner.write(none, tokens({1}, {0}, {1}), KernelKind::HEAD_K_FULL, RealKv{}, run.buffer, run.ring);
  EXPECT_EQ(run.ring.kernel_run_counter, 3);
  EXPECT_EQ(run.ring.slot_run_counter, 0);
  EXPECT_EQ(run.buffer, Buffer(4));
}

TEST_F(CanaryFacts, InputAssertRowsAndTheChainFollowsActualValues) {
  Tokens t = tokens({42}, {0}, {1});
  t.expected_input_ids = Int64s{99};
  t.expected_positions = Int64s{0};
  StageRun run = write(write_plan({-1}, {1}), t, Buffer(4));
  ASSERT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kWriteToken);
  EXPECT_EQ(run.ring.rows[0][kvcanary::kRowStoredToken], 42);

  t = tokens({5}, {7}, {1});
  t.expected_input_ids = Int64s{5};
  t.expected_positions = Int64s{0};
  run = write(write_plan({-1}, {1}), t, Buffer(4));
  ASSERT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kWritePosition);
  EXPECT_EQ(run.ring.rows[0][kvcanary::kRowPosition], 7);

  t = tokens({10, 11, 12}, {0, 1, 2}, {1, 2, 3});
  t.expected_input_ids = Int64s{20, 21, 22};
  t.expected_positions = Int64s{0, 1, 2};
  run = write(write_plan({-1}, {3}), t, Buffer(4));
  EXPECT_EQ(run.ring.count, 3);
  EXPECT_EQ(runner.verify(verify_plan({{1, 0, -1, 10}, {2, 1, 1, 11}, {3, 2, 2, 12}}), run.buffer, empty_ring(4)).count, 0);
}

TEST_F(CanaryFacts, ChainPositionAssertFollowsTheSeed) {
  Buffer buffer(8);
  buffer[6] = {9, 4, kAnchorHash, 0};
  const StageRun run = write(write_plan({6}, {2}), tokens({1, 2}, {6, 7}, {1, 2}), buffer);
  ASSERT_EQ(run.ring.rows.size(), 1u);  // 6 after 4: one row; 7 after 6 is fine
  EXPECT_EQ(run.ring.rows[0][kvcanary::kRowExpectedAux], 5);
  Tokens off = tokens({1, 2}, {6, 7}, {1, 2});
  off.chain_position_assert = 0;
  EXPECT_EQ(write(write_plan({6}, {2}), off, buffer).ring.count, 0);
}

TEST_F(CanaryFacts, VerifyChecks) {
  Buffer buffer(8);
  buffer[1] = {10, 0, kAnchorHash, 0};
  buffer[2] = {11, 1, kvcanary::Impl::record_hash(kAnchorHash, 10, 0), 0};
  buffer[3] = {12, 2, 12345, 0};  // a wrong prev_hash
  // prev = 0 skips the chain check whatever prev_hash holds; a position mismatch still fires alone.
  Ring ring = runner.verify(verify_plan({{3, 2, 0, -1}, {3, 9, 0, -1}}), buffer, empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyPosition);
  // A corrupted predecessor token: its successor gets bit 1 only.
  buffer[1].token = 99;
  ring = runner.verify(verify_plan({{2, 1, 1, -1}}), buffer, empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyChainHash);
  // Stored token 42, expected 99: bit 32 only, both in the row; off when the check is off.
  buffer[4] = {42, 0, kAnchorHash, 0};
  ring = runner.verify(verify_plan({{4, 0, -1, 99}}), buffer, empty_ring(4));
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{0, 4, 0, 42, 99, kAnchorHash, kAnchorHash, kvcanary::kVerifyToken}));
  EXPECT_EQ(runner.verify(verify_plan({{4, 0, -1, 99}}), buffer, empty_ring(4), false).count, 0);
}

TEST_F(CanaryFacts, OutOfRangeRows) {
  Buffer buffer(4);
  // Verify: slot 0 skipped; negative or past-the-end slot, or prev past the end: one row, nothing read.
  const Ring ring = runner.verify(verify_plan({{0, 1, 99, 5}, {-2, 1, -1, 5}, {4, 2, -1, 6}, {1, 3, 4, 7}}), buffer,
                                  empty_ring(8));
  EXPECT_EQ(sorted(ring.rows), sorted({RingRow{0, -2, 1, -1, 5, -1, -1, 64}, RingRow{0, 4, 2, -1, 6, -1, -1, 64},
                                       RingRow{0, 4, 3, -1, 7, -1, -1, 64}}));
  EXPECT_EQ(ring.slot_run_counter, 4);
  // Write: a slot past the buffer, a seed past the buffer, offsets past the token arrays.
  StageRun run = write(write_plan({-1}, {2}), tokens({7, 8}, {0, 1}, {9, 2}), buffer);
  ASSERT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows[0], (RingRow{0, 9, 0, 7, -1, kAnchorHash, -1, 64}));
  EXPECT_EQ(run.buffer[2], (Record{8, 1, kAnchorHash, 0}));  // the skipped token took no chain step
  run = write(write_plan({4}, {1}), tokens({7}, {0}, {2}), buffer);
  EXPECT_EQ(run.ring.rows.at(0), (RingRow{0, 4, -1, -1, -1, kAnchorHash, -1, 64}));
  Outputs past = write_plan({-1}, {1});
  past.write_offsets = {1, 3};
  run = write(past, tokens({7, 8}, {0, 1}, {1, 2}), buffer);
  EXPECT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows.at(0)[kvcanary::kRowSlot], 2);  // token 1 stored, index 2 is past the arrays
  // Offsets at the int64 end: one row at begin, nothing read (a lane's index begin + lane would overflow).
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  past.write_offsets = {kMax - 1, kMax};
  run = write(past, tokens({7, 8}, {0, 1}, {1, 2}), buffer);
  ASSERT_EQ(run.ring.rows.size(), 1u);
  EXPECT_EQ(run.ring.rows[0], (RingRow{0, kMax - 1, -1, -1, -1, kAnchorHash, -1, 64}));
  EXPECT_EQ(run.buffer, buffer);
}

TEST_F(CanaryFacts, RealKvByteFlipIsBit4Only) {
  RealKv kv;
  kv.mode = kvcanary::RealKvMode::All;
  kvcanary::reference::RealKvSource source;
  source.pages = 4;
  source.row_bytes = 32;
  source.bytes_per_token = 32;
  source.read_bytes = 32;
  source.bytes.resize(128);
  for (std::size_t i = 0; i < source.bytes.size(); ++i) source.bytes[i] = static_cast<std::uint8_t>(i * 37);
  kv.sources.push_back(source);
  const StageRun run = runner.write(write_plan({-1}, {1}), tokens({5}, {0}, {2}), KernelKind::HEAD_K_FULL, kv, Buffer(4),
                                    empty_ring(4));
  EXPECT_NE(run.buffer[2].real_kv_hash, 0);
  const Outputs plan = verify_plan({{2, 0, -1, 5}});
  EXPECT_EQ(runner.verify(plan, run.buffer, empty_ring(4), true, KernelKind::TAIL_K_FULL, kv).count, 0);
  kv.sources[0].bytes[2 * 32 + 17] ^= 0x10;
  const Ring ring = runner.verify(plan, run.buffer, empty_ring(4), true, KernelKind::TAIL_K_FULL, kv);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyRealKvHash);
}

TEST_F(CanaryFacts, FortyThousandEntriesCount) {
  std::vector<std::array<std::int64_t, 4>> entries(40000, {0, 0, -1, -1});
  EXPECT_EQ(runner.verify(verify_plan(entries), Buffer(2), empty_ring(4)).slot_run_counter, 40000);
}

// ---- host-side errors (SPEC-CANARY §6): std::invalid_argument naming the argument, nothing launched ----

class CanaryHostErrors : public ::testing::Test {
 protected:
  using Space = KVCANARY_TEST_EXECSPACE;
  using memory_space = Space::memory_space;
  const Space space{};
  kvcanary::CanaryBuffer<memory_space> buffer = kvcanary::allocate_canary_buffer(space, 8);
  kvcanary::ViolationRing<memory_space> ring = kvcanary::allocate_violation_ring(space, 4);

  std::string write_error(const Tokens& host_tokens, const kvcanary::WriteOptions<memory_space>& options = {}) const {
    const Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
    const auto tokens = kvcanary::upload_step_tokens(space, host_tokens);
    return invalid_argument_message([&] {
             kvcanary::write(space, kvcanary::upload_write_plan(space, plan), tokens, buffer, ring, options);
           }).value_or("");
  }
  std::int64_t kernel_runs() const {
    return kvcanary::download_violation_ring(space, ring).kernel_run_counter;
  }
};

TEST_F(CanaryHostErrors, TokenArraysOfDifferentLengths) {
  Tokens t;
  t.input_ids = {1, 2};
  t.positions = {0};
  t.out_cache_loc = {1, 2};
  EXPECT_THAT(write_error(t), ::testing::HasSubstr("kvcanary::write: input_ids, positions and out_cache_loc have 2, 1 and 2"));
  t.positions = {0, 1};
  t.expected_input_ids = Int64s{1, 2};
  EXPECT_THAT(write_error(t), ::testing::HasSubstr("both or neither"));
  EXPECT_EQ(kernel_runs(), 0);
}

TEST_F(CanaryHostErrors, RealKvSourcesBreakingTheRules) {
  Tokens t;
  kvcanary::WriteOptions<memory_space> options;
  kvcanary::RealKvSource<memory_space> source;
  source.bytes = Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, memory_space>("test::kv", 8, 32);
  source.bytes_per_token = 32;
  source.read_bytes = 48;
  options.real_kv.sources = {source};
  EXPECT_THAT(write_error(t, options), ::testing::HasSubstr("kvcanary::write: real_kv.sources[0].read_bytes is 48"));
  options.real_kv.sources[0].read_bytes = 32;
  options.real_kv.sources[0].page_size = 2;  // 4 rows needed for 8 slots, 2 x 32 bytes > 32
  EXPECT_THAT(write_error(t, options), ::testing::HasSubstr("page_size * bytes_per_token is 2 x 32, more than the 32 bytes of a row"));
  options.real_kv.sources[0].page_size = 1;
  options.real_kv.sources[0].bytes = Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, memory_space>("test::kv", 7, 32);
  EXPECT_THAT(write_error(t, options), ::testing::HasSubstr("bytes has 7 rows, fewer than the 8 that 8 slots need"));
  options.real_kv.sources.assign(5, source);
  EXPECT_THAT(write_error(t, options), ::testing::HasSubstr("real_kv has 5 sources, at most 4"));
  EXPECT_EQ(kernel_runs(), 0);
}

TEST_F(CanaryHostErrors, WrappedBuffersNeedAStrideOfAtLeast32BytesInWords) {
  std::vector<std::int64_t> bytes(64);
  using kvcanary::wrap_canary_buffer;
  EXPECT_THAT(invalid_argument_message([&] { wrap_canary_buffer<Kokkos::HostSpace>(bytes.data(), 4, 24); }).value_or(""),
              ::testing::HasSubstr("stride_bytes is 24, must be >= 32 and a multiple of 8"));
  EXPECT_THAT(invalid_argument_message([&] { wrap_canary_buffer<Kokkos::HostSpace>(bytes.data(), 4, 36); }).value_or(""),
              ::testing::HasSubstr("stride_bytes is 36"));
  EXPECT_THAT(invalid_argument_message([&] {
                wrap_canary_buffer<Kokkos::HostSpace>(reinterpret_cast<char*>(bytes.data()) + 4, 4, 32);
              }).value_or(""),
              ::testing::HasSubstr("not aligned to 8 bytes"));
  const auto wrapped = wrap_canary_buffer<Kokkos::HostSpace>(bytes.data(), 4, 48);
  EXPECT_EQ(wrapped.stride_bytes(), 48);
  EXPECT_EQ(&wrapped.records(3, kvcanary::kPrevHash), bytes.data() + 3 * 6 + 2);
}

TEST_F(CanaryHostErrors, TooManyBuffersOrAnUnknownKind) {
  const auto plan = kvcanary::upload_verify_plan(space, kvcanary::reference::make_outputs(4, 0, 0));
  std::vector<kvcanary::VerifyTarget<memory_space>> targets(5, {buffer});
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::verify(space, plan, targets, ring); }).value_or(""),
              ::testing::HasSubstr("kvcanary::verify: got 5 canary buffers, must be 1 to 4"));
  targets.assign(1, {buffer, static_cast<KernelKind>(12)});
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::verify(space, plan, targets, ring); }).value_or(""),
              ::testing::HasSubstr("kernel_kind is 12"));
  EXPECT_EQ(kernel_runs(), 0);
}

// Issue 19: every allocation helper with a size rejects a negative one (before: silently size 0).
TEST_F(CanaryHostErrors, NegativeSizesToTheAllocationHelpersAreRejected) {
  const auto message = [](const auto& call) { return invalid_argument_message(call).value_or("no exception"); };
  EXPECT_EQ(message([&] { kvcanary::allocate_violation_ring(space, -5); }),
            "kvcanary::allocate_violation_ring: capacity is -5, must be >= 0");
  EXPECT_EQ(message([&] { kvcanary::allocate_canary_buffer(space, -5); }),
            "kvcanary::allocate_canary_buffer: num_slots is -5, must be >= 0");
  EXPECT_EQ(message([&] { kvcanary::allocate_verify_plan(space, -1); }),
            "kvcanary::allocate_verify_plan: verify_capacity is -1, must be >= 0");
  EXPECT_EQ(message([&] { kvcanary::allocate_write_plan(space, -1); }),
            "kvcanary::allocate_write_plan: write_req_capacity is -1, must be >= 0");
  EXPECT_EQ(message([&] { kvcanary::allocate_plan_workspace(space, -2); }),
            "kvcanary::allocate_plan_workspace: max_batch_size is -2, must be >= 0");
  EXPECT_EQ(kvcanary::allocate_violation_ring(space, 0).capacity(), 0);
  EXPECT_EQ(kvcanary::allocate_canary_buffer(space, 0).num_slots(), 0);
}

// Issue 19: host arrays of different lengths are an invalid_argument naming them, raised before any copy
// (before: a Kokkos deep_copy "Deprecation Error" runtime_error from inside the upload).
TEST_F(CanaryHostErrors, UploadsRejectHostArraysOfDifferentLengths) {
  Outputs plan = kvcanary::reference::make_outputs(2, 1, 0);
  plan.verify_prev_slot_indices = {-1};
  EXPECT_EQ(invalid_argument_message([&] { kvcanary::upload_verify_plan(space, plan); }).value_or("no exception"),
            "kvcanary::upload_verify_plan: verify_prev_slot_indices has 1 entries but verify_slot_indices has 2");
  plan.verify_prev_slot_indices = {-1, 1};
  plan.verify_expected_tokens = {1, 2, 3};
  EXPECT_THAT(invalid_argument_message([&] { kvcanary::upload_verify_plan(space, plan); }).value_or(""),
              ::testing::HasSubstr("verify_expected_tokens has 3 entries but verify_slot_indices has 2"));
  plan.verify_expected_tokens = {1, 2};
  const auto verify_plan = kvcanary::allocate_verify_plan(space, 2);
  const auto write_plan = kvcanary::allocate_write_plan(space, 1);
  const auto status = kvcanary::allocate_plan_status(space);
  plan.write_offsets = {0, 0, 0};
  EXPECT_EQ(invalid_argument_message([&] { kvcanary::upload_outputs(space, plan, verify_plan, write_plan, status); })
                .value_or("no exception"),
            "kvcanary::upload_outputs: write_offsets has 3 entries but the device array has 2");
}

// Issue 19: a canary buffer whose bytes lie inside a real-KV source it fingerprints is rejected by write()
// and verify() (before: accepted, and every later verify reported bit 4 on every slot).
TEST_F(CanaryHostErrors, CanaryBufferOverlappingARealKvSourceIsRejected) {
  Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, memory_space> kv("test::kv", 4, 32);
  kvcanary::RealKv<memory_space> real_kv;
  real_kv.mode = RealKvMode::All;
  kvcanary::RealKvSource<memory_space> source;
  source.bytes = kv;
  source.bytes_per_token = source.read_bytes = 32;
  real_kv.sources = {source};
  kvcanary::WriteOptions<memory_space> options;
  options.real_kv = real_kv;
  Outputs plan = kvcanary::reference::make_outputs(1, 1, 0);
  plan.write_offsets = {0, 1};
  plan.write_seed_slot_indices = {-1};
  plan.write_num_valid_reqs = 1;
  plan.verify_slot_indices = {1};
  plan.verify_expected_positions = {0};
  plan.verify_prev_slot_indices = {-1};
  plan.verify_num_valid = 1;
  plan.enable = 1;
  Tokens t;
  t.input_ids = {5};
  t.positions = {0};
  t.out_cache_loc = {1};
  const auto tokens = kvcanary::upload_step_tokens(space, t);
  const auto write_plan = kvcanary::upload_write_plan(space, plan);
  const auto verify_plan = kvcanary::upload_verify_plan(space, plan);
  // The whole tensor, and one record in its last row: both overlap; a buffer of its own does not.
  for (const std::int64_t offset : {0, 96}) {
    const auto aliased = kvcanary::wrap_canary_buffer<memory_space>(kv.data() + offset, offset == 0 ? 4 : 1, 32);
    EXPECT_THAT(invalid_argument_message([&] { kvcanary::write(space, write_plan, tokens, aliased, ring, options); })
                    .value_or(""),
                ::testing::AllOf(::testing::HasSubstr("kvcanary::write: the canary buffer's bytes"),
                                 ::testing::HasSubstr("overlap real_kv.sources[0].bytes")));
    EXPECT_THAT(invalid_argument_message([&] {
                  kvcanary::verify(space, verify_plan, aliased, ring, kvcanary::VerifyOptions{}, KernelKind::HEAD_K_FULL,
                                   real_kv);
                }).value_or(""),
                ::testing::HasSubstr("kvcanary::verify: the canary buffer's bytes"));
  }
  EXPECT_EQ(kernel_runs(), 0);
  const auto apart = kvcanary::allocate_canary_buffer(space, 4);
  EXPECT_EQ(invalid_argument_message([&] { kvcanary::write(space, write_plan, tokens, apart, ring, options); }),
            std::nullopt);
  EXPECT_EQ(invalid_argument_message([&] {
              kvcanary::verify(space, verify_plan, apart, ring, kvcanary::VerifyOptions{}, KernelKind::HEAD_K_FULL, real_kv);
            }),
            std::nullopt);
  EXPECT_EQ(kernel_runs(), 2);
}

// Issue 19: plans are allocated in the empty state (enable 0, counts 0, offsets 0), so a write() or a
// verify() before any plan() does nothing, even on recycled memory (before: it acted on garbage).
TEST_F(CanaryHostErrors, PlansStartEmptySoWriteAndVerifyBeforePlanDoNothing) {
  for (const std::int64_t junk_value : {1, 3}) {
    {  // memory the next allocations may reuse, full of non-zero words
      Kokkos::View<std::int64_t*, memory_space> junk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "test::junk"), 9);
      Kokkos::deep_copy(junk, junk_value);
      Kokkos::View<std::int64_t*, memory_space> more(Kokkos::view_alloc(Kokkos::WithoutInitializing, "test::junk"), 4);
      Kokkos::deep_copy(more, junk_value);
      space.fence();
    }
    const auto write_plan = kvcanary::allocate_write_plan(space, 8);
    const auto verify_plan = kvcanary::allocate_verify_plan(space, 4);
    Outputs contents;
    kvcanary::download_outputs(space, verify_plan, write_plan, kvcanary::allocate_plan_status(space), contents);
    EXPECT_EQ(contents.write_offsets, Int64s(9, 0));
    EXPECT_EQ(contents.write_seed_slot_indices, Int64s(8, 0));
    EXPECT_EQ(contents.write_num_valid_reqs, 0);
    EXPECT_EQ(contents.verify_slot_indices, Int64s(4, 0));
    EXPECT_EQ(contents.verify_prev_slot_indices, Int64s(4, 0));
    EXPECT_EQ(contents.verify_num_valid, 0);
    EXPECT_EQ(contents.enable, 0);

    const auto fresh_ring = kvcanary::allocate_violation_ring(space, 64);
    const auto fresh_buffer = kvcanary::allocate_canary_buffer(space, 8);
    Tokens t;
    t.input_ids = {5, 6, 7};
    t.positions = {0, 1, 2};
    t.out_cache_loc = {1, 2, 3};
    kvcanary::write(space, write_plan, kvcanary::upload_step_tokens(space, t), fresh_buffer, fresh_ring);
    kvcanary::verify(space, verify_plan, fresh_buffer, fresh_ring);
    const auto after = kvcanary::download_violation_ring(space, fresh_ring);
    EXPECT_EQ(after.count, 0);
    EXPECT_EQ(after.slot_run_counter, 0);
    EXPECT_EQ(after.kernel_run_counter, 2);
    EXPECT_EQ(kvcanary::download_canary_buffer(space, fresh_buffer), Buffer(8));
  }
}

}  // namespace kvcanary_test
