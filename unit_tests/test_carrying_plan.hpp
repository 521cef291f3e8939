// CUDA only: a plan whose first launch carries a rider's block (Impl::plan_and_verify_carrying, the runtime's
// pump snapshot in the next plan) leaves every output as plan_and_verify() leaves them without it, by both of
// its routes: the offsets-only plan with verify[from_inputs] after it, and the one launch that checks each entry
// where it makes it (up to 256 rows), whose rider counts the pass's runs. The rider here counts its rides, so
// that a decline (nothing launched) cannot pass for a match, and adds the runs as the runtime's rider does from
// the parts its threads are handed. The WritePlan's capacity is far past the batch so that the whole of
// write_offsets, which SPEC §4 has rewritten every call, spans every block of the grid, the rider's included.

// After test_plan_and_verify.hpp (all_tests_v2.hpp), whose fixture and helpers it uses.

#include <kvcanary/stages/plan_and_verify.hpp>

namespace kvcanary_test {

struct CountingRider {
  static constexpr bool kActive = true;
  unsigned long long* rides = nullptr;
  __device__ std::int64_t before_scalars() const { return 0; }
  __device__ void after_scalars(std::int64_t /*token*/, const kvcanary::Impl::VerifyScalars& /*scalars*/) const {}
  template <class Appends>
  __device__ void ride(int thread, int /*threads*/, const Appends& appends) const {
    __shared__ unsigned long long total;
    if (thread == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, static_cast<unsigned long long>(appends.part(thread)));
    __syncthreads();
    if (thread != 0) return;
    appends.count(static_cast<std::int64_t>(total));
    atomicAdd(rides, 1ull);
  }
};

// A head pass by the carrying route: verify[from_inputs] after the plan (`algorithm` Portable) or checked in the
// plan's launch (Default); `rides` is how many rider blocks ran.
inline HeadPassResult run_carrying_head_pass(const HeadPassCase& c, kvcanary::CanaryAlgorithm algorithm,
                                             std::int64_t& rides) {
  const DeviceHeadPass<Kokkos::Cuda> d(c, kvcanary::kRecordBytes);
  Kokkos::View<unsigned long long, Kokkos::CudaSpace> counted("kvcanary_test::rides");
  kvcanary::VerifyOptions options = c.options;
  options.algorithm = algorithm;
  const bool carried = kvcanary::Impl::plan_and_verify_carrying(
      d.space, d.inputs, d.verify_plan, d.write_plan, d.status, d.workspace, d.targets, d.ring, kvcanary::PlanOptions{},
      options, CountingRider{counted.data()});
  EXPECT_TRUE(carried) << "the persistent kernels declined the carrying plan";
  unsigned long long host = 0;
  Kokkos::deep_copy(d.space, host, counted);
  d.space.fence();
  rides = static_cast<std::int64_t>(host);
  return d.download(c);
}

// Batches for each of the carrying kernels (the small one up to 32 rows, the fused one up to 256, the rows
// kernel above), each against the reference and plan_and_verify() from the same poisoned start.
TEST_F(PlanAndVerify, ARiderBlockLeavesThePlanAsWithoutIt) {
  CaseGenerator cases(0xCA22E);
  CanaryCaseGenerator canary(0xCA22F);
  for (const std::int64_t bs : {1, 7, 32, 33, 64, 256, 257, 700}) {
    SCOPED_TRACE("batch of " + std::to_string(bs));
    RandomCase r = cases.next(bs);
    Capacities caps = r.capacities;
    caps.write = 4096;  // write_offsets' tail crosses every block of the grid
    HeadPassCase c = with_outputs(r.inputs, caps);
    const std::int64_t slots = r.inputs.max_reqs * r.inputs.max_seq_len + 2;
    for (const KernelKind kind : {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL}) {
      Buffer buffer = canary.buffer(slots);
      stamp_some_entries(c, buffer);
      c.buffers.push_back(std::move(buffer));
      c.kinds.push_back(kind);
      c.real_kvs.push_back(RealKv{});
    }
    c.ring = empty_ring(64);
    const ReferenceHeadPass reference = reference_with_every_row(c);
    for (const auto algorithm : {kvcanary::CanaryAlgorithm::Portable, kvcanary::CanaryAlgorithm::Default}) {
      SCOPED_TRACE(algorithm == kvcanary::CanaryAlgorithm::Portable ? "verify after the plan" : "checked in the plan");
      std::int64_t rides = 0;
      const HeadPassResult carried = run_carrying_head_pass(c, algorithm, rides);
      EXPECT_EQ(rides, 1);
      expect_checked_where_made(carried, c, reference, "the carrying plan");
      if (HasFailure()) return;
    }
  }
}

}  // namespace kvcanary_test
