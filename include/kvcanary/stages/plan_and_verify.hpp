#ifndef KVCANARY_PLAN_AND_VERIFY_HPP
#define KVCANARY_PLAN_AND_VERIFY_HPP

// kvcanary::plan_and_verify(): plan() then the multi-target verify() of its VerifyPlan, with the verify
// entries computed from the plan's inputs instead of stored and read back (SPEC-CANARY §5.1).
//
//   plan_and_verify(space, inputs, verify_plan, write_plan, status, workspace, targets, ring
//                   [, plan_options[, verify_options]]);
//
// * The same ring rows (in another order), bits and counters as plan() then verify(space, verify_plan,
//   targets, ring, verify_options) over the same inputs and buffers, and the same WritePlan, scalars,
//   status and workspace offsets. The VerifyPlan's four arrays and verify_identities are left untouched:
//   32 bytes an entry (40 with identities) neither written nor read, the head pass's main traffic.
// * Use it when nothing reads those arrays after the call (the runtime's tail pass does: it re-verifies
//   the head plan after the forward, so a group with one keeps plan() then verify()).
// * Launches: on CUDA (plan_options.algorithm not Portable), the plan's persistent kernels; with
//   verify_options.algorithm Default or Cuda each entry is checked where it is made (entries_cuda.hpp,
//   CheckEntries): ONE launch for up to 256 rows, two above. With verify_options.algorithm Portable, the
//   same kernels make the offsets only (one block up to 256 rows), then one verify kernel,
//   "kvcanary::verify[from_inputs]", computes and checks the entries. Elsewhere, or when the fast path
//   declines: the plan's offsets scan, then that verify kernel. Either way the identity copy follows when
//   the inputs carry identities (write_identities only).
// * Asynchronous on `space`, no allocation, copy or fence (capturable in a CUDA graph).
// * Everything plan() and verify() check on the host is checked first: a call that breaks a rule throws
//   std::invalid_argument before any launch.

#include <kvcanary/impl/verify_from_inputs.hpp>
#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/verify.hpp>

#include <vector>

namespace kvcanary {

namespace Impl {

// plan_and_verify()'s host checks and its verify functor: everything is checked before any launch.
template <class ExecutionSpace, class MemorySpace>
VerifyFromInputsFunctor<MemorySpace> checked_from_inputs(
    const PlanInputs<MemorySpace>& inputs, const VerifyPlan<MemorySpace>& verify_plan,
    const WritePlan<MemorySpace>& write_plan, const PlanStatus<MemorySpace>& status,
    const PlanWorkspace<MemorySpace>& workspace, const std::vector<VerifyTarget<MemorySpace>>& targets,
    const ViolationRing<MemorySpace>& ring, const VerifyOptions& verify_options) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::plan_and_verify: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_memory_space<MemorySpace>::value,
                "kvcanary::plan_and_verify: the plan types must be templated on a Kokkos memory space");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::plan_and_verify: the plan's memory space must be accessible from the execution space");
  constexpr const char* kWhere = "plan_and_verify";
  validate(inputs, verify_plan, write_plan, status, workspace);
  check_verify_plan(kWhere, verify_plan);
  VerifyFromInputsFunctor<MemorySpace> functor{};
  functor.call = make_verify_call<MemorySpace>(kWhere, targets, ring, verify_options);
  functor.in = DeviceInputs<MemorySpace>(inputs);
  functor.out = DeviceOutputs<MemorySpace>(verify_plan, write_plan, status, workspace);
  functor.has_identities = inputs.req_identities.has_value();
  if (functor.has_identities)
    functor.req_identities = DeviceVector<MemorySpace>(inputs.req_identities->data(), inputs.req_identities->extent(0));
  functor.batch_size = inputs.batch_size();
  return functor;
}

// The launches after the plan's: the identity copy (SPEC-CANARY §11.7: write_identities only, the entries'
// identities are the rows', never stored), then verify[from_inputs] unless the plan's kernels checked.
template <class ExecutionSpace, class MemorySpace>
void launch_after_plan(const ExecutionSpace& space, const PlanInputs<MemorySpace>& inputs,
                       const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
                       const VerifyFromInputsFunctor<MemorySpace>& functor, bool checked) {
  if (inputs.req_identities)
    launch_identities(space, inputs, verify_plan, write_plan, functor.out, functor.batch_size, false);
  if (!checked) launch_verify_from_inputs(space, functor);
}

}  // namespace Impl

