// kvcanary::Canary (docs/runtime.md) against the host reference run on the same steps: every pass of
// every group, the asynchronous pump (no row lost or duplicated across steps, ring overflow, flush), the
// health check, the report modes, and the warnings.

#include "runtime_harness.hpp"

#include <memory>

namespace kvcanary_test {

using kvcanary::GroupKind;
using kvcanary_runtime_test::EngineShape;
using kvcanary_runtime_test::RuntimeHarness;

class Runtime : public ::testing::Test {
 protected:
  using Space = KVCANARY_TEST_EXECSPACE;
  using Harness = RuntimeHarness<Space>;

  // A mailbox route's quiet config with or without a tail pass (re-stamping real-KV fingerprints), and the
  // shape that goes with it.
  static std::pair<EngineShape, kvcanary::CanaryConfig> mailbox_setup(kvcanary::PumpSnapshot route, bool tail) {
    EngineShape shape;
    shape.real_kv = tail;
    auto config = quiet();
    config.pump_snapshot = route;
    config.tail_pass = tail;
    config.real_kv_mode = tail ? kvcanary::RealKvMode::All : kvcanary::RealKvMode::None;
    return {shape, config};
  }

  static kvcanary::CanaryConfig quiet(std::vector<std::string>* lines = nullptr) {
    kvcanary::CanaryConfig config;
    config.report_mode = kvcanary::ReportMode::Log;
    config.keep_never_written = true;  // every row, as the reference ring holds them
    config.ring_capacity = 1 << 14;
    config.sink = [lines](const std::string& line) {
      if (lines) lines->push_back(line);
    };
    return config;
  }

  static void expect_overflowing_ring_reported_once(kvcanary::PumpSnapshot route, std::int64_t capacity, int steps,
                                                    std::uint64_t seed);

  // Raise mode, step 3 replayed without the canary: the step whose end_step() throws CanaryNotRunningError
  // (0: none in 25 steps).
  static int step_raising_not_running(const kvcanary::CanaryConfig& config) {
    Harness raising(EngineShape{}, config);
    for (int s = 1; s <= 25; ++s) {
      try {
        raising.step(false, false, s == 3);
      } catch (const kvcanary::CanaryNotRunningError&) {
        return s;
      } catch (const kvcanary::ViolationError&) {
        // the skipped step's tokens were never stamped: the next heads see them (rows, not the health check)
      }
    }
    return 0;
  }

  // Runs `steps` steps, flushes, and compares every group's rows (as multisets) and buffers.
  static void run_and_compare(Harness& h, int steps, int sweep_every, int corrupt_every) {
    for (int s = 1; s <= steps; ++s)
      h.step(sweep_every > 0 && s % sweep_every == 0, corrupt_every > 0 && s % corrupt_every == 0);
    h.record(h.canary->flush());
    for (int g = 0; g < 3; ++g) {
      if (!h.ref[g].on) continue;
      SCOPED_TRACE(std::string("group ") + kvcanary::group_kind_name(static_cast<GroupKind>(g)));
      EXPECT_EQ(Harness::sorted(h.reported[g]), Harness::sorted(h.ref[g].ring.rows));
      const auto kind = static_cast<GroupKind>(g);
      EXPECT_TRUE(kvcanary::download_canary_buffer(h.space, h.canary->k_buffer(kind)) == h.ref[g].k);
      EXPECT_TRUE(kvcanary::download_canary_buffer(h.space, h.canary->v_buffer(kind)) == h.ref[g].v);
    }
  }

