#ifndef KVCANARY_WRITE_HPP
#define KVCANARY_WRITE_HPP

// kvcanary::write(): stamp the records of the step's tokens into a canary buffer (SPEC-CANARY §4),
// chained to each request's seed record, with the input and chain-position asserts.
//
//   write(space, write_plan, tokens, buffer, ring[, options]);
//   write(space, write_plan, tokens, targets, ring[, call_options]);  // several buffers (K and V) at once
//
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph with plan() and verify()).
// * kernel_run_counter += 1 per call and per target; slot_run_counter += the tokens stored (in all targets).
// * Host-side errors (shapes, strides, sources, kinds, a canary buffer whose bytes overlap a real-KV
//   source's) throw std::invalid_argument before any launch.
//   Wrong device data (offsets past the token arrays, slots past the buffer) gives OUT_OF_RANGE rows.
// * Work: each valid request walks its span [write_offsets[r], write_offsets[r + 1]) of the token arrays,
//   up to the first index outside them, and folds the real-KV bytes of every token it stores (16 bytes a
//   source in PARTIAL mode, read_bytes in ALL). plan() makes the spans disjoint, so a call walks at most
//   num_tokens + capacity tokens. Offsets from elsewhere are not checked for overlap: spans that overlap
//   are walked as often as they are covered (write_offsets = [0, N, 0, N, ...] walks C/2 x N tokens for
//   C requests, hours for C = 2e6, N = 1e6), so bound such inputs before the call (the CLI does:
//   docs/cli-limits.md).
// * A plan with write_identities (SPEC-CANARY §11.7) masks every chain link a request stores with its
//   identity's mask; identity 0 (and a plan without identities) stores the original's records.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/write_cuda.hpp>
#include <kvcanary/impl/write_portable.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace kvcanary {

