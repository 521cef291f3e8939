#ifndef KVCANARY_VERIFY_HPP
#define KVCANARY_VERIFY_HPP

// kvcanary::verify(): check every entry of a VerifyPlan against one or more canary buffers
// (SPEC-CANARY §5), before the engine reads the prefixes.
//
//   verify(space, verify_plan, buffer, ring[, options[, kernel_kind[, real_kv]]]);
//   verify(space, verify_plan, targets, ring[, options]);   // several buffers sharing the plan (K and V)
//
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph with plan() and write()). Violations go to `ring` on the device; read them on the host with
//   read_violations() at the step boundary.
// * Each target counts as one verify call: kernel_run_counter += 1 and, when enable == 1,
//   slot_run_counter += clamp(verify_num_valid, 0, capacity) per target.
// * Host-side errors (shapes, strides, sources, kinds, a canary buffer whose bytes overlap a real-KV
//   source's) throw std::invalid_argument before any launch.
// * Work: every active entry folds the real-KV bytes of its slot (16 bytes a source in PARTIAL mode,
//   read_bytes in ALL), so a call costs active entries x folded bytes per target. Entries may name one
//   slot many times, each folded again: 2e6 entries of a 4 MiB token fold 8 TB (about 70 min on a host
//   core). The call does what it is told; bound such inputs before the call (the CLI does:
//   docs/cli-limits.md).
// * options.checks (SPEC-CANARY §11, on by default): a plan entry of slot 0 gives a VERIFY_SLOT_ZERO row
//   (256), a FREED record read gives VERIFY_FREED (128); VerifyChecks::v1() is §5 exactly.
// * plan_and_verify() (plan_and_verify.hpp, SPEC-CANARY §5.1) is plan() then the multi-target call with the
//   entries computed from the plan's inputs, never stored: the same rows and counters, the same VerifyCall.
// * A plan with verify_identities (SPEC-CANARY §11.7) expects each entry's chain link masked by its
//   request's identity: a record another identity wrote fails the chain check (bit 1).

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/verify_portable.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <array>
#include <vector>

namespace kvcanary {

namespace Impl {

// A view of one target without copying its RealKv (whose source list lives on the heap).
template <class MemorySpace>
struct TargetRef {
  const CanaryBuffer<MemorySpace>& buffer;
  KernelKind kernel_kind;
  const RealKv<MemorySpace>& real_kv;
};

// The host checks of the plan a verify call reads (its four arrays, identities and scalars).
template <class MemorySpace>
void check_verify_plan(const char* where, const VerifyPlan<MemorySpace>& verify_plan) {
  const std::int64_t capacity = verify_plan.capacity();
  if (extent_of(verify_plan.verify_expected_tokens) != capacity || extent_of(verify_plan.verify_expected_positions) != capacity ||
      extent_of(verify_plan.verify_prev_slot_indices) != capacity)
    throw_invalid_in(where, "the four verify arrays must have one extent (verify_slot_indices has ", capacity, ")");
  if (verify_plan.verify_identities && extent_of(*verify_plan.verify_identities) != capacity)
    throw_invalid_in(where, "verify_identities has ", extent_of(*verify_plan.verify_identities),
                     " entries but verify_slot_indices has ", capacity);
  if (verify_plan.verify_num_valid.data() == nullptr || verify_plan.enable.data() == nullptr)
    throw_invalid_in(where, "verify_num_valid or enable is not allocated");
}

// The host checks of a call's targets and ring, and their device handles. `targets` is any container of
// size() targets with .buffer, .kernel_kind and .real_kv.
template <class MemorySpace, class Targets>
VerifyCall<MemorySpace> make_verify_call(const char* where, const Targets& targets,
                                         const ViolationRing<MemorySpace>& ring, const VerifyOptions& options) {
  if (targets.size() == 0 || targets.size() > static_cast<std::size_t>(kMaxVerifyTargets))
    throw_invalid_in(where, "got ", targets.size(), " canary buffers, must be 1 to ", kMaxVerifyTargets);
  check_ring(where, ring);
  VerifyCall<MemorySpace> call{};
  call.num_targets = static_cast<int>(targets.size());
  call.ring = DeviceRing<MemorySpace>(ring);
  call.check_expected_token = options.check_expected_token;
  call.checks = options.checks;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    check_buffer(where, targets[t].buffer);
    check_kernel_kind(where, targets[t].kernel_kind);
    call.targets[t].buffer = DeviceBuffer<MemorySpace>(targets[t].buffer);
    call.targets[t].real_kv = device_real_kv(where, targets[t].real_kv, targets[t].buffer.num_slots());
    for (std::size_t u = 0; u < targets.size(); ++u)  // no buffer inside any source of the call
      check_buffer_apart_from_sources(where, targets[t].buffer, targets[u].real_kv);
    call.targets[t].kernel_kind = static_cast<std::int64_t>(targets[t].kernel_kind);
  }
  return call;
}

template <class ExecutionSpace, class MemorySpace, class Targets>
void verify_targets(const ExecutionSpace& space, const VerifyPlan<MemorySpace>& verify_plan, const Targets& targets,
                    const ViolationRing<MemorySpace>& ring, const VerifyOptions& options) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::verify: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::verify: the canary's memory space must be accessible from the execution space");
  constexpr const char* kWhere = "verify";
  check_verify_plan(kWhere, verify_plan);
  VerifyFunctor<MemorySpace> functor{};
  functor.call = make_verify_call<MemorySpace>(kWhere, targets, ring, options);
  functor.plan = DeviceVerifyPlan<MemorySpace>(verify_plan);

  Kokkos::Profiling::pushRegion("kvcanary::verify");
  launch_verify_portable(space, functor);
  Kokkos::Profiling::popRegion();
}

}  // namespace Impl

// Several canary buffers sharing the plan (1 to kMaxVerifyTargets), e.g. the K and V halves.
template <class ExecutionSpace, class MemorySpace>
void verify(const ExecutionSpace& space, const VerifyPlan<MemorySpace>& verify_plan,
            const std::vector<VerifyTarget<MemorySpace>>& targets, const ViolationRing<MemorySpace>& ring,
            const VerifyOptions& options = VerifyOptions{}) {
  Impl::verify_targets(space, verify_plan, targets, ring, options);
}

// One canary buffer.
template <class ExecutionSpace, class MemorySpace>
void verify(const ExecutionSpace& space, const VerifyPlan<MemorySpace>& verify_plan,
            const CanaryBuffer<MemorySpace>& buffer, const ViolationRing<MemorySpace>& ring,
            const VerifyOptions& options = VerifyOptions{}, KernelKind kernel_kind = KernelKind::HEAD_K_FULL,
            const RealKv<MemorySpace>& real_kv = RealKv<MemorySpace>{}) {
  const std::array<Impl::TargetRef<MemorySpace>, 1> one{{{buffer, kernel_kind, real_kv}}};
  Impl::verify_targets(space, verify_plan, one, ring, options);
}

}  // namespace kvcanary

#endif