  // Every group (with real-KV sources, a tail pass and sweeps), 40 steps with corruptions, against the
  // reference, the health check quiet throughout.
  static EngineShape every_group() {
    EngineShape shape;
    shape.swa = shape.draft = shape.real_kv = true;
    return shape;
  }
  static kvcanary::CanaryConfig every_group_config(kvcanary::PumpSnapshot route, kvcanary::RealKvMode real_kv) {
    auto config = quiet();
    config.tail_pass = true;
    config.real_kv_mode = real_kv;
    config.sweep_interval = 4;
    config.pump_snapshot = route;
    config.health_check_every_n_steps = 7;
    return config;
  }
  static void expect_every_group_matches(Harness& h) {
    run_and_compare(h, 40, 4, 9);
    EXPECT_FALSE(h.ref[0].ring.rows.empty());
    for (const auto& report : h.reports) EXPECT_TRUE(report.health_errors.empty()) << "step " << report.step;
  }
};

TEST_F(Runtime, CapacitiesDerivedFromTheEngine) {
  kvcanary::CanaryConfig config;
  config.dimensions = {1000, 0, 64, 512, 256, 0};
  auto c = kvcanary::derive_capacities(config);
  EXPECT_EQ(c.verify_capacity, 3000);
  EXPECT_EQ(c.write_req_capacity, 256);
  EXPECT_EQ(c.sweep_req_capacity, 64);
  config.capacities.verify_capacity = 77;
  config.dimensions.swa_pool_slots = 2000;
  c = kvcanary::derive_capacities(config);
  EXPECT_EQ(c.verify_capacity, 77);
  config.capacities.verify_capacity = -1;
  EXPECT_EQ(kvcanary::derive_capacities(config).verify_capacity, 6000);
  config.dimensions.pool_slots = -4;
  EXPECT_THROW(kvcanary::derive_capacities(config), std::invalid_argument);
  config.dimensions.pool_slots = 4;
  config.capacities.write_req_capacity = 0;
  EXPECT_THROW(kvcanary::derive_capacities(config), std::invalid_argument);
}

TEST_F(Runtime, BadConfigsThrowBeforeAllocating) {
  EngineShape shape;
  auto config = quiet();
  config.real_kv_mode = kvcanary::RealKvMode::All;  // without the tail
  EXPECT_THROW(Harness(shape, config), std::invalid_argument);
  config = quiet();
  config.ring_capacity = -1;
  EXPECT_THROW(Harness(shape, config), std::invalid_argument);
  config = quiet();
  config.health_check_every_n_steps = -1;
  EXPECT_THROW(Harness(shape, config), std::invalid_argument);
  config = quiet();
  config.kv_records = static_cast<kvcanary::KvRecords>(3);
  try {
    Harness h(shape, config);
    ADD_FAILURE() << "an unknown kv_records was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kv_records is 3, must be 0 (default), 1 (separate) or 2 (interleaved)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Runtime, AConfigTooLargeForTheHostThrowsInsteadOfAllocating) {
  auto config = quiet();
  config.ring_capacity = std::int64_t(1) << 40;  // within the config's bounds: 2^47 bytes of ring rows
  if (std::is_same<Space::memory_space, Kokkos::HostSpace>::value) {
    try {
      Harness h(EngineShape{}, config);
      ADD_FAILURE() << "a Canary needing 2^47 bytes of host memory was built";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("bytes of host memory (canary records"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ring rows 140737488355328"), std::string::npos) << e.what();
    }
  } else {
    EXPECT_ANY_THROW(Harness(EngineShape{}, config));  // the device allocation fails (an exception from Kokkos)
  }
  const auto small = kvcanary::group_footprint(quiet(), kvcanary::Capacities{30, 4, 4}, 10, true);
  EXPECT_EQ(small.records, 2 * 10 * 32);
  EXPECT_EQ(small.plans, 30 * 4 * 8 + (4 * 2 + 1) * 8 * 2);
  EXPECT_EQ(small.rings, 2 * (1 << 14) * 8 * 8);
  EXPECT_EQ(kvcanary::group_footprint(quiet(), kvcanary::Capacities{30, 4, 4}, 10, false).records, 0);
}

TEST_F(Runtime, HeadPassesMatchTheReference) {
  Harness h(EngineShape{}, quiet());
  run_and_compare(h, 60, 0, 7);
  EXPECT_FALSE(h.ref[0].ring.rows.empty());  // the corruptions were seen
}

TEST_F(Runtime, EveryGroupTailAndSweepMatchTheReference) {
  EngineShape shape;
  shape.swa = shape.draft = shape.real_kv = true;
  auto config = quiet();
  config.tail_pass = true;
  config.real_kv_mode = kvcanary::RealKvMode::All;
  config.verify_token_assert = true;
  config.sweep_interval = 4;
  Harness h(shape, config, 7);
  run_and_compare(h, 60, 4, 9);
  EXPECT_EQ(h.canary->sweeps(), 15);
  EXPECT_FALSE(h.ref[0].ring.rows.empty());
}

// Every head verify route (HeadVerify, SPEC-CANARY §5.1) on every group, over sweeps, corruptions, the
// expected-token pool and a verify capacity some steps overflow (a disabled head pass): each matches the
// reference, and the two report the same violations, warnings and health step by step. With a tail pass
// the groups with real-KV sources keep the plan route (after_forward() reads the stored entries).
TEST_F(Runtime, HeadVerifyRoutesMatchTheReferenceAndEachOther) {
  for (const bool tail : {false, true}) {
    std::vector<std::vector<std::int64_t>> counts;
    std::vector<std::vector<std::string>> warnings;
    for (const auto route : {kvcanary::HeadVerify::FromPlan, kvcanary::HeadVerify::FromInputs,
                             kvcanary::HeadVerify::FromInputsAfterPlan}) {
      SCOPED_TRACE(std::string(route == kvcanary::HeadVerify::FromPlan     ? "from plan"
                               : route == kvcanary::HeadVerify::FromInputs ? "from inputs"
                                                                           : "from inputs after the plan") +
                   (tail ? ", tail pass" : ""));
      EngineShape shape;
      shape.swa = shape.draft = true;
      shape.real_kv = tail;
      auto config = quiet();
      config.head_verify = route;
      config.verify_token_assert = true;
      config.sweep_interval = 4;
      config.health_check_every_n_steps = 5;
      config.capacities.verify_capacity = 150;  // long prefixes overflow it: enable 0, nothing checked
      if (tail) {
        config.tail_pass = true;
        config.real_kv_mode = kvcanary::RealKvMode::Partial;
      }
      Harness h(shape, config, 11);
      run_and_compare(h, 40, 4, 6);
      counts.emplace_back();
      warnings.emplace_back();
      for (const auto& report : h.reports) {
        EXPECT_TRUE(report.health_errors.empty()) << "step " << report.step;
        counts.back().push_back(report.violations.count);
        for (const auto& w : report.warnings) warnings.back().push_back(w);
      }
      EXPECT_FALSE(h.ref[0].ring.rows.empty());  // the corruptions were seen
    }
    for (std::size_t r = 1; r < counts.size(); ++r) {
      EXPECT_EQ(counts[0], counts[r]) << "route " << r;
      EXPECT_EQ(warnings[0], warnings[r]) << "route " << r;
    }
    if (!tail) {
      EXPECT_FALSE(warnings[0].empty()) << "no step overflowed the verify capacity";
    }
  }
}

// The snapshot routes (PumpSnapshot): the side-stream copies, the one kernel, the in-graph mailbox written
// by the forward's last pass or by a kernel beside the forward.
constexpr kvcanary::PumpSnapshot kPumpRoutes[] = {
    kvcanary::PumpSnapshot::SideStreamCopies, kvcanary::PumpSnapshot::Kernel, kvcanary::PumpSnapshot::InGraph,
    kvcanary::PumpSnapshot::BesideForward, kvcanary::PumpSnapshot::WithNextPlan};
// The three that write the mailbox.
constexpr kvcanary::PumpSnapshot kMailboxRoutes[] = {
    kvcanary::PumpSnapshot::InGraph, kvcanary::PumpSnapshot::BesideForward, kvcanary::PumpSnapshot::WithNextPlan};

// How many forwards a route's newest snapshot trails the device: the next plan (CUDA's Default) takes forward N's
// at forward N + 1.
inline int mail_lag(kvcanary::PumpSnapshot route) {
  return kvcanary::Impl::resolve<KVCANARY_TEST_EXECSPACE>(route) == kvcanary::PumpSnapshot::WithNextPlan ? 1 : 0;
}

inline const char* route_name(kvcanary::PumpSnapshot route) {
  return route == kvcanary::PumpSnapshot::Kernel          ? "kernel route"
         : route == kvcanary::PumpSnapshot::InGraph       ? "in-graph route"
         : route == kvcanary::PumpSnapshot::BesideForward ? "beside-forward route"
         : route == kvcanary::PumpSnapshot::WithNextPlan  ? "next-plan route"
                                                          : "side-stream route";
}

TEST_F(Runtime, PumpReportsEachRowOnceOneStepLater) {
  for (const auto route : kPumpRoutes) {
    SCOPED_TRACE(route_name(route));
    auto config = quiet();
    config.pump_snapshot = route;
    Harness h(EngineShape{}, config);
    for (int s = 1; s <= 20; ++s) h.step(false, s == 10);
    // The corruption of step 10 is verified by step 11's head at the latest, and reported one step after
    // (the in-graph route: by the same step's end_step()).
    std::int64_t first = -1;
    for (const auto& report : h.reports)
      if (!report.violations.rows.empty() && first < 0) first = report.step;
    EXPECT_GE(first, 10);
    EXPECT_LE(first, 11);
    h.record(h.canary->flush());
    EXPECT_EQ(Harness::sorted(h.reported[0]), Harness::sorted(h.ref[0].ring.rows));
  }
}

// A ring of `capacity` rows that overflows over `steps` steps with violations every step, pumped 3 rows a
// step (fewer than a step's violations: the pump catches up over steps): exactly the ring's rows are
// reported, each once (which violations won the rows is the device's order), and the rest counted as lost.
inline void Runtime::expect_overflowing_ring_reported_once(kvcanary::PumpSnapshot route, std::int64_t capacity,
                                                           int steps, std::uint64_t seed) {
  SCOPED_TRACE(route_name(route));
  auto config = quiet();
  config.ring_capacity = capacity;
  config.pump_rows_per_step = 3;
  config.pump_snapshot = route;
  Harness h(EngineShape{}, config, seed);
  std::int64_t newly_lost = 0;
  for (int s = 1; s <= steps; ++s) {
    h.step(false, true);
    newly_lost += h.reports.back().violations.newly_lost;
  }
  h.record(h.canary->flush());
  newly_lost += h.reports.back().violations.newly_lost;
  const std::int64_t count = h.ref[0].ring.count;
  ASSERT_GT(count, capacity);
  ASSERT_EQ(static_cast<std::int64_t>(h.reported[0].size()), capacity);
  auto expected = Harness::sorted(h.ref[0].ring.rows);
  for (const auto& row : h.reported[0]) {  // each a row of the reference, none twice
    const auto it = std::find(expected.begin(), expected.end(), row);
    ASSERT_NE(it, expected.end());
    expected.erase(it);
  }
  EXPECT_EQ(newly_lost, count - capacity);
  EXPECT_EQ(h.reports.back().violations.count, count);
  EXPECT_TRUE(h.reports.back().violations.overflowed);
}

TEST_F(Runtime, PumpWindowAndRingOverflowLoseNothingTheRingKept) {
  for (const auto route : kPumpRoutes) expect_overflowing_ring_reported_once(route, 10, 30, 1);
}

// A count read past 2^63 + capacity (-1 as int64: its loss, too, is past 2^63) is a full ring that overflowed,
// as make_report() reads it, not a negative loss: both compare the count as uint64.
TEST_F(Runtime, ACountPastInt64IsAnOverflowAsMakeReportReadsIt) {
  constexpr std::int64_t kCapacity = 8;
  auto config = quiet();
  config.ring_capacity = kCapacity;
  Harness h(EngineShape{}, config);
  h.step(false, false);
  h.record(h.canary->flush());
  const std::int64_t count = -1;
  Kokkos::deep_copy(h.canary->ring(kvcanary::GroupKind::Target).count, count);
  h.record(h.canary->flush());
  kvcanary::reference::ViolationRing ring;
  ring.count = count;
  ring.capacity = kCapacity;
  ring.rows.resize(kCapacity);  // the clean run's rows: never written
  const auto expected = kvcanary::make_report(ring, 0);
  const auto& got = h.reports.back();
  EXPECT_TRUE(expected.overflowed);
  EXPECT_EQ(got.violations.overflowed, expected.overflowed);
  EXPECT_EQ(got.violations.lost_to_overflow, expected.lost_to_overflow);
  EXPECT_EQ(got.violations.newly_lost, expected.newly_lost);
  EXPECT_EQ(got.overflowed_groups, std::vector<kvcanary::GroupKind>{kvcanary::GroupKind::Target});
}

TEST_F(Runtime, KernelAndMailboxRoutesMatchTheReferenceOnEveryGroup) {
  for (const auto route : {kvcanary::PumpSnapshot::Kernel, kvcanary::PumpSnapshot::InGraph,
                           kvcanary::PumpSnapshot::BesideForward, kvcanary::PumpSnapshot::WithNextPlan}) {
    SCOPED_TRACE(route_name(route));
    Harness h(every_group(), every_group_config(route, kvcanary::RealKvMode::Partial), 7);
    expect_every_group_matches(h);
  }
}

// KvRecords::Interleaved: each group's K and V records in one allocation, a slot's K then its V (stride 64):
// every pass, the pump and the buffers as with separate buffers.
TEST_F(Runtime, InterleavedKvRecordsMatchTheReferenceOnEveryGroup) {
  for (const auto route : {kvcanary::PumpSnapshot::SideStreamCopies, kvcanary::PumpSnapshot::InGraph}) {
    SCOPED_TRACE(route_name(route));
    auto config = every_group_config(route, kvcanary::RealKvMode::All);
    config.kv_records = kvcanary::KvRecords::Interleaved;
    Harness h(every_group(), config, 13);
    for (const auto kind : {GroupKind::Target, GroupKind::Swa, GroupKind::Draft}) {
      const auto& k = h.canary->k_buffer(kind);
      const auto& v = h.canary->v_buffer(kind);
      EXPECT_EQ(k.stride_bytes(), 64);
      EXPECT_EQ(v.stride_bytes(), 64);
      EXPECT_EQ(v.records.data(), k.records.data() + kvcanary::kRecordFields);
    }
    expect_every_group_matches(h);
  }
}

// ---- the mailbox routes (PumpSnapshot::InGraph, BesideForward): each forward's snapshot in a pinned mailbox ----

// One forward on both sides without its end_step() (an engine whose host runs ahead, or several forwards a step).
template <class Harness>
void forward_only(Harness& h, bool corrupt) {
  h.next_batch();
  h.upload_step();
  if (corrupt) h.corrupt_one();
  h.canary->before_forward(h.batch());
  h.reference_head();
  h.model_write();
  h.canary->after_forward(h.batch());
  h.reference_tail();
  h.engine_waits_for_tokens();
}

TEST_F(Runtime, InGraphLosesAndRepeatsNoRowWithViolationsEveryStep) {
  for (const auto route : kMailboxRoutes)
    for (const bool tail : {false, true}) {
      SCOPED_TRACE(route_name(route));
      SCOPED_TRACE(tail ? "a tail pass" : "no tail pass");
      auto [shape, config] = mailbox_setup(route, tail);
      config.pump_rows_per_step = 2;  // fewer than a step's rows: the cursor catches up over the steps
      config.health_check_every_n_steps = 5;
      Harness h(shape, config, 11);
      std::size_t previous = 0;
      for (int s = 1; s <= 80; ++s) {
        h.step(false, true);
        ASSERT_LE(h.reported[0].size() - previous, 2u) << "step " << s;  // at most one window a step
        previous = h.reported[0].size();
        ASSERT_TRUE(h.reports.back().health_errors.empty()) << "step " << s;
      }
      // A full window every step once the ring had rows (the cursor moves on), and still behind before the flush.
      EXPECT_GE(h.reported[0].size(), 2u * 75) << "of " << h.ref[0].ring.rows.size();
      ASSERT_LT(h.reported[0].size(), h.ref[0].ring.rows.size());
      h.record(h.canary->flush());
      EXPECT_EQ(Harness::sorted(h.reported[0]), Harness::sorted(h.ref[0].ring.rows));
      EXPECT_TRUE(h.reports.back().health_errors.empty());
    }
}

// A host more than the mailbox's slots behind (20 forwards, then one end_step()): the slots the device wrote
// again are gone, their rows are still in the ring, and the host copies them from there, each row once.
TEST_F(Runtime, InGraphHostFarBehindTakesTheLostSlotsRowsFromTheRing) {
  for (const auto route : kMailboxRoutes) {
    SCOPED_TRACE(route_name(route));
    auto config = quiet();
    config.pump_snapshot = route;
    config.pump_rows_per_step = 2;  // a full window each forward: the ring has more rows than the mailbox carries
    config.health_check_every_n_steps = 5;
    Harness h(EngineShape{}, config, 5);
    for (int s = 1; s <= 5; ++s) h.step();
    constexpr int kForwards = 20;
    static_assert(kForwards > kvcanary::Impl::MailboxLayout::kSlots, "more forwards than the mailbox holds");
    const std::size_t before = h.reported[0].size();
    for (int f = 0; f < kForwards; ++f) forward_only(h, true);
    h.record(h.canary->end_step(kForwards));
    EXPECT_TRUE(h.reports.back().health_errors.empty());
    EXPECT_EQ(h.reports.back().step, 6);
    // The windows the device mailed (two rows a forward once the ring holds them), the lost slots' too: more
    // than the slots still held. With the next plan, the last forward's snapshot is not taken yet.
    const std::size_t taken = h.reported[0].size() - before;
    EXPECT_GE(taken, 2u * (kForwards - 1 - mail_lag(route))) << "of " << h.ref[0].ring.rows.size();
    EXPECT_LE(taken, 2u * kForwards);
    for (int s = 0; s < 3; ++s) h.step(false, true);
    EXPECT_TRUE(h.reports.back().health_errors.empty());
    h.record(h.canary->flush());
    EXPECT_EQ(Harness::sorted(h.reported[0]), Harness::sorted(h.ref[0].ring.rows));
    EXPECT_TRUE(h.reports.back().health_errors.empty());
  }
}

TEST_F(Runtime, InGraphRingOverflowReportsTheKeptRowsOnce) {
  for (const auto route : kMailboxRoutes) expect_overflowing_ring_reported_once(route, 12, 40, 5);
}

// A clean run with sweeps, steps of two forwards and steps of none: the host's expectation of each forward
// matches the snapshot the device took at it.
// Beside the forward with a tail pass, each forward's snapshot holds the previous forward's tail.
TEST_F(Runtime, InGraphHealthCheckQuietOnACleanRunOfUnevenSteps) {
  for (const auto route : kMailboxRoutes)
    for (const bool tail : {false, true}) {
      SCOPED_TRACE(route_name(route));
      SCOPED_TRACE(tail ? "a tail pass" : "no tail pass");
      auto [shape, config] = mailbox_setup(route, tail);
      config.health_check_every_n_steps = 3;
      config.sweep_interval = 4;
      config.report_mode = kvcanary::ReportMode::Raise;
      Harness h(shape, config, 9);
      forward_only(h, false);  // a warmup forward before the first end_step(): not the host's
      std::vector<std::int64_t> step_of_forward;
      for (int s = 1; s <= 300; ++s) {
        const int forwards = s % 7 == 0 ? 0 : s % 5 == 0 ? 2 : 1;
        for (int f = 0; f < forwards; ++f) {
          forward_only(h, false);
          step_of_forward.push_back(s);
        }
        if (s % 4 == 0) h.sweep();
        h.record(h.canary->end_step(forwards));
        ASSERT_TRUE(h.reports.back().health_errors.empty()) << "step " << s;
        ASSERT_TRUE(h.reports.back().violations.rows.empty()) << "step " << s;
        // The host backends never trail: the newest forward's snapshot (the one before it with the next plan).
        const std::size_t newest = step_of_forward.size() - static_cast<std::size_t>(mail_lag(route));
        if (forwards > 0 && newest > 0) ASSERT_EQ(h.reports.back().step, step_of_forward[newest - 1]) << "step " << s;
      }
      h.record(h.canary->flush());
      EXPECT_TRUE(h.reports.back().health_errors.empty());
    }
}

TEST_F(Runtime, InGraphHealthCheckFiresOnceWhenAForwardSkipsTheCanary) {
  for (const auto route : kMailboxRoutes) {
    SCOPED_TRACE(route_name(route));
    std::vector<std::string> lines;
    auto config = quiet(&lines);
    config.pump_snapshot = route;
    config.health_check_every_n_steps = 10;
    Harness h(EngineShape{}, config);
    for (int s = 1; s <= 35; ++s) h.step(false, false, /*skip_canary=*/s == 15);
    h.record(h.canary->flush());
    std::vector<std::string> errors;
    for (const auto& report : h.reports)
      for (const auto& error : report.health_errors) errors.push_back(error);
    ASSERT_EQ(errors.size(), 1u);
    // The skipped forward took no snapshot: the snapshots trail the host's count by one from step 15 on. The
    // host backends allow no trail at a check; CUDA allows kLagSlack forwards there, and flush() says it exactly.
    // With the next plan, the check at step 20 reads forward 20's snapshot at step 21.
    constexpr std::int64_t kLagSlack = kvcanary::Impl::PumpLagSlack<Space>::value;
    const bool next_plan = route == kvcanary::PumpSnapshot::WithNextPlan;
    EXPECT_NE(
        errors[0].find(kLagSlack > 0 && next_plan ? "canary not running: at flush (step 35) 1 of the forwards "
                                                    "end_step() was told of ran without the canary's snapshot "
                                                    "(the newest is forward 33 of 35"
                       : kLagSlack > 0 ? "canary not running: at flush (step 35) 1 of the forwards end_step() was "
                                         "told of ran without the canary's snapshot (the newest is forward 34 of "
                                         "35"
                       : next_plan     ? "canary not running: between step 10 and step 20, 1 of the forwards "
                                         "end_step() was told of ran without the canary's snapshot (the newest is "
                                         "forward 20 of 22)"
                                       : "canary not running: between step 10 and step 20, 1 of the forwards "
                                         "end_step() was told of ran without the canary's snapshot (the newest is "
                                         "forward 20 of 21)"),
        std::string::npos)
        << errors[0];
    EXPECT_NE(std::find(lines.begin(), lines.end(), errors[0]), lines.end());

    // One pass skipped while the snapshot was taken: the counters say it. In the graph the snapshot goes with
    // the tail, so a head is skipped; beside the forward and with the next plan it goes with the head, so a tail is.
    const bool beside = route == kvcanary::PumpSnapshot::BesideForward || next_plan;
    EngineShape shape;
    shape.real_kv = true;
    config = quiet();
    config.pump_snapshot = route;
    config.tail_pass = true;
    config.real_kv_mode = kvcanary::RealKvMode::All;
    config.health_check_every_n_steps = 10;
    Harness tail(shape, config);
    for (int s = 1; s <= 25; ++s)
      tail.step_with(
          false, false,
          [&] {
            if (s != 15 || beside) tail.canary->before_forward(tail.batch());
          },
          [&] {
            if (s != 15 || !beside) tail.canary->after_forward(tail.batch());
          });
    errors.clear();
    for (const auto& report : tail.reports)
      for (const auto& error : report.health_errors) errors.push_back(error);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find(beside ? "between step 10 and step 20 the kernel run counters moved by other than the "
                                      "passes launched: verify TAIL_K_FULL (target): ran 18 of 20, write TAIL_K_FULL "
                                      "(target): ran 18 of 20"
                                    : "between step 10 and step 20 the kernel run counters moved by other than the "
                                      "passes launched: verify HEAD_K_FULL (target): ran 18 of 20, write HEAD_K_FULL "
                                      "(target): ran 18 of 20"),
              std::string::npos)
        << errors[0];

    config = quiet();
    config.pump_snapshot = route;
    config.health_check_every_n_steps = 10;
    config.report_mode = kvcanary::ReportMode::Raise;
    // Step 10's snapshot, one forward behind: read at step 11, or 12 with the next plan (CUDA's checks allow the
    // trail; flush() says it).
    EXPECT_EQ(step_raising_not_running(config), kLagSlack > 0 ? 0 : 11 + mail_lag(route));
  }
}

// A device behind the host (simulated: end_step() told of a forward before it ran): end_step() reads the
// newest snapshot there is, an earlier forward's, and the rows wait in the ring until it comes.
TEST_F(Runtime, InGraphEndStepReadsAnEarlierForwardWhenTheDeviceLags) {
  for (const auto route : kMailboxRoutes) {
    SCOPED_TRACE(route_name(route));
    auto config = quiet();
    config.pump_snapshot = route;
    config.health_check_every_n_steps = 0;  // the host backends' check allows no lag
    Harness h(EngineShape{}, config, 3);
    for (int s = 1; s <= 4; ++s) h.step();
    h.record(h.canary->end_step(1));       // forward 5 told of, not run: nothing newer than forward 4's snapshot
    EXPECT_EQ(h.reports.back().step, -1);  // no snapshot read
    EXPECT_TRUE(h.reports.back().violations.rows.empty());
    forward_only(h, true);            // forward 5, a corruption its head sees
    h.record(h.canary->end_step(0));  // nothing ran since the last end_step(), says the host; the device did
    if (route == kvcanary::PumpSnapshot::WithNextPlan) {
      EXPECT_EQ(h.reports.back().step, 4);  // forward 4's snapshot, taken by forward 5's plan
      EXPECT_TRUE(h.reports.back().violations.rows.empty());
      forward_only(h, false);  // forward 6 takes forward 5's
      h.record(h.canary->end_step(0));
    }
    EXPECT_EQ(h.reports.back().step, 5);
    EXPECT_FALSE(h.reports.back().violations.rows.empty());
    const std::size_t rows = h.reported[0].size();
    h.record(h.canary->end_step(0));  // twice: the same snapshot is not read again
    h.record(h.canary->end_step(0));
    EXPECT_EQ(h.reported[0].size(), rows);
    for (int s = 0; s < 3; ++s) h.step(false, true);
    // Steps 9-11 ran forwards 6-8 (with the next plan: steps 10-12, after the extra step above).
    EXPECT_EQ(h.reports.back().step, 11 + mail_lag(route));
    h.record(h.canary->flush());
    EXPECT_EQ(Harness::sorted(h.reported[0]), Harness::sorted(h.ref[0].ring.rows));
  }
}

TEST_F(Runtime, RearmEmptiesTheRingsAndKeepsCounting) {
  for (const auto route : kPumpRoutes) {
    SCOPED_TRACE(route_name(route));
    auto config = quiet();
    config.ring_capacity = 6;
    config.health_check_every_n_steps = 5;
    config.pump_snapshot = route;  // in-graph: the row cursor starts over with the ring
    Harness h(EngineShape{}, config);
    std::int64_t rows = 0;
    for (int s = 1; s <= 30; ++s) {
      h.step(false, true);
      h.record(h.canary->rearm());
      // Each step's rows, all of them while a step's violations fit the ring, then the ring starts over.
      const std::int64_t count = h.ref[0].ring.count;
      EXPECT_EQ(static_cast<std::int64_t>(h.reported[0].size()) - rows, std::min<std::int64_t>(count, 6))
          << "step " << s;
      rows = static_cast<std::int64_t>(h.reported[0].size());
      EXPECT_TRUE(h.reports.back().health_errors.empty());
      h.ref[0].ring.rows.clear();
      h.ref[0].ring.count = 0;
    }
  }
}

TEST_F(Runtime, HealthCheckQuietOnTenThousandCleanSteps) {
  EngineShape shape;
  shape.rows = 5;
  shape.cols = 24;
  shape.max_batch = 2;
  shape.max_extend = 2;
  auto config = quiet();
  config.health_check_every_n_steps = 50;
  config.report_mode = kvcanary::ReportMode::Raise;
  Harness h(shape, config);
  for (int s = 1; s <= 10000; ++s) {
    h.step(false, false);
    ASSERT_TRUE(h.reports.back().health_errors.empty()) << "step " << s;
    ASSERT_TRUE(h.reports.back().violations.rows.empty()) << "step " << s;
    h.reports.clear();
  }
}

// The side-stream copies' account (the mailbox routes': InGraphHealthCheckFiresOnceWhenAForwardSkipsTheCanary).
TEST_F(Runtime, HealthCheckFiresWhenAPassIsSkipped) {
  std::vector<std::string> lines;
  auto config = quiet(&lines);
  config.pump_snapshot = kvcanary::PumpSnapshot::SideStreamCopies;
  config.health_check_every_n_steps = 10;
  Harness h(EngineShape{}, config);
  for (int s = 1; s <= 25; ++s) h.step(false, false, /*skip_canary=*/s == 15);
  std::vector<std::string> errors;
  for (const auto& report : h.reports)
    for (const auto& error : report.health_errors) errors.push_back(error);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("canary not running: between step 10 and step 20"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("verify HEAD_K_FULL (target): ran 18 of 20, write HEAD_K_FULL (target): ran 18 of 20 "), std::string::npos) << errors[0];
  EXPECT_NE(std::find(lines.begin(), lines.end(), errors[0]), lines.end());  // logged

  config.report_mode = kvcanary::ReportMode::Raise;
  EXPECT_EQ(step_raising_not_running(config), 11);  // the snapshot of step 10, read at step 11
}

TEST_F(Runtime, ReportModes) {
  for (const auto mode : {kvcanary::ReportMode::None, kvcanary::ReportMode::Log, kvcanary::ReportMode::Raise}) {
    std::vector<std::string> lines;
    auto config = quiet(&lines);
    config.report_mode = mode;
    config.keep_never_written = false;
    Harness h(EngineShape{}, config, 3);
    bool raised = false;
    for (int s = 1; s <= 30 && !raised; ++s) {
      try {
        h.step(false, s == 12);
      } catch (const kvcanary::ViolationError& error) {
        raised = true;
        EXPECT_FALSE(error.rows().empty());
        EXPECT_EQ(error.lines().front().rfind("kv_canary violation: launch_tag=", 0), 0u);
      }
    }
    EXPECT_EQ(raised, mode == kvcanary::ReportMode::Raise);
    const bool logged = std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
      return line.rfind("kv_canary violation:", 0) == 0;
    });
    EXPECT_EQ(logged, mode == kvcanary::ReportMode::Log);
    if (mode == kvcanary::ReportMode::None) EXPECT_TRUE(lines.empty());
  }
}

