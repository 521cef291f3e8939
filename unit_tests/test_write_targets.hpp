// write() of several canary buffers in one call (the K and V halves, SPEC-CANARY §4): the same buffers,
// rows and counters as the reference's write() once per buffer in order, on random calls with 2 to 4
// targets (agreeing and disagreeing seed records, buffers of other sizes, real-KV sources on some,
// duplicate slots, bad rows), every algorithm and team width; the facts of a shared and a separate walk;
// interleaved records in one allocation (the bytes between them untouched); the host errors.

#include "test_canary_cases.hpp"
#include "test_canary_support.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace kvcanary_test {

// The targets of a random call, in a random order: the case's buffer, copies of it (seeds agree), copies
// with seed records changed (seeds disagree), unrelated buffers and buffers with fewer slots.
struct WriteTargetsCase {
  std::vector<Buffer> buffers;
  std::vector<KernelKind> kinds;
  std::vector<RealKv> real_kvs;

  std::vector<const RealKv*> real_kv_pointers() const {
    std::vector<const RealKv*> pointers;
    for (const RealKv& kv : real_kvs) pointers.push_back(&kv);
    return pointers;
  }
};

inline WriteTargetsCase random_targets(CanaryCaseGenerator& generator, const WriteCase& c) {
  WriteTargetsCase targets{{c.buffer}, {c.kind}, {c.real_kv}};
  const auto slots = static_cast<std::int64_t>(c.buffer.size());
  const std::int64_t count = generator.between(2, kvcanary::kMaxWriteTargets);
  for (std::int64_t t = 1; t < count; ++t) {
    const double pick = generator.uniform();
    Buffer b = c.buffer;
    if (pick < 0.25) {  // seed records of this buffer only changed: the chains part at those requests
      for (const std::int64_t seed : c.plan.write_seed_slot_indices)
        if (seed >= 0 && seed < slots && generator.chance(0.5)) {
          Record& r = b[static_cast<std::size_t>(seed)];
          if (generator.chance(0.5)) r.position += generator.between(1, 3);
          else r.prev_hash ^= 1;
        }
    } else if (pick < 0.4) {
      b = generator.buffer(slots);
    } else if (pick < 0.55) {
      // Fewer slots: some slots in range for one buffer only. (Not more: the case's slots past its
      // buffer, in range in a larger one, could be written by two requests, which the SPEC leaves
      // unspecified.)
      b = generator.buffer(std::max<std::int64_t>(1, slots - generator.between(1, std::max<std::int64_t>(1, slots / 2))));
    }
    targets.buffers.push_back(b);
    targets.kinds.push_back(static_cast<KernelKind>(generator.between(0, kvcanary::kKernelKinds - 1)));
    targets.real_kvs.push_back(generator.real_kv(static_cast<std::int64_t>(b.size())));
  }
  // Any order: the case's buffer is not always the first (the one whose walk the others may share).
  for (std::size_t t = targets.buffers.size() - 1; t > 0; --t) {
    const auto u = static_cast<std::size_t>(generator.between(0, static_cast<std::int64_t>(t)));
    std::swap(targets.buffers[t], targets.buffers[u]);
    std::swap(targets.kinds[t], targets.kinds[u]);
    std::swap(targets.real_kvs[t], targets.real_kvs[u]);
  }
  return targets;
}

class WriteTargetCalls : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  CanaryAlgorithm algorithm = CanaryAlgorithm::Default;

  CanaryRunner<ExecSpace> runner(std::int64_t k, int lanes = 0) const {
    CanaryRunner<ExecSpace> r;
    r.algorithm = algorithm;
    r.layout.stride_bytes = k % 3 == 0 ? 32 : k % 3 == 1 ? 48 : 64;
    r.layout.int32_tokens = k % 4 == 3;
    r.layout.write_lanes = lanes;
    return r;
  }

  void expect_calls_match(std::uint64_t seed, const WriteShape& shape, int count, const std::string& what,
                          int lanes = 0) {
    CanaryCaseGenerator generator(seed);
    for (int k = 0; k < count; ++k) {
      const WriteCase c = generator.next_write(shape);
      const WriteTargetsCase targets = random_targets(generator, c);
      SCOPED_TRACE(what + " case " + std::to_string(k) + ", " + std::to_string(targets.buffers.size()) + " targets");
      runner(k, lanes).write(c.plan, c.tokens, targets.kinds, targets.real_kv_pointers(), targets.buffers, c.ring);
      if (HasFailure()) return;
    }
  }
};

class WriteTargets : public WriteTargetCalls, public ::testing::WithParamInterface<CanaryAlgorithm> {
 protected:
  WriteTargets() { algorithm = GetParam(); }
};

TEST_P(WriteTargets, RandomCallsMatchOneCallPerTarget) {
  expect_calls_match(0x7A46 + static_cast<int>(GetParam()), WriteShape{}, 300, "write");
}

