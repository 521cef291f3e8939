// The engine simulator (src/sim/, docs/simulator.md) on KVCANARY_TEST_EXECSPACE: long clean runs stay
// clean, every fault class is caught with its reason bits, blind spots are reported as not covered,
// and the device rings equal the host reference pipeline's step by step.

#include <kvcanary/tools/write_outcomes.hpp>
#include <sim/memory_bound.hpp>
#include <sim/simulate.hpp>

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

namespace kvcanary_sim_test {

using kvcanary::sim::FaultClass;
using kvcanary::sim::SimulationOptions;
using kvcanary::sim::SimulationReport;
using ExecSpace = KVCANARY_TEST_EXECSPACE;

SimulationReport run(const SimulationOptions& options, bool reference = false) {
  SimulationReport report = kvcanary::sim::simulate(ExecSpace{}, options, reference);
  if (!report.ok() || report.reference_mismatches > 0) std::cout << kvcanary::sim::format_table(report);
  return report;
}

SimulationOptions faulty(FaultClass fault, std::uint64_t seed) {
  SimulationOptions o;
  o.steps = 700;
  o.seed = seed;
  o.max_batch = 6;
  o.faults = {fault};
  o.faults_per_class = 4;
  if (fault == FaultClass::SwaLutCorruption) o.swa_window = 24;
  return o;
}

// Every class at once, with every group (draft and SWA).
SimulationOptions every_fault(std::int64_t steps, std::uint64_t seed) {
  SimulationOptions o;
  o.steps = steps;
  o.seed = seed;
  o.swa_window = 24;
  o.spec_decode = true;
  o.faults = kvcanary::sim::parse_fault_classes("all");
  o.faults_per_class = 2;
  return o;
}

TEST(Simulator, TenThousandCleanStepsReportNothing) {
  SimulationOptions o;
  o.steps = 10000;
  o.seed = 7;
  o.max_batch = 4;
  o.max_prompt = 96;
  o.max_output = 64;
  const SimulationReport r = run(o);
  EXPECT_EQ(r.rows, 0);
  EXPECT_EQ(r.false_positives, 0);
  EXPECT_EQ(r.ring_overflows, 0);
  EXPECT_GT(r.requests_finished, 300);
  EXPECT_TRUE(r.ok());
}

TEST(Simulator, CleanRunsWithEveryGroupReportNothing) {
  for (const std::int64_t page_size : {1, 16}) {
    SimulationOptions o;
    o.steps = 1500;
    o.seed = 11 + static_cast<std::uint64_t>(page_size);
    o.page_size = page_size;
    o.spec_decode = true;
    o.swa_window = 20;
    o.real_kv = kvcanary::RealKvMode::Partial;
    const SimulationReport r = run(o);
    EXPECT_EQ(r.rows, 0) << "page size " << page_size;
    EXPECT_EQ(r.false_positives, 0);
    EXPECT_GT(r.requests_finished, 20);
  }
}

class SimulatorFault : public ::testing::TestWithParam<int> {};

TEST_P(SimulatorFault, IsDetectedWithItsReasonBits) {
  const auto fault = static_cast<FaultClass>(GetParam());
  const auto expected = kvcanary::sim::expected_catch(fault);
  for (const std::int64_t page_size : {1, 16}) {
    SimulationOptions o = faulty(fault, 100 + static_cast<std::uint64_t>(GetParam()) + static_cast<std::uint64_t>(page_size));
    o.page_size = page_size;
    const SimulationReport r = run(o);
    const auto& c = r.classes[GetParam()];
    SCOPED_TRACE(std::string(kvcanary::sim::fault_class_name(fault)) + ", page size " + std::to_string(page_size));
    EXPECT_GE(c.injected, 1);
    EXPECT_GE(c.detectable, 1);
    EXPECT_EQ(c.detected, c.detectable);
    EXPECT_EQ(c.missed, 0);
    EXPECT_EQ(r.false_positives, 0);
    EXPECT_NE(c.reason_bits & expected.reason_bits, 0) << "reasons seen " << c.reason_bits;
    for (const auto& f : r.faults)
      if (f.detectable()) EXPECT_NE(f.reason_bits & expected.reason_bits, 0) << "fault " << f.id << ": " << f.note;
  }
}

INSTANTIATE_TEST_SUITE_P(Classes, SimulatorFault, ::testing::Range(0, kvcanary::sim::kFaultClasses),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kvcanary::sim::fault_class_name(static_cast<FaultClass>(info.param)));
                         });