// Zeroes every record of a buffer (a namespace-scope function: CUDA's extended lambdas may not live in a
// gtest TestBody, which is private).
template <class Space, class Records>
void wipe_records(const Space& space, const Records& records) {
  Kokkos::parallel_for("test::wipe_records", Kokkos::RangePolicy<Space>(space, 0, records.extent(0)),
                       KOKKOS_LAMBDA(const int slot) {
                         for (int f = 0; f < 4; ++f) records(slot, f) = 0;
                       });
}

// A record wiped to zeros reads as never written: the filter drops its rows, and the report still names
// the launch tags it dropped (SPEC-CANARY §7: never silent).
TEST_F(Runtime, DroppedNeverWrittenRowsNameTheirLaunchTags) {
  std::vector<std::string> lines;
  auto config = quiet(&lines);
  config.keep_never_written = false;
  Harness h(EngineShape{}, config, 3);
  for (int s = 1; s <= 6; ++s) h.step();
  wipe_records(h.space, h.canary->k_buffer(GroupKind::Target).records);
  for (int s = 7; s <= 9; ++s) h.step();
  h.record(h.canary->flush());
  std::int64_t dropped = 0;
  for (const auto& report : h.reports) {
    const auto& v = report.violations;
    dropped += v.dropped;
    if (v.dropped == 0) continue;
    EXPECT_TRUE(std::is_sorted(v.dropped_launch_tags.begin(), v.dropped_launch_tags.end()));
    EXPECT_TRUE(std::adjacent_find(v.dropped_launch_tags.begin(), v.dropped_launch_tags.end()) ==
                v.dropped_launch_tags.end());
    EXPECT_NE(std::find(v.dropped_launch_tags.begin(), v.dropped_launch_tags.end(),
                        static_cast<std::int64_t>(kvcanary::KernelKind::HEAD_K_FULL)),
              v.dropped_launch_tags.end());
  }
  ASSERT_GT(dropped, 0);
  const auto line = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("never-written rows dropped (launch tags ") != std::string::npos;
  });
  ASSERT_NE(line, lines.end());
  EXPECT_NE(line->find("HEAD_K_FULL"), std::string::npos) << *line;
}