// Chunks of 32 with every token stored, chunk boundaries, a slot written twice in one chunk, seeds among
// the request's own targets.
TEST_P(WriteTargets, RandomLongCallsMatchOneCallPerTarget) {
  expect_calls_match(0x7A47 + static_cast<int>(GetParam()), WriteShape::long_ones(), 120, "long write");
}

TEST_P(WriteTargets, RandomManyRequestCallsMatchOneCallPerTarget) {
  expect_calls_match(0x7A48 + static_cast<int>(GetParam()), WriteShape::many(), 12, "many-request write");
}

// The portable kernel at every team width this backend can run (a width given runs the portable kernel).
TEST_F(WriteTargetCalls, RandomCallsMatchAtEveryTeamWidth) {
  const int widest = std::min(32, static_cast<int>(ExecSpace().concurrency()));
  for (const int lanes : {1, 2, 3, 5, 32}) {
    if (lanes > widest) continue;  // Serial and one-thread OpenMP run width 1 only
    const std::string width = "width " + std::to_string(lanes) + ", ";
    expect_calls_match(0x7A49 + lanes, WriteShape{}, 80, width + "write", lanes);
    expect_calls_match(0x7A4A + lanes, WriteShape::long_ones(), 30, width + "long write", lanes);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Canary, WriteTargets,
                         ::testing::Values(CanaryAlgorithm::Default, CanaryAlgorithm::Portable, CanaryAlgorithm::Cuda),
                         [](const ::testing::TestParamInfo<CanaryAlgorithm>& info) {
                           switch (info.param) {
                             case CanaryAlgorithm::Default: return std::string("Default");
                             case CanaryAlgorithm::Portable: return std::string("Portable");
                             case CanaryAlgorithm::Cuda: return std::string("Cuda");
                           }
                           return std::string("Unknown");
                         });

class WriteTargetFacts : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  using memory_space = ExecSpace::memory_space;
  CanaryRunner<ExecSpace> runner;

  // One request from `seed`: tokens 101.. at positions 5.. into slots 1..length.
  static Outputs plan_of_one(std::int64_t seed, std::int64_t length) {
    Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
    plan.write_offsets = {0, length};
    plan.write_seed_slot_indices = {seed};
    plan.write_num_valid_reqs = 1;
    return plan;
  }
  static Tokens tokens_of_one(std::int64_t length) {
    Tokens t;
    for (std::int64_t j = 0; j < length; ++j) {
      t.input_ids.push_back(101 + j);
      t.positions.push_back(5 + j);
      t.out_cache_loc.push_back(1 + j);
    }
    t.chain_position_assert = 1;
    return t;
  }
  std::vector<Buffer> write_kv(const Outputs& plan, const Tokens& t, const Buffer& k, const Buffer& v,
                               Ring* ring = nullptr) const {
    const RealKv none;
    return runner.write(plan, t, {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL}, {&none, &none}, {k, v},
                        empty_ring(16), ring);
  }
};

TEST_F(WriteTargetFacts, KAndVWithOneSeedGetOneChainAndCountAsTwoCalls) {
  Buffer k(48);
  k[40] = {7, 4, kAnchorHash, 0};
  Ring ring;
  const std::vector<Buffer> written = write_kv(plan_of_one(40, 40), tokens_of_one(40), k, k, &ring);
  for (std::int64_t s = 1; s <= 40; ++s) EXPECT_EQ(written[0][static_cast<std::size_t>(s)], written[1][static_cast<std::size_t>(s)]) << s;
  EXPECT_EQ(ring.kernel_run_counter, 2);
  EXPECT_EQ(ring.slot_run_counter, 80);
  EXPECT_EQ(ring.count, 0);
}

TEST_F(WriteTargetFacts, DisagreeingSeedWalksItsOwnChain) {
  Buffer k(48), v(48);
  k[40] = {7, 4, kAnchorHash, 0};
  v[40] = {8, 4, kAnchorHash, 0};  // another token in V's seed record: V's chain starts elsewhere
  Ring ring;
  const std::vector<Buffer> written = write_kv(plan_of_one(40, 40), tokens_of_one(40), k, v, &ring);
  for (std::int64_t s = 1; s <= 40; ++s)
    EXPECT_NE(written[0][static_cast<std::size_t>(s)].prev_hash, written[1][static_cast<std::size_t>(s)].prev_hash) << s;
  EXPECT_EQ(ring.count, 0);
  v[40].position = 2;  // and another position: V's position assert fires on the first token
  write_kv(plan_of_one(40, 40), tokens_of_one(40), k, v, &ring);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowKernelKind], static_cast<std::int64_t>(KernelKind::HEAD_V_FULL));
  EXPECT_EQ(ring.rows[0][kvcanary::kRowExpectedAux], 3);
}