namespace Impl {

// A view of one target without copying its RealKv (whose source list lives on the heap).
template <class MemorySpace>
struct WriteTargetRef {
  const CanaryBuffer<MemorySpace>& buffer;
  KernelKind kernel_kind;
  const RealKv<MemorySpace>& real_kv;
};

// Whether two buffers' records can share a byte: their address ranges overlap and, for one record
// stride, some record of one lands within 32 bytes of a record of the other (K and V records
// interleaved in one engine allocation at the same stride do not).
template <class MemorySpace>
bool records_may_overlap(const CanaryBuffer<MemorySpace>& a, const CanaryBuffer<MemorySpace>& b) {
  if (a.num_slots() == 0 || b.num_slots() == 0) return false;
  const auto first = [](const CanaryBuffer<MemorySpace>& x) { return reinterpret_cast<std::uintptr_t>(x.records.data()); };
  const auto last = [&](const CanaryBuffer<MemorySpace>& x) {  // one past the last record's last byte
    return first(x) + static_cast<std::uintptr_t>((x.num_slots() - 1) * x.stride_bytes() + kRecordBytes);
  };
  if (last(a) <= first(b) || last(b) <= first(a)) return false;
  if (a.stride_bytes() != b.stride_bytes() || a.num_slots() == 1 || b.num_slots() == 1) return true;
  const std::uintptr_t stride = static_cast<std::uintptr_t>(a.stride_bytes());
  const std::uintptr_t gap = (first(b) - first(a)) % stride;  // mod 2^64 first, then mod the stride
  const std::uintptr_t offset = first(b) >= first(a) ? gap : (stride - gap) % stride;
  return offset < static_cast<std::uintptr_t>(kRecordBytes) || stride - offset < static_cast<std::uintptr_t>(kRecordBytes);
}

// The host checks of write() (std::invalid_argument before anything is launched), then the kernel's
// arguments. `targets` is any container of size() targets with .buffer, .kernel_kind and .real_kv.
// kTargets: the functor's room for targets (>= targets.size(); write_with_targets() picks it).
template <class ExecutionSpace, int kTargets = 1, class MemorySpace, class Index, class Targets>
WriteFunctor<ExecutionSpace, MemorySpace, Index, kTargets> checked_write_functor(
    const WritePlan<MemorySpace>& write_plan, const StepTokens<MemorySpace, Index>& tokens, const Targets& targets,
    const ViolationRing<MemorySpace>& ring) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::write: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::write: the canary's memory space must be accessible from the execution space");
  static_assert(std::is_same<Index, std::int64_t>::value || std::is_same<Index, std::int32_t>::value,
                "kvcanary::write: token arrays hold int64 or int32");
  constexpr const char* kWhere = "write";
  const std::int64_t num_tokens = tokens.num_tokens();
  if (extent_of(tokens.positions) != num_tokens || extent_of(tokens.out_cache_loc) != num_tokens)
    throw_invalid_in(kWhere, "input_ids, positions and out_cache_loc have ", num_tokens, ", ", extent_of(tokens.positions),
                     " and ", extent_of(tokens.out_cache_loc), " entries, must be equal");
  if (tokens.expected_input_ids.has_value() != tokens.expected_positions.has_value())
    throw_invalid_in(kWhere, "expected_input_ids and expected_positions must be given both or neither");
  if (tokens.expected_input_ids &&
      (extent_of(*tokens.expected_input_ids) != num_tokens || extent_of(*tokens.expected_positions) != num_tokens))
    throw_invalid_in(kWhere, "expected_input_ids and expected_positions have ", extent_of(*tokens.expected_input_ids),
                     " and ", extent_of(*tokens.expected_positions), " entries, must be num_tokens = ", num_tokens);
  if (tokens.chain_position_assert.data() == nullptr) throw_invalid_in(kWhere, "chain_position_assert is not allocated");
  if (extent_of(write_plan.write_offsets) - 1 != write_plan.capacity())
    throw_invalid_in(kWhere, "write_offsets has ", extent_of(write_plan.write_offsets),
                     " entries, must be write_req_capacity + 1 (write_seed_slot_indices has ", write_plan.capacity(), ")");
  if (write_plan.write_num_valid_reqs.data() == nullptr) throw_invalid_in(kWhere, "write_num_valid_reqs is not allocated");
  if (write_plan.write_identities && extent_of(*write_plan.write_identities) != write_plan.capacity())
    throw_invalid_in(kWhere, "write_identities has ", extent_of(*write_plan.write_identities),
                     " entries but write_seed_slot_indices has ", write_plan.capacity());
  if (targets.size() == 0 || targets.size() > static_cast<std::size_t>(kMaxWriteTargets))
    throw_invalid_in(kWhere, "got ", targets.size(), " canary buffers, must be 1 to ", kMaxWriteTargets);
  if (targets.size() > static_cast<std::size_t>(kTargets))
    throw std::logic_error("kvcanary::write: a functor for fewer targets than given (internal error)");
  check_ring(kWhere, ring);

  WriteFunctor<ExecutionSpace, MemorySpace, Index, kTargets> functor{};
  functor.plan = DeviceWritePlan<MemorySpace>(write_plan);
  functor.tokens = DeviceStepTokens<MemorySpace, Index>(tokens);
  functor.num_targets = static_cast<int>(targets.size());
  functor.ring = DeviceRing<MemorySpace>(ring);
  for (std::size_t t = 0; t < targets.size(); ++t) {
    check_buffer(kWhere, targets[t].buffer);
    check_kernel_kind(kWhere, targets[t].kernel_kind);
    // One write() stamps every target at once: a record shared by two targets would take two stores.
    for (std::size_t u = 0; u < t; ++u)
      if (records_may_overlap(targets[u].buffer, targets[t].buffer))
        throw_invalid_in(kWhere, "the canary buffers of targets ", u, " and ", t, " share memory, must be disjoint");
    functor.targets[t].buffer = DeviceBuffer<MemorySpace>(targets[t].buffer);
    functor.targets[t].real_kv = device_real_kv(kWhere, targets[t].real_kv, targets[t].buffer.num_slots());
    functor.targets[t].kind = static_cast<std::int64_t>(targets[t].kernel_kind);
    for (std::size_t u = 0; u < targets.size(); ++u)  // no buffer inside any source of the call
      check_buffer_apart_from_sources(kWhere, targets[t].buffer, targets[u].real_kv);
  }
  return functor;
}

