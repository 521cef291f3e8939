// The simulator's second place (src/sim/transfer_sim.*, docs/simulator.md "Two places"): a prefill and a
// decode engine with a host tier, records travelling with the KV through export/import/relocate. Every
// transfer fault is detected with no false positive, clean runs report nothing, the run on this backend
// gives the host reference's report to the byte, and a fault that moves only bytes is "not covered" with
// real-KV NONE (never caught, never missed).

#include <sim/transfer_sim.hpp>

#include <gtest/gtest.h>

namespace {

using kvcanary::sim::TransferFault;
using kvcanary::sim::TransferSimOptions;
using kvcanary::sim::TransferSimReport;
using ExecSpace = KVCANARY_TEST_EXECSPACE;

TransferSimOptions all_faults(std::uint64_t seed) {
  TransferSimOptions options;
  options.steps = 240;
  options.seed = seed;
  options.faults = kvcanary::sim::parse_transfer_faults("all");
  options.faults_per_class = 3;
  return options;
}

TEST(TwoPlaces, EveryTransferFaultIsDetectedWithNoFalsePositive) {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const TransferSimReport report = kvcanary::sim::simulate_transfer(ExecSpace(), all_faults(seed));
    SCOPED_TRACE(kvcanary::sim::format_transfer_table(report));
    EXPECT_TRUE(report.ok());
    EXPECT_EQ(report.false_positives, 0);
    for (int k = 0; k < kvcanary::sim::kTransferFaults; ++k) {
      const auto& c = report.classes[k];
      EXPECT_EQ(c.injected, 3) << kvcanary::sim::transfer_fault_name(static_cast<TransferFault>(k));
      EXPECT_EQ(c.detected, c.detectable);
      EXPECT_EQ(c.not_covered, 0);
    }
    EXPECT_GT(report.offloads, 0);
    EXPECT_GT(report.relocations, 0);
    for (const auto& f : report.faults) {
      // Each detection carries a bit its mechanism gives (SPEC-CANARY §12.4).
      const std::int64_t bits = f.reason_bits;
      switch (f.fault) {
        case TransferFault::LayoutMixup:
        case TransferFault::DefragBytes:
          EXPECT_EQ(bits, kvcanary::kVerifyRealKvHash) << f.variant;
          break;
        case TransferFault::StaleTier:
          EXPECT_TRUE(bits & kvcanary::kVerifyFreed) << bits;
          break;
        default:
          EXPECT_NE(bits, 0) << f.variant;
      }
    }
  }
}

TEST(TwoPlaces, ACleanRunReportsNothing) {
  TransferSimOptions options = all_faults(7);
  options.faults.clear();
  const TransferSimReport report = kvcanary::sim::simulate_transfer(ExecSpace(), options);
  EXPECT_EQ(report.rows, 0) << kvcanary::sim::format_transfer_table(report);
  EXPECT_GT(report.transfers, 20);
  EXPECT_GT(report.requests_finished, 10);
}

TEST(TwoPlaces, TheBackendGivesTheReferencesReportToTheByte) {
  const TransferSimOptions options = all_faults(11);
  const TransferSimReport device = kvcanary::sim::simulate_transfer(ExecSpace(), options);
  const auto reference_stages = kvcanary::sim::reference_transfer_stages();
  TransferSimReport reference = kvcanary::sim::simulate_transfer(*reference_stages, options);
  reference.backend = device.backend;
  EXPECT_EQ(kvcanary::sim::format_transfer_table(device), kvcanary::sim::format_transfer_table(reference));
  ASSERT_EQ(device.faults.size(), reference.faults.size());
  for (std::size_t i = 0; i < device.faults.size(); ++i) {
    EXPECT_EQ(device.faults[i].detected_step, reference.faults[i].detected_step);
    EXPECT_EQ(device.faults[i].rows, reference.faults[i].rows);
    EXPECT_EQ(device.faults[i].slots, reference.faults[i].slots);
  }
}

TEST(TwoPlaces, BytesOnlyFaultsAreNotCoveredWithoutRealKv) {
  TransferSimOptions options = all_faults(5);
  options.steps = 1500;  // long enough for damaged slots to be reused by later requests
  options.real_kv = kvcanary::RealKvMode::None;
  const auto stages = kvcanary::sim::reference_transfer_stages();
  const TransferSimReport report = kvcanary::sim::simulate_transfer(*stages, options);
  EXPECT_TRUE(report.ok()) << kvcanary::sim::format_transfer_table(report);
  EXPECT_EQ(report.classes[static_cast<int>(TransferFault::LayoutMixup)].not_covered, 3);
  EXPECT_EQ(report.classes[static_cast<int>(TransferFault::DefragBytes)].not_covered, 3);
  EXPECT_EQ(report.classes[static_cast<int>(TransferFault::StaleTier)].not_covered, 0);
  // An uncovered fault cannot produce rows, so it never takes another's.
  EXPECT_EQ(report.classes[static_cast<int>(TransferFault::LayoutMixup)].reason_bits, 0);
  EXPECT_EQ(report.classes[static_cast<int>(TransferFault::DefragBytes)].reason_bits, 0);
}

TEST(TwoPlaces, OptionsOutOfRangeAreRejected) {
  TransferSimOptions options;
  options.slots_per_place = 64;
  EXPECT_THROW(kvcanary::sim::simulate_transfer(ExecSpace(), options), std::invalid_argument);
  options = TransferSimOptions{};
  options.faults_per_class = 65;
  EXPECT_THROW(kvcanary::sim::simulate_transfer(ExecSpace(), options), std::invalid_argument);
  EXPECT_THROW(kvcanary::sim::parse_transfer_faults("late_write,bogus"), std::invalid_argument);
  EXPECT_EQ(kvcanary::sim::parse_transfer_faults("stale_tier,late_write"),
            (std::vector<TransferFault>{TransferFault::StaleTier, TransferFault::LateWrite}));
}

}  // namespace