// SPEC-CANARY §10: a real-KV fault with real-KV mode NONE is a blind spot, reported as not covered.
TEST(Simulator, ByteFlipsWithRealKvOffAreNotCovered) {
  SimulationOptions o = faulty(FaultClass::KvByteFlip, 5);
  o.real_kv = kvcanary::RealKvMode::None;
  const SimulationReport r = run(o);
  const auto& c = r.classes[static_cast<int>(FaultClass::KvByteFlip)];
  EXPECT_GE(c.injected, 1);
  EXPECT_EQ(c.not_covered, c.injected);
  EXPECT_EQ(c.detectable, 0);
  EXPECT_EQ(c.detected, 0);
  EXPECT_EQ(c.missed, 0);
  EXPECT_EQ(r.rows, 0);
  EXPECT_TRUE(r.ok());
}

// Every class at once: the device rings equal the host reference pipeline's.
TEST(Simulator, DeviceRingsEqualTheReferencePipelineStepByStep) {
  SimulationOptions o = every_fault(400, 2026);
  o.max_batch = 5;
  const SimulationReport r = run(o, /*reference=*/true);
  EXPECT_EQ(r.reference_mismatches, 0);
  EXPECT_GT(r.rows, 0);
  EXPECT_TRUE(r.ok());
}

// The same seed gives the same simulation on every backend: the same faults, detected at the same steps
// with the same reasons and rows (on CUDA: the graph-replayed run against the host's).
TEST(Simulator, SameSeedSameResultsAsOnTheHost) {
  const SimulationOptions o = every_fault(600, 99);
  const SimulationReport device = run(o);
  const SimulationReport host = kvcanary::sim::simulate(Kokkos::DefaultHostExecutionSpace{}, o);
  EXPECT_EQ(device.rows, host.rows);
  EXPECT_EQ(device.false_positives, host.false_positives);
  EXPECT_EQ(device.tokens_written, host.tokens_written);
  ASSERT_EQ(device.faults.size(), host.faults.size());
  for (std::size_t i = 0; i < host.faults.size(); ++i) {
    EXPECT_EQ(device.faults[i].detected_step, host.faults[i].detected_step) << host.faults[i].note;
    EXPECT_EQ(device.faults[i].reason_bits, host.faults[i].reason_bits) << host.faults[i].note;
    EXPECT_EQ(device.faults[i].rows, host.faults[i].rows) << host.faults[i].note;
  }
}

// The configuration of issue 19: a stale_prefix fault at step 456 makes request 7's seed the slot request 0
// writes at step 462, a call whose outcome SPEC-CANARY §4 leaves open (2060 rows or 2058 on OpenMP).
SimulationOptions issue_19(std::int64_t steps) {
  SimulationOptions o;
  o.steps = steps;
  o.seed = 5;
  o.page_size = 16;
  o.real_kv = kvcanary::RealKvMode::Partial;
  o.faults = kvcanary::sim::parse_fault_classes("all");
  o.swa_window = 64;
  o.spec_decode = true;
  return o;
}

