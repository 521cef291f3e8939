// kvcanary::Canary captured the way an engine runs it: before_forward() and after_forward() each captured
// once as a CUDA graph (after one eager step) on a user stream, replayed for 60 steps with the batch
// refilled in place, the "model" writing the KV bytes between them, sweeps and end_step() eager. Every
// group's reported rows and buffers must equal the host reference run on the same steps, and the health
// check must stay quiet (the replays run the canary's nodes). The side-stream copies, the default pump (CUDA:
// the next plan; with a tail pass, so its snapshot kernel runs before the head plan), the in-graph route, whose
// snapshot the captured tail write takes in its last block (runtime/impl/pump_in_write.hpp), and the
// beside-forward route, whose snapshot branch forks in before_forward() and joins in after_forward(): the
// two captured in one graph (without a tail pass, so that no model write falls between them), and the
// next-plan route, whose snapshot rides in the captured head plan's launch (without a tail pass: its route).

#include "../runtime/runtime_harness.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace {

using Space = Kokkos::Cuda;
using Harness = kvcanary_runtime_test::RuntimeHarness<Space>;

void sixty_replayed_steps(kvcanary::PumpSnapshot route) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const bool beside = route == kvcanary::PumpSnapshot::BesideForward;
    // With the next plan, no tail pass either: the target's head route is then the offsets-only plan, whose
    // launch carries the snapshot (a tail pass keeps FromPlan and its own snapshot kernel).
    const bool tail_pass = !beside && route != kvcanary::PumpSnapshot::WithNextPlan;
    kvcanary_runtime_test::EngineShape shape;
    shape.swa = shape.draft = true;
    shape.real_kv = tail_pass;
    kvcanary::CanaryConfig config;
    config.report_mode = kvcanary::ReportMode::Log;
    config.keep_never_written = true;
    config.ring_capacity = 1 << 14;
    config.tail_pass = tail_pass;
    config.real_kv_mode = tail_pass ? kvcanary::RealKvMode::All : kvcanary::RealKvMode::None;
    config.verify_token_assert = true;
    config.sweep_interval = 5;
    config.health_check_every_n_steps = 10;
    config.sink = [](const std::string&) {};
    config.pump_snapshot = route;
    Harness h(shape, config, 11, Space(stream));

    cudaGraphExec_t head = nullptr, tail = nullptr;
    const auto capture = [&](cudaGraphExec_t& exec, const auto& calls) {
      cudaGraph_t graph;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      calls();
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    };
    const auto batch = h.batch();  // fixed addresses: the harness refills these Views in place
    const auto head_calls = [&] {
      h.canary->before_forward(batch);
      if (beside) h.canary->after_forward(batch);  // the snapshot's branch joins in the same graph
    };
    for (int s = 1; s <= 60; ++s) {
      const bool eager = s == 1;
      h.step_with(
          s % 5 == 0, s % 7 == 0,
          [&] {
            if (eager) {
              head_calls();
              capture(head, head_calls);
            } else {
              ASSERT_EQ(cudaGraphLaunch(head, stream), cudaSuccess);
            }
          },
          [&] {
            if (beside) return;  // in the head's graph
            if (eager) {
              h.canary->after_forward(batch);
              capture(tail, [&] { h.canary->after_forward(batch); });
            } else {
              ASSERT_EQ(cudaGraphLaunch(tail, stream), cudaSuccess);
            }
          });
      ASSERT_TRUE(h.reports.back().health_errors.empty()) << "step " << s << ": " << h.reports.back().health_errors[0];
    }
    h.record(h.canary->flush());
    for (int g = 0; g < 3; ++g) {
      SCOPED_TRACE(g);
      EXPECT_EQ(Harness::sorted(h.reported[g]), Harness::sorted(h.ref[g].ring.rows));
      const auto kind = static_cast<kvcanary::GroupKind>(g);
      EXPECT_TRUE(kvcanary::download_canary_buffer(h.space, h.canary->k_buffer(kind)) == h.ref[g].k);
      EXPECT_TRUE(kvcanary::download_canary_buffer(h.space, h.canary->v_buffer(kind)) == h.ref[g].v);
    }
    EXPECT_FALSE(h.ref[0].ring.rows.empty());
    cudaGraphExecDestroy(head);
    if (tail != nullptr) cudaGraphExecDestroy(tail);
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
}

TEST(RuntimeCudaGraph, SixtyReplayedStepsEqualTheReference) {
  sixty_replayed_steps(kvcanary::PumpSnapshot::SideStreamCopies);
}

TEST(RuntimeCudaGraph, SixtyReplayedStepsEqualTheReferenceWithTheDefaultPump) {
  sixty_replayed_steps(kvcanary::PumpSnapshot::Default);
}

TEST(RuntimeCudaGraph, SixtyReplayedStepsEqualTheReferenceWithTheSnapshotInTheGraph) {
  sixty_replayed_steps(kvcanary::PumpSnapshot::InGraph);
}

TEST(RuntimeCudaGraph, SixtyReplayedStepsEqualTheReferenceWithTheSnapshotBesideTheForward) {
  sixty_replayed_steps(kvcanary::PumpSnapshot::BesideForward);
}

TEST(RuntimeCudaGraph, SixtyReplayedStepsEqualTheReferenceWithTheSnapshotInTheNextPlan) {
  sixty_replayed_steps(kvcanary::PumpSnapshot::WithNextPlan);
}

}  // namespace
