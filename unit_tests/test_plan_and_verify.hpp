// plan_and_verify() (SPEC-CANARY §5.1) on this backend: random head passes run by both routes (plan() then
// verify(), and plan_and_verify()) from copies of one state, each compared with the host reference (plan,
// then verify once per buffer): the same ring rows as multisets, counts and counters, the same WritePlan,
// scalars and status, and the VerifyPlan's verify arrays left as they were (poisoned) by the fused route.
// Then a pinned case, and the host errors thrown before any launch.

#include "test_canary_cases.hpp"
#include "test_canary_support.hpp"
#include "test_random_cases.hpp"

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/stages/plan_and_verify.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>

#include <random>

namespace kvcanary_test {

// A head pass's state on the host: the plan's inputs and starting outputs, the buffers and the ring.
struct HeadPassCase {
  Inputs inputs;
  Outputs start;  // the plan arrays before the call (poisoned)
  std::vector<Buffer> buffers;
  std::vector<KernelKind> kinds;
  std::vector<RealKv> real_kvs;
  Ring ring;
  kvcanary::VerifyOptions options;
};

struct HeadPassResult {
  Outputs plan;
  Ring ring;
};

// A head pass's state on the device, uploaded from a case: the plan's arrays, the targets and the ring.
template <class ExecSpace>
struct DeviceHeadPass {
  using Memory = typename ExecSpace::memory_space;
  ExecSpace space;
  kvcanary::VerifyPlan<Memory> verify_plan;
  kvcanary::WritePlan<Memory> write_plan;
  kvcanary::PlanStatus<Memory> status;
  kvcanary::PlanWorkspace<Memory> workspace;
  kvcanary::PlanInputs<Memory> inputs;
  std::vector<kvcanary::VerifyTarget<Memory>> targets;
  kvcanary::ViolationRing<Memory> ring;

  DeviceHeadPass(const HeadPassCase& c, std::int64_t stride_bytes)
      : verify_plan(kvcanary::allocate_verify_plan(space, static_cast<std::int64_t>(c.start.verify_slot_indices.size()),
                                                   c.start.verify_identities.has_value())),
        write_plan(kvcanary::allocate_write_plan(space,
                                                 static_cast<std::int64_t>(c.start.write_seed_slot_indices.size()),
                                                 c.start.write_identities.has_value())),
        status(kvcanary::allocate_plan_status(space)),
        workspace(kvcanary::allocate_plan_workspace(space, batch_size(c.inputs))),
        inputs(kvcanary::upload_inputs(space, c.inputs)),
        ring(kvcanary::upload_violation_ring(space, c.ring)) {
    kvcanary::upload_outputs(space, c.start, verify_plan, write_plan, status);
    for (std::size_t t = 0; t < c.buffers.size(); ++t)
      targets.push_back({kvcanary::upload_canary_buffer(space, c.buffers[t], stride_bytes), c.kinds[t],
                         kvcanary::upload_real_kv(space, c.real_kvs[t])});
  }