// The engine never hands the canary a write call whose outcome SPEC-CANARY §4 leaves open (a seed slot
// another request writes in the same call, a slot written twice), checked step by step with the host
// reference's own plan (reference::open_writes) on the issue's configuration and a few more. Host only:
// the engine and the reference pipeline, as simulate() runs them.
TEST(Simulator, NoStepHandsTheCanaryAWriteWhoseOutcomeIsOpen) {
  std::vector<SimulationOptions> runs = {issue_19(5000), every_fault(700, 2026), faulty(FaultClass::StalePrefixHit, 9),
                                         faulty(FaultClass::DoubleAllocation, 4), faulty(FaultClass::UseAfterFree, 4)};
  runs[2].page_size = 1;
  for (const SimulationOptions& o : runs) {
    kvcanary::sim::Engine engine(o);
    kvcanary::sim::ReferencePipeline pipeline(engine.shape(), o);
    std::int64_t open_steps = 0, first_open = -1;
    for (std::int64_t step = 0; step < o.steps; ++step) {
      const kvcanary::sim::StepData& data = engine.begin_step(step);
      pipeline.upload(engine, data);
      pipeline.head(data);
      for (const auto group : {kvcanary::sim::Group::Target, kvcanary::sim::Group::Draft, kvcanary::sim::Group::Swa})
        if (pipeline.has_group(group) &&
            kvcanary::reference::open_writes(pipeline.plan(group), pipeline.tokens(group), engine.shape().num_slots).any()) {
          ++open_steps;
          if (first_open < 0) first_open = step;
        }
      pipeline.model_write(data);
      pipeline.tail(data);
      if (data.sweep) pipeline.sweep(data);
      std::vector<kvcanary::sim::GroupRow> rows;
      const std::int64_t overflows = pipeline.read(rows);
      engine.end_step(rows, overflows);
    }
    EXPECT_EQ(open_steps, 0) << "seed " << o.seed << ": first at step " << first_open;
  }
}

// The JSON of a report without what a run cannot repeat: the backend's name and the timings.
std::string repeatable_json(SimulationReport r) {
  r.backend.clear();
  r.canary_us_per_step = r.step_us_per_step = r.steps_per_second = 0;
  for (auto& b : r.by_batch_size)
    for (auto* t : {&b.all, &b.decode_only, &b.with_prefill}) t->canary_us = t->canary_us_median = t->step_us = 0;
  return kvcanary::sim::format_json(r);
}

// Issue 19: a seed gives the same report, to the byte (timings aside), run after run on this backend and
// against Serial (when the Kokkos build has it). Short runs for the repetitions; the issue's 5000-step configuration once.
TEST(Simulator, SameSeedGivesIdenticalJsonRunAfterRunAndOnSerial) {
  std::vector<SimulationOptions> configurations = {issue_19(5000), every_fault(300, 5), every_fault(300, 77)};
  configurations[1].page_size = 16;
  configurations[1].real_kv = kvcanary::RealKvMode::Partial;
  configurations[2].page_size = 1;
  for (std::size_t c = 0; c < configurations.size(); ++c) {
    const SimulationOptions& o = configurations[c];
#ifdef KOKKOS_ENABLE_SERIAL
    const std::string serial = repeatable_json(kvcanary::sim::simulate(Kokkos::Serial{}, o));
#else  // a Kokkos without Serial (Debian's 5.2.2): the first run on this backend is the baseline
    const std::string serial = repeatable_json(kvcanary::sim::simulate(ExecSpace{}, o));
#endif
    const int runs = c == 0 ? 1 : 10;
    for (int run = 0; run < runs; ++run)
      ASSERT_EQ(repeatable_json(kvcanary::sim::simulate(ExecSpace{}, o)), serial)
          << "configuration " << c << ", run " << run + 1;
  }
}

TEST(Simulator, ReportFormsNameEveryInjectedClass) {
  SimulationOptions o = faulty(FaultClass::SwappedTokens, 3);
  const SimulationReport r = run(o);
  const std::string table = kvcanary::sim::format_table(r), json = kvcanary::sim::format_json(r);
  EXPECT_NE(table.find("swapped_tokens"), std::string::npos);
  EXPECT_NE(table.find("OK:"), std::string::npos);
  EXPECT_NE(json.find("\"swapped_tokens\": {\"injected\": " + std::to_string(r.classes[6].injected)), std::string::npos);
  EXPECT_NE(json.find("\"ok\": true"), std::string::npos);
}

