#ifndef KVCANARY_PLAN_HPP
#define KVCANARY_PLAN_HPP

// kvcanary::plan(): build the VerifyPlan and WritePlan of one forward step (SPEC §4).
//
//   plan(space, inputs, verify_plan, write_plan, status, workspace[, options]);
//
// * Asynchronous on `space`: it enqueues the offsets scan and the entries expansion (on CUDA, one
//   fused kernel for batches of up to 256 rows) and returns; results are ready after `space.fence()`
//   or any later work ordered on `space`.
// * Inside it: no allocation, no host-device copy, no fence, so it can be captured in a CUDA graph
//   and replayed with the inputs refilled in place (up to the shapes, which a graph fixes).
// * With inputs.req_identities (SPEC-CANARY §11.7; the plans then hold identity arrays), one more
//   launch copies each row's identity into its entries and its request (from the workspace's offsets).
// * validate() runs first: a call that breaks a host-side rule throws std::invalid_argument before
//   any output is touched. Problems in the data itself are reported in `status`, on the device.

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/entries_portable.hpp>
#include <kvcanary/impl/identities.hpp>
#include <kvcanary/impl/offsets.hpp>
#include <kvcanary/impl/row_rules.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/plan_validate.hpp>
#ifdef KOKKOS_ENABLE_CUDA
#include <kvcanary/impl/entries_cuda.hpp>
#endif

#include <type_traits>

namespace kvcanary {

namespace Impl {

// Whether a plan call stores its verify entries. plan_and_verify() (SPEC-CANARY §5.1) computes each entry
// again from the inputs, so its plan stores none: the VerifyPlan's four arrays (and verify_identities)
// are left untouched; the WritePlan, the scalars, the status and the workspace's offsets are written alike.
enum class VerifyEntries { Store, Skip };

// plan()'s offsets and entries launches, after validate() (the identity copy is the caller's). With
// VerifyEntries::Skip only the offsets are made (plan_and_verify()'s verify kernel computes the entries): by
// CUDA's persistent kernels with no tile expanded, else by the portable offsets scan (the portable entries
// kernel stores nothing else).
template <class ExecutionSpace, class MemorySpace>
void launch_plan(const ExecutionSpace& space, const DeviceInputs<MemorySpace>& in,
                 const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size, const PlanOptions& options,
                 VerifyEntries entries) {
  const bool store = entries == VerifyEntries::Store;
  using Backend = EntriesBackend<ExecutionSpace>;
  bool done = false;
  if constexpr (Backend::has_cuda_persistent) {
    // The fast path returns false, having launched nothing, when its preconditions fail.
    if (options.algorithm != EntriesAlgorithm::Portable)
      done = store ? Backend::plan(space, in, out, batch_size) : Backend::plan_offsets(space, in, out, batch_size);
  }
  if (!done) {
    Kokkos::Profiling::pushRegion(store ? "kvcanary::plan[portable]" : "kvcanary::plan[offsets_only]");
    launch_offsets(space, in, out, batch_size);
    if (store) launch_entries_portable(space, in, out, batch_size);
    Kokkos::Profiling::popRegion();
  }
}

}  // namespace Impl

template <class ExecutionSpace, class MemorySpace>
void plan(const ExecutionSpace& space, const PlanInputs<MemorySpace>& inputs,
          const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
          const PlanStatus<MemorySpace>& status, const PlanWorkspace<MemorySpace>& workspace,
          const PlanOptions& options = PlanOptions{}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::plan: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_memory_space<MemorySpace>::value,
                "kvcanary::plan: the plan types must be templated on a Kokkos memory space");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::plan: the plan's memory space must be accessible from the execution space");

  validate(inputs, verify_plan, write_plan, status, workspace);
  const Impl::DeviceInputs<MemorySpace> in(inputs);
  const Impl::DeviceOutputs<MemorySpace> out(verify_plan, write_plan, status, workspace);
  const std::int64_t batch_size = inputs.batch_size();
  Kokkos::Profiling::pushRegion("kvcanary::plan");
  Impl::launch_plan(space, in, out, batch_size, options, Impl::VerifyEntries::Store);
  // SPEC-CANARY §11.7: only a call with identities launches anything more.
  if (inputs.req_identities) Impl::launch_identities(space, inputs, verify_plan, write_plan, out, batch_size);
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