  HeadPassResult download(const HeadPassCase& c) const {
    HeadPassResult result{c.start, {}};
    kvcanary::download_outputs(space, verify_plan, write_plan, status, result.plan);
    result.ring = kvcanary::download_violation_ring(space, ring);
    return result;
  }
};

// One head pass on the backend, by plan() then verify() or by plan_and_verify(), from the case's state. On
// CUDA the fused route's algorithms pick its kernels: by default the persistent plan checking each entry
// where it makes it; with c.options.algorithm Portable the persistent plan's offsets, then verify[from_inputs];
// with the plan's algorithm Portable the offsets scan, then verify[from_inputs] (the host backends' route).
template <class ExecSpace>
HeadPassResult run_head_pass(const HeadPassCase& c, bool fused, std::int64_t stride_bytes = kvcanary::kRecordBytes,
                             kvcanary::EntriesAlgorithm algorithm = kvcanary::EntriesAlgorithm::Default) {
  const DeviceHeadPass<ExecSpace> d(c, stride_bytes);
  if (fused) {
    kvcanary::PlanOptions plan_options;
    plan_options.algorithm = algorithm;
    kvcanary::plan_and_verify(d.space, d.inputs, d.verify_plan, d.write_plan, d.status, d.workspace, d.targets, d.ring,
                              plan_options, c.options);
  } else {
    kvcanary::plan(d.space, d.inputs, d.verify_plan, d.write_plan, d.status, d.workspace);
    kvcanary::verify(d.space, d.verify_plan, d.targets, d.ring, c.options);
  }
  return d.download(c);
}

// The reference's plan, then its verify of each buffer in order into `ring`.
inline Outputs reference_head_pass(const HeadPassCase& c, Ring& ring) {
  Outputs plan = c.start;
  kvcanary::reference::plan(c.inputs, plan);
  for (std::size_t t = 0; t < c.buffers.size(); ++t)
    kvcanary::reference::verify(plan, c.buffers[t], c.kinds[t], c.real_kvs[t], c.options.check_expected_token,
                                c.options.checks, ring);
  return plan;
}

// The reference's head pass, and its ring again with room for every row it reports (`all`: what same_ring
// judges an overflowing ring's kept rows by).
struct ReferenceHeadPass {
  Outputs plan;
  Ring ring;
  Ring all;
};

inline ReferenceHeadPass reference_with_every_row(const HeadPassCase& c) {
  ReferenceHeadPass r{{}, c.ring, c.ring};
  r.plan = reference_head_pass(c, r.ring);
  r.all.capacity = r.ring.count + 1;
  reference_head_pass(c, r.all);
  return r;
}

// A route that checks the entries where it makes them (SPEC-CANARY §5.1) against the reference: the verify
// arrays as they started, everything else the reference's.
inline void expect_checked_where_made(const HeadPassResult& got, const HeadPassCase& c,
                                      const ReferenceHeadPass& reference, const char* route) {
  EXPECT_EQ(got.plan.verify_slot_indices, c.start.verify_slot_indices) << route;
  EXPECT_EQ(got.plan.verify_expected_tokens, c.start.verify_expected_tokens) << route;
  EXPECT_EQ(got.plan.verify_expected_positions, c.start.verify_expected_positions) << route;
  EXPECT_EQ(got.plan.verify_prev_slot_indices, c.start.verify_prev_slot_indices) << route;
  EXPECT_EQ(got.plan.verify_identities, c.start.verify_identities) << route;
  Outputs rest = got.plan;
  rest.verify_slot_indices = reference.plan.verify_slot_indices;
  rest.verify_expected_tokens = reference.plan.verify_expected_tokens;
  rest.verify_expected_positions = reference.plan.verify_expected_positions;
  rest.verify_prev_slot_indices = reference.plan.verify_prev_slot_indices;
  rest.verify_identities = reference.plan.verify_identities;
  EXPECT_TRUE(same_plan(rest, reference.plan)) << route;  // write_offsets whole: [bs], then zeros
  EXPECT_TRUE(same_ring(got.ring, reference.ring, reference.all)) << route;
}

// Both routes against the reference; returns the fused route's result.
template <class ExecSpace>
HeadPassResult expect_both_routes_match(const HeadPassCase& c, std::int64_t stride_bytes = kvcanary::kRecordBytes,
                                        kvcanary::EntriesAlgorithm algorithm = kvcanary::EntriesAlgorithm::Default) {
  const ReferenceHeadPass reference = reference_with_every_row(c);
  const HeadPassResult plain = run_head_pass<ExecSpace>(c, false, stride_bytes);
  EXPECT_TRUE(same_plan(plain.plan, reference.plan)) << "plan() then verify()";
  EXPECT_TRUE(same_ring(plain.ring, reference.ring, reference.all)) << "plan() then verify()";
  const HeadPassResult fused = run_head_pass<ExecSpace>(c, true, stride_bytes, algorithm);
  expect_checked_where_made(fused, c, reference, "plan_and_verify()");
  return fused;
}

class PlanAndVerify : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  std::mt19937_64 rng{20261205};

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  }
  bool coin(int one_in) { return uniform(0, one_in - 1) == 0; }

  static HeadPassCase with_outputs(Inputs in, const Capacities& caps) {
    HeadPassCase c;
    c.start = poisoned(caps);
    if (in.req_identities) {
      c.start.verify_identities = Int64s(static_cast<std::size_t>(caps.verify), kPoison);
      c.start.write_identities = Int64s(static_cast<std::size_t>(caps.write), kPoison);
    }
    c.inputs = std::move(in);
    return c;
  }

  // Records that pass some of the plan's entries (the reference plan's, in order, so that a chain link
  // names its predecessor as stamped), FREED records and garbage around them.
  void stamp_some_entries(HeadPassCase& c, Buffer& buffer) {
    Outputs plan = c.start;
    kvcanary::reference::plan(c.inputs, plan);
    if (plan.enable == 0) return;
    const auto n = static_cast<std::int64_t>(buffer.size());
    for (std::int32_t i = 0; i < plan.verify_num_valid; ++i) {
      const auto e = static_cast<std::size_t>(i);
      const std::int64_t slot = plan.verify_slot_indices[e], prev = plan.verify_prev_slot_indices[e];
      if (slot <= 0 || slot >= n || prev >= n || coin(3)) continue;
      Record& r = buffer[static_cast<std::size_t>(slot)];
      const std::int64_t mask =
          plan.verify_identities ? kvcanary::Impl::identity_mask((*plan.verify_identities)[e]) : 0;
      const std::int64_t expected = plan.verify_expected_tokens[e];
      r.token = expected >= 0 ? expected : uniform(0, 1000);
      r.position = plan.verify_expected_positions[e];
      r.prev_hash = prev > 0 ? (kvcanary::Impl::record_hash(buffer[static_cast<std::size_t>(prev)].prev_hash,
                                                            buffer[static_cast<std::size_t>(prev)].token,
                                                            buffer[static_cast<std::size_t>(prev)].position) ^
                                mask)
                             : uniform(INT64_MIN, INT64_MAX);
      r.real_kv_hash = 0;
      if (coin(12)) r.token = kvcanary::kFreedToken;
    }
  }
};