// --full-batch: every step holds max_batch requests (a finished one replaced at once); with a fixed
// output length most steps are decode only, and the report times them apart from the prefill ones.
TEST(Simulator, FullBatchKeepsEveryRowBusyAndSplitsDecodeFromPrefill) {
  SimulationOptions o;
  o.steps = 400;
  o.seed = 21;
  o.max_batch = 8;
  o.full_batch = true;
  o.output_tokens = 60;
  const SimulationReport r = run(o, /*reference=*/true);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.rows, 0);
  EXPECT_EQ(r.reference_mismatches, 0);
  EXPECT_GT(r.requests_finished, 20);
  ASSERT_EQ(r.by_batch_size.size(), 1u);  // full from step 0 on
  const auto& b = r.by_batch_size[0];
  EXPECT_EQ(b.batch_size, 8);
  EXPECT_EQ(b.all.steps, o.steps);
  EXPECT_EQ(b.decode_only.steps + b.with_prefill.steps, o.steps);
  EXPECT_GT(b.decode_only.steps, o.steps / 4);
  EXPECT_GT(b.with_prefill.steps, 0);
  EXPECT_GT(b.decode_only.canary_us_median, 0);
  EXPECT_GT(b.decode_only.step_us, b.decode_only.canary_us);
  EXPECT_GE(r.tokens_written, o.steps * 8 - 8 * 200);  // every row writes nearly every step (budget scaled)
}

// A full batch of 64 decode requests needs more than the default budget of 128 tokens once drafts are
// on: it is scaled, so no request is starved, and every fault class is still caught.
TEST(Simulator, FullBatchWithSpecDecodeAndEveryFault) {
  SimulationOptions o = every_fault(500, 31);
  o.max_batch = 40;
  o.full_batch = true;
  const SimulationReport r = run(o, /*reference=*/true);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.reference_mismatches, 0);
  const auto shape = kvcanary::sim::engine_shape(o);
  EXPECT_EQ(shape.token_budget, 40 * (1 + o.num_draft_tokens) + o.prefill_chunk);
  std::int64_t full = 0;
  for (const auto& b : r.by_batch_size)
    if (b.batch_size == 40) full = b.all.steps;
  EXPECT_GT(full, o.steps * 9 / 10);  // only condemned requests' rows are refilled a step late
}

TEST(Simulator, OutputTokensFixEveryRequestsLength) {
  SimulationOptions o;
  o.steps = 300;
  o.seed = 4;
  o.output_tokens = 300;  // past max_output (128): the tables grow to fit
  const auto shape = kvcanary::sim::engine_shape(o);
  EXPECT_EQ(shape.cols, o.max_prompt + 300);
  const SimulationReport r = run(o);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.requests_finished, 0);  // none can finish in 300 steps: each needs 300 decode steps
  o.output_tokens = -1;
  EXPECT_THROW(kvcanary::sim::engine_shape(o), std::invalid_argument);
}

TEST(Simulator, BatchTimingsGroupStepsBySizeAndKind) {
  using kvcanary::sim::StepSample;
  const std::vector<StepSample> samples = {{4, false, 1, 10}, {4, false, 3, 10}, {4, true, 8, 20},  {1, false, 2, 4},
                                           {4, false, 2, 10}, {4, true, 6, 30},  {4, false, 10, 10}};
  const auto t = kvcanary::sim::batch_timings(samples);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].batch_size, 1);
  EXPECT_EQ(t[0].all.steps, 1);
  EXPECT_EQ(t[0].with_prefill.steps, 0);
  EXPECT_EQ(t[1].batch_size, 4);
  EXPECT_EQ(t[1].all.steps, 6);
  EXPECT_DOUBLE_EQ(t[1].all.canary_us, 30.0 / 6);
  EXPECT_DOUBLE_EQ(t[1].all.canary_us_median, 4.5);  // 1 2 3 6 8 10
  EXPECT_EQ(t[1].decode_only.steps, 4);
  EXPECT_DOUBLE_EQ(t[1].decode_only.canary_us, 4);
  EXPECT_DOUBLE_EQ(t[1].decode_only.canary_us_median, 2.5);  // 1 2 3 10
  EXPECT_DOUBLE_EQ(t[1].decode_only.step_us, 10);
  EXPECT_EQ(t[1].with_prefill.steps, 2);
  EXPECT_DOUBLE_EQ(t[1].with_prefill.canary_us_median, 7);
  EXPECT_DOUBLE_EQ(t[1].with_prefill.step_us, 25);
}