template <class ExecutionSpace, class MemorySpace>
void plan_and_verify(const ExecutionSpace& space, const PlanInputs<MemorySpace>& inputs,
                     const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
                     const PlanStatus<MemorySpace>& status, const PlanWorkspace<MemorySpace>& workspace,
                     const std::vector<VerifyTarget<MemorySpace>>& targets, const ViolationRing<MemorySpace>& ring,
                     const PlanOptions& plan_options = PlanOptions{},
                     const VerifyOptions& verify_options = VerifyOptions{}) {
  // Every host check of both calls, before any launch.
  const auto functor = Impl::checked_from_inputs<ExecutionSpace>(inputs, verify_plan, write_plan, status, workspace,
                                                                 targets, ring, verify_options);
  Kokkos::Profiling::pushRegion("kvcanary::plan_and_verify");
  using Backend = Impl::EntriesBackend<ExecutionSpace>;
  bool checked = false;  // by the plan's own kernels
  if constexpr (Backend::has_cuda_persistent) {
    // The persistent plan kernels check each entry where they make it; false: nothing launched.
    if (plan_options.algorithm != EntriesAlgorithm::Portable && verify_options.algorithm != CanaryAlgorithm::Portable)
      checked = Backend::plan_and_check(space, functor.in, functor.out, functor.batch_size, functor.call,
                                        functor.req_identities, functor.has_identities);
  }
  if (!checked)
    Impl::launch_plan(space, functor.in, functor.out, functor.batch_size, plan_options, Impl::VerifyEntries::Skip);
  Impl::launch_after_plan(space, inputs, verify_plan, write_plan, functor, checked);
  Kokkos::Profiling::popRegion();
}

#ifdef KOKKOS_ENABLE_CUDA
namespace Impl {

// plan_and_verify() whose first launch also carries `rider`'s job in one extra block (cuda_tiles.hpp; the
// runtime's pump snapshot): with verify_options.algorithm Portable, the offsets-only plan and verify[from_inputs]
// after it; otherwise, up to 256 rows, the one launch that checks each entry where it is made (its rider counts
// the pass's runs), and above, the offsets-only route again. Returns false, having launched nothing, where
// CUDA's persistent kernels decline (plan_options.algorithm Portable, another device): the caller then does the
// job its own way first and calls plan_and_verify(), which checks its arguments (again, after another device's
// decline).
template <class MemorySpace, class Rider>
bool plan_and_verify_carrying(const Kokkos::Cuda& space, const PlanInputs<MemorySpace>& inputs,
                              const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
                              const PlanStatus<MemorySpace>& status, const PlanWorkspace<MemorySpace>& workspace,
                              const std::vector<VerifyTarget<MemorySpace>>& targets,
                              const ViolationRing<MemorySpace>& ring, const PlanOptions& plan_options,
                              const VerifyOptions& verify_options, const Rider& rider) {
  if (plan_options.algorithm == EntriesAlgorithm::Portable) return false;
  const auto functor = checked_from_inputs<Kokkos::Cuda>(inputs, verify_plan, write_plan, status, workspace, targets,
                                                         ring, verify_options);
  Kokkos::Profiling::pushRegion("kvcanary::plan_and_verify");
  using Backend = EntriesBackend<Kokkos::Cuda>;
  const bool checked = verify_options.algorithm != CanaryAlgorithm::Portable &&
                       Backend::plan_and_check(space, functor.in, functor.out, functor.batch_size, functor.call,
                                               functor.req_identities, functor.has_identities, rider);
  const bool carried = checked || Backend::plan_offsets(space, functor.in, functor.out, functor.batch_size, rider);
  if (carried) launch_after_plan(space, inputs, verify_plan, write_plan, functor, checked);
  Kokkos::Profiling::popRegion();
  return carried;
}

}  // namespace Impl
#endif

}  // namespace kvcanary

#endif