// ~200 random head passes: bad rows, padding, sliding windows, LUTs, expected-token pools, capacities
// exact, short (enable 0) and loose, identities, real-KV sources, slot 0, FREED records, one to four
// buffers, both checks on and off, rings that overflow; batches past 256 rows now and then (CUDA's two-launch
// plan), and the fused route's algorithms taking turns (CUDA's three fused routes).
TEST_F(PlanAndVerify, RandomHeadPassesMatchPlanThenVerify) {
  CaseGenerator cases(0x5EC51);
  CanaryCaseGenerator canary(0x5EC52);
  std::int64_t rows = 0, entries = 0, disabled = 0, identities = 0, real_kv = 0;
  for (int k = 0; k < 200; ++k) {
    SCOPED_TRACE("head pass case " + std::to_string(k));
    RandomCase r = cases.next(coin(25) ? uniform(257, 300) : coin(10) ? uniform(17, 80) : uniform(0, 16));
    Inputs& in = r.inputs;
    const std::int64_t bs = batch_size(in);
    for (std::int32_t& v : in.req_to_token)
      if (coin(25)) v = 0;  // the padding slot in a live row (SPEC-CANARY §11.3)
    if (coin(3)) {
      Int64s ids;
      for (std::int64_t b = 0; b < bs; ++b)
        ids.push_back(coin(3) ? 0 : coin(2) ? uniform(1, 3) : uniform(INT64_MIN, INT64_MAX));
      in.req_identities = ids;
      ++identities;
    }
    HeadPassCase c = with_outputs(in, r.capacities);
    const std::int64_t slots = uniform(1, in.max_reqs * in.max_seq_len + 2);
    const int buffers = static_cast<int>(coin(3) ? uniform(1, kvcanary::kMaxVerifyTargets) : 2);
    for (int t = 0; t < buffers; ++t) {
      Buffer buffer = canary.buffer(slots);
      stamp_some_entries(c, buffer);
      c.buffers.push_back(std::move(buffer));
      c.kinds.push_back(static_cast<KernelKind>(uniform(0, 11)));
      c.real_kvs.push_back(canary.real_kv(slots));
      real_kv += c.real_kvs.back().sources.empty() ? 0 : 1;
    }
    c.ring = empty_ring(coin(5) ? uniform(0, 3) : uniform(4, 256));
    c.ring.kernel_run_counter = uniform(0, 5);
    c.ring.slot_run_counter = uniform(0, 50);
    c.options.check_expected_token = !coin(4);
    c.options.checks = kvcanary::VerifyChecks{!coin(3), !coin(3)};
    if (k % 3 == 2) c.options.algorithm = kvcanary::CanaryAlgorithm::Portable;
    const HeadPassResult fused = expect_both_routes_match<ExecSpace>(
        c, kvcanary::kRecordBytes,
        k % 3 == 1 ? kvcanary::EntriesAlgorithm::Portable : kvcanary::EntriesAlgorithm::Default);
    if (HasFailure()) return;
    rows += fused.ring.count;
    entries += fused.ring.slot_run_counter - c.ring.slot_run_counter;
    disabled += fused.plan.enable == 0 ? 1 : 0;
  }
  // Cases that can fail: rows reported and entries passed, overflowing plans, identities, real KV.
  EXPECT_GT(rows, 0);
  EXPECT_GT(entries, rows) << "no entry passed its checks";
  EXPECT_GT(disabled, 0);
  EXPECT_GT(identities, 0);
  EXPECT_GT(real_kv, 0);
}

