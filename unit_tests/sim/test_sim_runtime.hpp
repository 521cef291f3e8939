// The simulator's faults of the canary itself, caught by the runtime's own checks (docs/runtime.md): a
// step whose head and tail replays are skipped (a graph that lost the canary's nodes) gives a "canary not
// running" error at the next health check, a verify capacity too small for the batches a warning per
// disabled pass; a clean run gives neither.

#include <kvcanary/runtime/impl/defaults.hpp>
#include <sim/simulate.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kvcanary_sim_runtime_test {

using kvcanary::sim::SimulationOptions;
using kvcanary::sim::SimulationReport;
using ExecSpace = KVCANARY_TEST_EXECSPACE;

SimulationOptions small_run() {
  SimulationOptions o;
  o.steps = 160;
  o.seed = 3;
  o.max_batch = 4;
  o.max_prompt = 64;
  o.max_output = 32;
  o.health_check_every = 20;
  return o;
}

TEST(SimulatorRuntime, CleanRunNoWarningNoHealthError) {
  const SimulationReport r = kvcanary::sim::simulate(ExecSpace{}, small_run());
  EXPECT_EQ(r.health_errors, 0) << (r.health_error_lines.empty() ? "" : r.health_error_lines[0]);
  EXPECT_EQ(r.runtime_warnings, 0) << (r.runtime_warning_lines.empty() ? "" : r.runtime_warning_lines[0]);
  EXPECT_TRUE(r.ok());
}

TEST(SimulatorRuntime, SkippedReplayIsCaughtByTheHealthCheck) {
  SimulationOptions o = small_run();
  o.skip_canary_step = 50;
  const SimulationReport r = kvcanary::sim::simulate(ExecSpace{}, o);
  ASSERT_EQ(r.health_errors, 1);
  const std::string& error = r.health_error_lines[0];
  if (kvcanary::Impl::resolve<ExecSpace>(kvcanary::PumpSnapshot::Default) == kvcanary::PumpSnapshot::WithNextPlan) {
    // CUDA's default pump: the skipped forward took no snapshot, which the simulator's flush after every step
    // (rearm()) names at once.
    EXPECT_NE(error.find("canary not running: at flush (step 51) 1 of the forwards end_step() was told of ran without "
                         "the canary's snapshot (the newest is forward 49 of 51"),
              std::string::npos)
        << error;
  } else {
    // The snapshot of step 60 (the first check after the skipped step) names the head's counters.
    EXPECT_NE(error.find("canary not running: between step 40 and step 60"), std::string::npos) << error;
    EXPECT_NE(error.find("verify HEAD_K_FULL (target)"), std::string::npos) << error;
  }
}

TEST(SimulatorRuntime, CapacityOverflowWarnsNeverSilent) {
  SimulationOptions o = small_run();
  o.verify_capacity = 48;  // below a batch of 4 requests' prefixes
  const SimulationReport r = kvcanary::sim::simulate(ExecSpace{}, o);
  ASSERT_GT(r.runtime_warnings, 0);
  EXPECT_NE(r.runtime_warning_lines[0].find("disabled by capacity overflow"), std::string::npos) << r.runtime_warning_lines[0];
  EXPECT_EQ(r.health_errors, 0);  // a disabled pass still runs (and counts)
}

}  // namespace kvcanary_sim_runtime_test
