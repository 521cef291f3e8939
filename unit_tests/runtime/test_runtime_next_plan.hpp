// PumpSnapshot::WithNextPlan: where the snapshot runs. On CUDA, with the group's head route checking its entries
// from the plan's inputs (Default's: in the plan's one launch up to 8 rows, after an offsets-only plan above), it
// rides in one extra block of the plan's launch and no snapshot kernel of its own is launched; a route that
// stores entries (a tail pass keeps FromPlan), and the host backends, launch the snapshot kernel before the plan,
// once a forward. Batches of 6 rows (padded: the checking launch) and of 14 (the offsets-only plan).
// Counted by a Kokkos Tools callback on the kernels' labels. Included after test_runtime.hpp (its fixture).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace kvcanary_test {

namespace {
int snapshot_kernels = 0;
void count_snapshot_kernel(const char* name, std::uint32_t, std::uint64_t*) {
  if (std::strcmp(name, "kvcanary::pump[in_graph]") == 0) ++snapshot_kernels;
}
}  // namespace

TEST_F(Runtime, NextPlanSnapshotRidesInTheHeadPlanOnCuda) {
#ifdef KOKKOS_ENABLE_CUDA
  constexpr bool kCuda = std::is_same<Space, Kokkos::Cuda>::value;
#else
  constexpr bool kCuda = false;
#endif
  for (const std::int64_t max_batch : {6, 14})
    for (const bool tail : {false, true}) {
      SCOPED_TRACE(std::string(tail ? "a tail pass" : "no tail pass") + ", batches of " + std::to_string(max_batch));
      auto [shape, config] = mailbox_setup(kvcanary::PumpSnapshot::WithNextPlan, tail);
      shape.max_batch = max_batch;
      config.health_check_every_n_steps = 5;
      Harness h(shape, config, 3);
      constexpr int kSteps = 12;
      snapshot_kernels = 0;
      Kokkos::Tools::Experimental::set_begin_parallel_for_callback(count_snapshot_kernel);
      for (int s = 1; s <= kSteps; ++s) h.step(false, s % 4 == 0);
      Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
      EXPECT_EQ(snapshot_kernels, kCuda && !tail ? 0 : kSteps);
      for (const auto& report : h.reports) EXPECT_TRUE(report.health_errors.empty());
      EXPECT_FALSE(h.reported[0].empty());  // rows came through the mailbox before the flush
      h.record(h.canary->flush());
      EXPECT_EQ(Harness::sorted(h.reported[0]), Harness::sorted(h.ref[0].ring.rows));
    }
}

}  // namespace kvcanary_test