// A pinned pass: two rows of three and two entries over K and V; the verify arrays (poisoned) stay as they
// were while the rows are reported, and with enable 0 (capacity one short) nothing is checked.
TEST_F(PlanAndVerify, VerifyArraysStayPoisonedWhileEntriesAreChecked) {
  Inputs in = linear(3, 4);
  for (std::int32_t& v : in.req_to_token) v += 1;
  set_batch(in, {1, 2}, {3, 2}, {1, 1});
  in.req_identities = Int64s{0, 9};
  HeadPassCase c = with_outputs(in, {8, 2});
  c.buffers = {Buffer(13), Buffer(13)};  // never written: every entry fails
  c.kinds = {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL};
  c.real_kvs = {RealKv{}, RealKv{}};
  c.ring = empty_ring(32);
  const HeadPassResult fused = expect_both_routes_match<ExecSpace>(c);
  EXPECT_EQ(fused.plan.verify_num_valid, 5);
  EXPECT_EQ(fused.plan.verify_slot_indices, Int64s(8, kPoison));
  EXPECT_EQ(*fused.plan.verify_identities, Int64s(8, kPoison));
  EXPECT_EQ(*fused.plan.write_identities, (Int64s{0, 9}));
  EXPECT_EQ(fused.ring.count, 10);
  EXPECT_EQ(fused.ring.kernel_run_counter, 2);
  EXPECT_EQ(fused.ring.slot_run_counter, 10);

  HeadPassCase over = with_outputs(in, {4, 2});
  over.buffers = c.buffers;
  over.kinds = c.kinds;
  over.real_kvs = c.real_kvs;
  over.ring = empty_ring(32);
  const HeadPassResult disabled = expect_both_routes_match<ExecSpace>(over);
  EXPECT_EQ(disabled.plan.enable, 0);
  EXPECT_EQ(disabled.ring.count, 0);
  EXPECT_EQ(disabled.ring.kernel_run_counter, 2);
  EXPECT_EQ(disabled.ring.slot_run_counter, 0);
}

// More entries than one wave of the verify launch (a GPU's resident threads: ~270,000 on an H100 or H200; 4
// work items a host thread), under a capacity more than three times the entries, as an engine's derived one:
// each launched item checks entries a wave apart (a run of them on the host) and stops at the first past the
// plan's total. Both routes against the reference; some records stamped, the rest reported.
TEST_F(PlanAndVerify, EntriesPastOneLaunchWaveUnderAFarLargerCapacity) {
  Inputs in = linear(5, 100000);
  set_batch(in, {1, 2, 3, 4}, {100000, 99999, 70001, 40000}, {0, 0, 0, 0});
  HeadPassCase c = with_outputs(in, {std::int64_t{1} << 20, 4});
  Buffer buffer(5 * 100000);
  stamp_some_entries(c, buffer);
  c.buffers = {buffer, buffer};
  c.kinds = {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL};
  c.real_kvs = {RealKv{}, RealKv{}};
  c.ring = empty_ring(64);
  const HeadPassResult fused = expect_both_routes_match<ExecSpace>(c);
  EXPECT_EQ(fused.plan.enable, 1);
  EXPECT_EQ(fused.plan.verify_num_valid, 310000);
  EXPECT_EQ(fused.ring.slot_run_counter, 2 * 310000);
  EXPECT_GT(fused.ring.count, 0);
  EXPECT_LT(fused.ring.count, 2 * 310000);
}