TEST_F(WriteTargetFacts, ASmallerBufferSkipsTheSlotsPastItsEnd) {
  Buffer k(48), v(20);  // slots 20..39 are out of range in V only: V stores 19 tokens, 21 OUT_OF_RANGE rows
  Ring ring;
  const RealKv none;
  const std::vector<Buffer> written = runner.write(plan_of_one(-1, 40), tokens_of_one(40),
                                                   {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL}, {&none, &none},
                                                   {k, v}, empty_ring(64), &ring);
  EXPECT_EQ(ring.slot_run_counter, 40 + 19);
  EXPECT_EQ(ring.count, 21);
  for (std::int64_t s = 1; s < 20; ++s) EXPECT_EQ(written[0][static_cast<std::size_t>(s)], written[1][static_cast<std::size_t>(s)]);
}

// K and V records interleaved in one allocation at one stride (the engine's layout): both written, the
// words between them never.
TEST_F(WriteTargetFacts, InterleavedRecordsLeaveTheBytesBetweenThemUntouched) {
  constexpr std::int64_t kSlots = 48, kWords = 10;  // 80-byte stride: K at word 0, V at word 4, 2 words of poison
  constexpr std::int64_t kPoison = -0x3C3C3C3C3C3C3C3DLL;
  const ExecSpace space;
  Kokkos::View<std::int64_t*, memory_space> bytes("test::kv_records", kSlots * kWords);
  Kokkos::deep_copy(space, bytes, kPoison);
  const auto k = kvcanary::wrap_canary_buffer<memory_space>(bytes.data(), kSlots, kWords * 8);
  const auto v = kvcanary::wrap_canary_buffer<memory_space>(bytes.data() + 4, kSlots, kWords * 8);
  const auto ring = kvcanary::allocate_violation_ring(space, 8);
  const Tokens host_tokens = tokens_of_one(40);
  kvcanary::write(space, kvcanary::upload_write_plan(space, plan_of_one(-1, 40)),
                  kvcanary::upload_step_tokens(space, host_tokens),
                  {{k, KernelKind::HEAD_K_FULL}, {v, KernelKind::HEAD_V_FULL}}, ring);
  Buffer expected(kSlots, Record{kPoison, kPoison, kPoison, kPoison});
  Ring expected_ring = empty_ring(8);
  kvcanary::reference::write(plan_of_one(-1, 40), host_tokens, KernelKind::HEAD_K_FULL, RealKv{}, expected, expected_ring);
  EXPECT_TRUE(same_buffer(kvcanary::download_canary_buffer(space, k), expected));
  EXPECT_TRUE(same_buffer(kvcanary::download_canary_buffer(space, v), expected));
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bytes);
  for (std::int64_t s = 0; s < kSlots; ++s)
    for (std::int64_t w = 8; w < kWords; ++w) EXPECT_EQ(host(s * kWords + w), kPoison) << "slot " << s << ", word " << w;
  EXPECT_EQ(kvcanary::download_violation_ring(space, ring).kernel_run_counter, 2);
}

TEST_F(WriteTargetFacts, TargetsThatShareMemoryOrTooManyAreRejected) {
  const ExecSpace space;
  const auto buffer = kvcanary::allocate_canary_buffer(space, 8);
  const auto ring = kvcanary::allocate_violation_ring(space, 4);
  const auto plan = kvcanary::upload_write_plan(space, plan_of_one(-1, 2));
  const auto tokens = kvcanary::upload_step_tokens(space, tokens_of_one(2));
  const auto error = [&](const std::vector<kvcanary::WriteTarget<memory_space>>& targets) {
    return invalid_argument_message([&] { kvcanary::write(space, plan, tokens, targets, ring); }).value_or("");
  };
  EXPECT_THAT(error({}), ::testing::HasSubstr("kvcanary::write: got 0 canary buffers, must be 1 to 4"));
  EXPECT_THAT(error(std::vector<kvcanary::WriteTarget<memory_space>>(5, {buffer})), ::testing::HasSubstr("got 5 canary buffers"));
  EXPECT_THAT(error({{buffer}, {buffer, KernelKind::HEAD_V_FULL}}),
              ::testing::HasSubstr("the canary buffers of targets 0 and 1 share memory, must be disjoint"));
  // Records 48 bytes apart in one allocation of 64-byte strides overlap by 16 bytes.
  Kokkos::View<std::int64_t*, memory_space> bytes("test::kv_records", 8 * 8 + 6);
  const auto at = [&](std::int64_t word) { return kvcanary::wrap_canary_buffer<memory_space>(bytes.data() + word, 8, 64); };
  EXPECT_THAT(error({{at(0)}, {at(6)}}), ::testing::HasSubstr("targets 0 and 1 share memory"));
  EXPECT_THAT(error({{at(6)}, {at(0)}}), ::testing::HasSubstr("targets 0 and 1 share memory"));
  EXPECT_THAT(error({{buffer}, {at(0)}, {at(2)}}), ::testing::HasSubstr("targets 1 and 2 share memory"));
  EXPECT_EQ(error({{at(0)}, {at(4)}}), "");  // 32 bytes apart: disjoint records
  EXPECT_EQ(kvcanary::download_violation_ring(space, ring).kernel_run_counter, 2);
}

}  // namespace kvcanary_test