// The write of a checked functor on the path `algorithm` picks (the CUDA path where the backend has one).
template <class ExecutionSpace, class Functor>
void launch_write(const ExecutionSpace& space, const Functor& functor, CanaryAlgorithm algorithm) {
  Kokkos::Profiling::pushRegion("kvcanary::write");
  using Backend = WriteBackend<ExecutionSpace>;
  bool done = false;
  if constexpr (Backend::has_cuda) {
    // The CUDA path returns false, having launched nothing, when it cannot run on this space.
    if (algorithm != CanaryAlgorithm::Portable) done = Backend::write(space, functor);
  }
  if (!done) launch_write_portable(space, functor, TeamShape<ExecutionSpace>::write_lanes());
  Kokkos::Profiling::popRegion();
}

// Calls launch(functor) with the checked functor whose room for targets fits targets.size(): 1, 2 or
// kMaxWriteTargets (one kernel each; the count is checked before any is built).
template <class ExecutionSpace, class MemorySpace, class Index, class Targets, class Launch>
void with_write_functor(const WritePlan<MemorySpace>& write_plan, const StepTokens<MemorySpace, Index>& tokens,
                        const Targets& targets, const ViolationRing<MemorySpace>& ring, Launch&& launch) {
  if (targets.size() == 1)
    launch(checked_write_functor<ExecutionSpace, 1>(write_plan, tokens, targets, ring));
  else if (targets.size() == 2)
    launch(checked_write_functor<ExecutionSpace, 2>(write_plan, tokens, targets, ring));
  else
    launch(checked_write_functor<ExecutionSpace, kMaxWriteTargets>(write_plan, tokens, targets, ring));
}

// The portable kernel with `lanes` threads per request (impl/write_portable.hpp); the tests run several
// widths.
template <class ExecutionSpace, class MemorySpace, class Index, class Targets>
void write_with_lanes(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
                      const StepTokens<MemorySpace, Index>& tokens, const Targets& targets,
                      const ViolationRing<MemorySpace>& ring, int lanes) {
  with_write_functor<ExecutionSpace>(write_plan, tokens, targets, ring, [&](const auto& functor) {
    Kokkos::Profiling::pushRegion("kvcanary::write");
    launch_write_portable(space, functor, lanes);
    Kokkos::Profiling::popRegion();
  });
}

}  // namespace Impl

// Several canary buffers sharing the plan and the tokens (1 to kMaxWriteTargets), e.g. the K and V
// halves: the same buffers, rows and counters as one write() per target in order (SPEC-CANARY §4), with
// the plan and tokens read once and the chain walked once for targets whose seeds agree. The targets'
// records must not share memory (std::invalid_argument).
template <class ExecutionSpace, class MemorySpace, class Index>
void write(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
           const StepTokens<MemorySpace, Index>& tokens, const std::vector<WriteTarget<MemorySpace>>& targets,
           const ViolationRing<MemorySpace>& ring, const WriteCallOptions& options = WriteCallOptions{}) {
  Impl::with_write_functor<ExecutionSpace>(write_plan, tokens, targets, ring,
                                           [&](const auto& functor) { Impl::launch_write(space, functor, options.algorithm); });
}

// One canary buffer.
template <class ExecutionSpace, class MemorySpace, class Index>
void write(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
           const StepTokens<MemorySpace, Index>& tokens, const CanaryBuffer<MemorySpace>& buffer,
           const ViolationRing<MemorySpace>& ring, const WriteOptions<MemorySpace>& options = WriteOptions<MemorySpace>{}) {
  const std::array<Impl::WriteTargetRef<MemorySpace>, 1> one{{{buffer, options.kernel_kind, options.real_kv}}};
  const auto functor = Impl::checked_write_functor<ExecutionSpace>(write_plan, tokens, one, ring);
  Impl::launch_write(space, functor, options.algorithm);
}

}  // namespace kvcanary

#endif