// The host's bound on the verify total (DeviceInputs::verify_total_bound(): the batch's rows of max_seq_len, or of
// the window) sizes the plan's grid and ends the verify launch below a far larger capacity; a batch that reaches
// it exactly, every row full (every window full), has every entry checked: none is stamped, so each is reported.
TEST_F(PlanAndVerify, BatchesThatFillTheHostBoundOnTheTotalHaveEveryEntryChecked) {
  for (const int window : {0, 64}) {
    SCOPED_TRACE("swa_window_size " + std::to_string(window));
    Inputs in = linear(4, 300);
    set_batch(in, {1, 2, 3}, {300, 300, 300}, {0, 0, 0});
    if (window > 0) {
      in.full_to_swa_index_mapping = shifted_lut(1200, 0);
      in.swa_window_size = window;
    }
    HeadPassCase c = with_outputs(in, {3 * 4 * 300, 3});
    c.buffers = {Buffer(1200)};  // never written: every entry fails
    c.kinds = {KernelKind::HEAD_K_FULL};
    c.real_kvs = {RealKv{}};
    c.ring = empty_ring(4);
    const HeadPassResult fused = expect_both_routes_match<ExecSpace>(c);
    const std::int64_t total = 3 * (window > 0 ? window : 300);
    EXPECT_EQ(fused.plan.verify_num_valid, total);
    EXPECT_EQ(fused.ring.slot_run_counter, total);
    EXPECT_EQ(fused.ring.count, total);
  }
}

// Every host rule of plan() and verify() throws std::invalid_argument before any launch: the ring's
// counters and the plan's outputs stay as they were.
TEST_F(PlanAndVerify, HostErrorsThrowBeforeAnyLaunch) {
  using Memory = ExecSpace::memory_space;
  const ExecSpace space;
  Inputs host = linear(3, 4);
  set_batch(host, {1, 2}, {3, 2}, {1, 1});
  const auto inputs = kvcanary::upload_inputs(space, host);
  const Outputs start = poisoned({8, 2});
  auto verify_plan = kvcanary::allocate_verify_plan(space, 8, false);
  const auto write_plan = kvcanary::allocate_write_plan(space, 2, false);
  const auto status = kvcanary::allocate_plan_status(space);
  const auto workspace = kvcanary::allocate_plan_workspace(space, 2);
  kvcanary::upload_outputs(space, start, verify_plan, write_plan, status);
  const auto buffer = kvcanary::upload_canary_buffer(space, Buffer(13));
  const std::vector<kvcanary::VerifyTarget<Memory>> one{{buffer, KernelKind::HEAD_K_FULL, {}}};
  const auto ring = kvcanary::upload_violation_ring(space, empty_ring(4));
  const auto call = [&](const kvcanary::PlanInputs<Memory>& in, const kvcanary::VerifyPlan<Memory>& vp,
                        const std::vector<kvcanary::VerifyTarget<Memory>>& targets,
                        const kvcanary::ViolationRing<Memory>& r) {
    return invalid_argument_message(
        [&] { kvcanary::plan_and_verify(space, in, vp, write_plan, status, workspace, targets, r); });
  };
  EXPECT_THAT(call(inputs, verify_plan, {}, ring).value_or(""), ::testing::HasSubstr("got 0 canary buffers"));
  EXPECT_THAT(call(inputs, verify_plan, std::vector<kvcanary::VerifyTarget<Memory>>(5, one[0]), ring).value_or(""),
              ::testing::HasSubstr("kvcanary::plan_and_verify"));
  kvcanary::ViolationRing<Memory> no_count = ring;
  no_count.count = {};
  EXPECT_THAT(call(inputs, verify_plan, one, no_count).value_or(""), ::testing::HasSubstr("count or run counters"));
  auto short_tokens = verify_plan;
  short_tokens.verify_expected_tokens = decltype(short_tokens.verify_expected_tokens)("short", 7);
  EXPECT_THAT(call(inputs, short_tokens, one, ring).value_or(""), ::testing::HasSubstr("the four verify arrays"));
  Inputs with_ids = host;
  with_ids.req_identities = Int64s{1, 2};  // the plans hold no identity arrays
  EXPECT_THAT(call(kvcanary::upload_inputs(space, with_ids), verify_plan, one, ring).value_or(""),
              ::testing::HasSubstr("req_identities"));
  auto small_workspace = kvcanary::allocate_plan_workspace(space, 0);
  EXPECT_TRUE(invalid_argument_message([&] {
                kvcanary::plan_and_verify(space, inputs, verify_plan, write_plan, status, small_workspace, one, ring);
              }).has_value());

  const Ring after = kvcanary::download_violation_ring(space, ring);
  EXPECT_EQ(after.kernel_run_counter, 0);
  EXPECT_EQ(after.slot_run_counter, 0);
  Outputs untouched = start;
  kvcanary::download_outputs(space, verify_plan, write_plan, status, untouched);
  EXPECT_TRUE(same_plan(untouched, start));
}

}  // namespace kvcanary_test