// issue 19 item 2: what a run keeps does not grow with its steps.
TEST(Simulator, StepTimerKeepsExactMeansAndABoundedSample) {
  using kvcanary::sim::kMaxTimedSteps;
  kvcanary::sim::StepTimer timer;
  const std::int64_t steps = kMaxTimedSteps + 4096;
  double canary_sum = 0;  // of size 2
  for (std::int64_t i = 0; i < steps; ++i) {  // size 2: canary 1 or 3 in turn; size 5: every 1024th step, 7
    const kvcanary::sim::StepSample sample = i % 1024 == 0
        ? kvcanary::sim::StepSample{5, true, 7, 70}
        : kvcanary::sim::StepSample{2, false, static_cast<float>(1 + 2 * (i % 2)), 10};
    if (sample.batch_size == 2) canary_sum += sample.canary_us;
    timer.add(sample);
  }
  const auto t = timer.by_batch_size();
  ASSERT_EQ(t.size(), 2u);
  const std::int64_t rare = (steps + 1023) / 1024;
  EXPECT_EQ(t[0].all.steps, steps - rare);
  EXPECT_DOUBLE_EQ(t[0].all.step_us, 10);
  EXPECT_DOUBLE_EQ(t[0].all.canary_us, canary_sum / static_cast<double>(steps - rare));
  EXPECT_GE(t[0].all.canary_us_median, 1);
  EXPECT_LE(t[0].all.canary_us_median, 3);
  EXPECT_EQ(t[1].with_prefill.steps, rare);
  EXPECT_DOUBLE_EQ(t[1].with_prefill.canary_us_median, 7);
  EXPECT_DOUBLE_EQ(t[1].with_prefill.step_us, 70);
}

TEST(Simulator, MemoryBoundDoesNotGrowWithSteps) {
  SimulationOptions o;
  o.faults = kvcanary::sim::parse_fault_classes("all");
  o.steps = 100000;
  const std::int64_t bound = kvcanary::sim::peak_memory_bound(o);
  o.steps = 100000000;
  EXPECT_EQ(kvcanary::sim::peak_memory_bound(o), bound);
  EXPECT_LE(bound, kvcanary::sim::kMaxSimulationBytes);
  EXPECT_EQ(kvcanary::sim::faults_per_class(o), kvcanary::sim::kMaxDefaultFaultsPerClass);
  o.max_batch = 4096;
  o.output_tokens = 4096;
  EXPECT_GT(kvcanary::sim::peak_memory_bound(o), kvcanary::sim::kMaxSimulationBytes);  // the CLI refuses it
}

TEST(Simulator, FaultListsParse) {
  EXPECT_EQ(kvcanary::sim::parse_fault_classes("all").size(), static_cast<std::size_t>(kvcanary::sim::kFaultClasses));
  EXPECT_TRUE(kvcanary::sim::parse_fault_classes("none").empty());
  EXPECT_EQ(kvcanary::sim::parse_fault_classes("kv_byte_flip,swa_lut"),
            (std::vector<FaultClass>{FaultClass::KvByteFlip, FaultClass::SwaLutCorruption}));
  EXPECT_THROW(kvcanary::sim::parse_fault_classes("kv_byte_flip,bogus"), std::invalid_argument);
}

}  // namespace kvcanary_sim_test
