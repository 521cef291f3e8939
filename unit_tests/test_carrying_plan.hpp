// CUDA only: a plan whose first launch carries a rider's block (Impl::plan_and_verify_carrying, the runtime's
// pump snapshot in the next plan) leaves every output as plan_and_verify() leaves them without it. The rider
// here only counts its rides, so a decline (nothing launched) cannot pass for a match. The WritePlan's capacity
// is far past the batch so that the whole of write_offsets, which SPEC §4 has rewritten every call, spans every
// block of the grid, the rider's included.

// After test_plan_and_verify.hpp (all_tests_v2.hpp), whose fixture and helpers it uses.

#include <kvcanary/stages/plan_and_verify.hpp>

namespace kvcanary_test {

struct CountingRider {
  static constexpr bool kActive = true;
  unsigned long long* rides = nullptr;
  __device__ std::int64_t before_scalars() const { return 0; }
  __device__ void after_scalars(std::int64_t /*token*/, const kvcanary::Impl::VerifyScalars& /*scalars*/) const {}
  __device__ void ride(int thread, int /*threads*/) const {
    if (thread == 0) atomicAdd(rides, 1ull);
  }
};

// A head pass by the carrying route; `rides` is how many rider blocks ran.
inline HeadPassResult run_carrying_head_pass(const HeadPassCase& c, std::int64_t& rides) {
  using Memory = Kokkos::CudaSpace;
  const Kokkos::Cuda space;
  const auto capacity = static_cast<std::int64_t>(c.start.verify_slot_indices.size());
  const auto write_capacity = static_cast<std::int64_t>(c.start.write_seed_slot_indices.size());
  const auto verify_plan = kvcanary::allocate_verify_plan(space, capacity, c.start.verify_identities.has_value());
  const auto write_plan = kvcanary::allocate_write_plan(space, write_capacity, c.start.write_identities.has_value());
  const auto status = kvcanary::allocate_plan_status(space);
  const auto workspace = kvcanary::allocate_plan_workspace(space, batch_size(c.inputs));
  const auto inputs = kvcanary::upload_inputs(space, c.inputs);
  kvcanary::upload_outputs(space, c.start, verify_plan, write_plan, status);
  std::vector<kvcanary::VerifyTarget<Memory>> targets;
  for (std::size_t t = 0; t < c.buffers.size(); ++t)
    targets.push_back({kvcanary::upload_canary_buffer(space, c.buffers[t]), c.kinds[t],
                       kvcanary::upload_real_kv(space, c.real_kvs[t])});
  const auto ring = kvcanary::upload_violation_ring(space, c.ring);
  Kokkos::View<unsigned long long, Memory> counted("kvcanary_test::rides");
  kvcanary::VerifyOptions options = c.options;
  options.algorithm = kvcanary::CanaryAlgorithm::Portable;  // the runtime's: verify[from_inputs] after the plan
  const bool carried = kvcanary::Impl::plan_and_verify_carrying(
      space, inputs, verify_plan, write_plan, status, workspace, targets, ring, kvcanary::PlanOptions{}, options,
      CountingRider{counted.data()});
  EXPECT_TRUE(carried) << "the persistent kernels declined the carrying plan";
  HeadPassResult result{c.start, {}};
  kvcanary::download_outputs(space, verify_plan, write_plan, status, result.plan);
  result.ring = kvcanary::download_violation_ring(space, ring);
  unsigned long long host = 0;
  Kokkos::deep_copy(space, host, counted);
  space.fence();
  rides = static_cast<std::int64_t>(host);
  return result;
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
    Ring reference_ring = c.ring;
    const Outputs reference = reference_head_pass(c, reference_ring);
    Ring all = c.ring;
    all.capacity = reference_ring.count + 1;
    reference_head_pass(c, all);

    std::int64_t rides = 0;
    const HeadPassResult carried = run_carrying_head_pass(c, rides);
    EXPECT_EQ(rides, 1);
    EXPECT_EQ(carried.plan.verify_slot_indices, c.start.verify_slot_indices);  // checked where made, not stored
    Outputs rest = carried.plan;
    rest.verify_slot_indices = reference.verify_slot_indices;
    rest.verify_expected_tokens = reference.verify_expected_tokens;
    rest.verify_expected_positions = reference.verify_expected_positions;
    rest.verify_prev_slot_indices = reference.verify_prev_slot_indices;
    rest.verify_identities = reference.verify_identities;
    EXPECT_TRUE(same_plan(rest, reference));  // write_offsets whole: [bs] and zeros after
    EXPECT_TRUE(same_ring(carried.ring, reference_ring, all));
    if (HasFailure()) return;
  }
}

}  // namespace kvcanary_test