TEST_F(Runtime, MultiLineFormatInTheReport) {
  std::vector<std::string> lines;
  auto config = quiet(&lines);
  config.report_format = kvcanary::ReportFormat::MultiLine;
  Harness h(EngineShape{}, config, 3);
  for (int s = 1; s <= 20; ++s) h.step(false, s == 8);
  h.record(h.canary->flush());
  ASSERT_FALSE(h.reported[0].empty());
  const auto& report = std::find_if(h.reports.begin(), h.reports.end(), [](const kvcanary::RuntimeReport& r) {
    return !r.violations.rows.empty();
  });
  ASSERT_NE(report, h.reports.end());
  const auto& line = report->violations.lines.front();
  EXPECT_EQ(line, kvcanary::format_violation_multiline(report->violations.rows.front(), report->violations.count, false,
                                                       report->step + 1));
  EXPECT_NE(line.find("\nKV cache canary violation detected (kernel_kind="), std::string::npos);
}

// Every route (with the next plan on CUDA, the plan's scalars reach the snapshot through its handover copies).
TEST_F(Runtime, CapacityOverflowWarnsNamingThePass) {
  for (const auto route : kPumpRoutes) {
    SCOPED_TRACE(route_name(route));
    std::vector<std::string> lines;
    auto config = quiet(&lines);
    config.capacities.verify_capacity = 6;
    config.pump_snapshot = route;
    Harness h(EngineShape{}, config);
    for (int s = 1; s <= 12; ++s) h.step();
    const auto warning = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
      return line.find("head verify of the target group was disabled by capacity overflow") != std::string::npos;
    });
    ASSERT_NE(warning, lines.end());
    EXPECT_NE(warning->find("verify_capacity 6"), std::string::npos) << *warning;
  }
}

