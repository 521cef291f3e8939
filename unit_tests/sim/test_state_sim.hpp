// The simulator's state model (src/sim/state_sim.*, docs/simulator.md "State slots"; SPEC-CANARY §13):
// requests with recurrent state slots, checked at every resume and stamped after every update. Every state
// fault is detected by the state check with the bits §13.4 gives and no false positive, a clean run reports
// nothing, the run on this backend gives the host reference's report to the byte, and a stamp that skips the
// padding dummies (row 43's condition not met) misses every state_alias.

#include <sim/state_sim.hpp>

#include <gtest/gtest.h>

namespace {

using kvcanary::sim::StateFault;
using kvcanary::sim::StateSimOptions;
using kvcanary::sim::StateSimReport;
using ExecSpace = KVCANARY_TEST_EXECSPACE;

StateSimOptions all_state_faults(std::uint64_t seed) {
  StateSimOptions options;
  options.steps = 200;
  options.seed = seed;
  options.faults = kvcanary::sim::parse_state_faults("all");
  options.faults_per_class = 4;
  return options;
}

constexpr std::int64_t kRecordBits = kvcanary::kVerifyChainHash | kvcanary::kVerifyPosition;

TEST(StateSlots, EveryStateFaultIsDetectedWithNoFalsePositive) {
  for (const bool free_states : {true, false})
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      StateSimOptions options = all_state_faults(seed);
      options.free_states = free_states;
      const StateSimReport report = kvcanary::sim::simulate_state(ExecSpace(), options);
      SCOPED_TRACE(kvcanary::sim::format_state_table(report));
      EXPECT_TRUE(report.ok());
      EXPECT_EQ(report.false_positives, 0);
      for (int k = 0; k < kvcanary::sim::kStateFaults; ++k) {
        EXPECT_EQ(report.classes[k].injected, 4) << kvcanary::sim::state_fault_name(static_cast<StateFault>(k));
        EXPECT_EQ(report.classes[k].detected, 4);
      }
      EXPECT_GT(report.forks, 20);
      EXPECT_GT(report.dummies, 20);
      for (const auto& f : report.faults) {
        EXPECT_GE(f.latency(), 0);
        EXPECT_EQ(f.rows, 1);      // one entry per request: one row
        switch (f.fault) {         // SPEC-CANARY §13.4, with the token pool
          case StateFault::Stale:  // a freed slot (128), or the last owner's state: never B's predecessor (1)
            EXPECT_TRUE(f.reason_bits & (free_states ? kvcanary::kVerifyFreed : kvcanary::kVerifyChainHash))
                << f.variant;
            EXPECT_EQ(f.reason_bits & ~(kvcanary::kVerifyFreed | kRecordBits | kvcanary::kVerifyToken), 0) << f.variant;
            EXPECT_EQ(f.latency(), 0);
            break;
          case StateFault::Boundary:
            EXPECT_EQ(f.latency(), 0);
            EXPECT_EQ(f.reason_bits, kRecordBits | kvcanary::kVerifyToken);
            break;
          case StateFault::Alias:  // the dummy's record: position 0, token 0, anchored
            EXPECT_EQ(f.reason_bits, kRecordBits | kvcanary::kVerifyToken);
            EXPECT_EQ(f.readable_step, f.injected_step + 1);
            break;
        }
      }
    }
}

TEST(StateSlots, ACleanRunReportsNothing) {
  StateSimOptions options = all_state_faults(7);
  options.faults.clear();
  options.steps = 400;
  const StateSimReport report = kvcanary::sim::simulate_state(ExecSpace(), options);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.rows, 0) << kvcanary::sim::format_state_table(report);
  EXPECT_GT(report.forks, 60);  // prefix hits resume from copied states
  EXPECT_GT(report.checks, 1500);
  EXPECT_GT(report.requests_finished, 150);
}

TEST(StateSlots, TheBackendGivesTheReferencesReportToTheByte) {
  const StateSimOptions options = all_state_faults(11);
  const StateSimReport device = kvcanary::sim::simulate_state(ExecSpace(), options);
  const auto reference_stages = kvcanary::sim::reference_state_stages();
  StateSimReport reference = kvcanary::sim::simulate_state(*reference_stages, options);
  reference.backend = device.backend;
  EXPECT_EQ(kvcanary::sim::format_state_table(device), kvcanary::sim::format_state_table(reference));
}

TEST(StateSlots, AStampThatSkipsTheDummiesMissesEveryAlias) {  // KV-BUGS row 43's condition
  StateSimOptions options = all_state_faults(5);
  options.stamp_skips_dummies = true;
  const StateSimReport report = kvcanary::sim::simulate_state(ExecSpace(), options);
  const auto& alias = report.classes[static_cast<int>(StateFault::Alias)];
  EXPECT_EQ(alias.injected, 4);
  EXPECT_EQ(alias.missed, 4) << kvcanary::sim::format_state_table(report);
  EXPECT_EQ(report.classes[static_cast<int>(StateFault::Stale)].detected, 4);
  EXPECT_EQ(report.false_positives, 0);
  EXPECT_FALSE(report.ok());
}

TEST(StateSlots, AFaultWithoutAStepToHostItIsSkippedAndFailsTheRun) {
  StateSimOptions options = all_state_faults(1);
  options.steps = 5;  // faults are due from step 10 on
  const StateSimReport report = kvcanary::sim::simulate_state(ExecSpace(), options);
  EXPECT_EQ(report.skipped(), 12);
  EXPECT_EQ(report.rows, 0);
  EXPECT_FALSE(report.ok());
}

TEST(StateSlots, OptionsOutOfRangeAreRejected) {
  StateSimOptions options;
  options.faults_per_class = 65;
  EXPECT_THROW(kvcanary::sim::simulate_state(ExecSpace(), options), std::invalid_argument);
  options = StateSimOptions{};
  options.park_percent = 101;
  EXPECT_THROW(kvcanary::sim::simulate_state(ExecSpace(), options), std::invalid_argument);
  options = StateSimOptions{};
  options.max_prompt = 1;
  EXPECT_THROW(kvcanary::sim::simulate_state(ExecSpace(), options), std::invalid_argument);
  EXPECT_THROW(kvcanary::sim::parse_state_faults("state_alias,late_write"), std::invalid_argument);
  EXPECT_EQ(kvcanary::sim::parse_state_faults("state_alias,state_stale"),
            (std::vector<StateFault>{StateFault::Alias, StateFault::Stale}));
}

}  // namespace