TEST_F(Runtime, StatsAndSwaDivergenceLines) {
  for (const auto route : kPumpRoutes) {
    SCOPED_TRACE(route_name(route));
    std::vector<std::string> lines;
    EngineShape shape;
    shape.swa = true;
    auto config = quiet(&lines);
    config.stats_every_n_steps = 5;
    config.swa_divergence_every_n_steps = 5;
    config.pump_snapshot = route;  // in-graph: the divergence of step 5 is read by forward 6's snapshot
    Harness h(shape, config);
    for (int s = 1; s <= 11; ++s) h.step();
    std::vector<std::string> stats, divergence;
    for (const auto& line : lines) {
      if (line.rfind("[canary] step=", 0) == 0) stats.push_back(line);
      if (line.rfind("kv_canary_swa_divergence={", 0) == 0) divergence.push_back(line);
    }
    ASSERT_EQ(stats.size(), 2u);
    EXPECT_EQ(stats[0].rfind("[canary] step=5 protected_tokens=", 0), 0u) << stats[0];
    EXPECT_NE(stats[0].find(" sweep_passes=0 violations=0 launch_tags_active=4/12"), std::string::npos) << stats[0];
    ASSERT_EQ(divergence.size(), 2u);
    // The identity LUT: no divergence, nothing out of the window.
    EXPECT_NE(divergence[0].find("\"forward_ct\":5,"), std::string::npos) << divergence[0];
    EXPECT_NE(divergence[0].find("\"swa_full_idx_divergence\":0,\"swa_out_of_window_tokens\":0}"), std::string::npos);
  }
}

TEST_F(Runtime, BatchErrorsThrowBeforeAnyLaunch) {
  EngineShape shape;
  shape.swa = true;
  Harness h(shape, quiet());
  auto batch = h.batch();
  batch.swa_tokens.reset();
  EXPECT_THROW(h.canary->before_forward(batch), std::invalid_argument);
  batch = h.batch();
  batch.tokens.positions = Kokkos::subview(h.d_pos[0], std::make_pair(0, 3));
  EXPECT_THROW(h.canary->before_forward(batch), std::invalid_argument);
  EXPECT_THROW(h.canary->end_step(-1), std::invalid_argument);
  h.canary->flush();
  // Nothing ran: every counter is still zero.
  const auto block = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), h.canary->counter_block());
  for (int tag = 0; tag < kvcanary::kKernelKinds; ++tag)
    EXPECT_EQ(block(kvcanary::Impl::CounterBlock::kernel_runs(0, tag)), 0);
}

}  // namespace kvcanary_test
