#ifndef KVCANARY_WRITE_HPP
#define KVCANARY_WRITE_HPP

// kvcanary::write(): stamp the records of the step's tokens into a canary buffer (SPEC-CANARY §4),
// chained to each request's seed record, with the input and chain-position asserts.
//
//   write(space, write_plan, tokens, buffer, ring[, options]);
//
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph with plan() and verify()).
// * kernel_run_counter += 1 per call; slot_run_counter += the tokens stored.
// * Host-side errors (shapes, strides, sources, kinds, a canary buffer whose bytes overlap a real-KV
//   source's) throw std::invalid_argument before any launch.
//   Wrong device data (offsets past the token arrays, slots past the buffer) gives OUT_OF_RANGE rows.

#include <kvcanary/canary_types.hpp>
#include <kvcanary/canary_validate.hpp>
#include <kvcanary/impl/write_cuda.hpp>
#include <kvcanary/impl/write_portable.hpp>
#include <kvcanary/plan_types.hpp>

#include <type_traits>

namespace kvcanary {

namespace Impl {

// The host checks of write() (std::invalid_argument before anything is launched), then the kernel's
// arguments.
template <class ExecutionSpace, class MemorySpace, class Index>
WriteFunctor<ExecutionSpace, MemorySpace, Index> checked_write_functor(const WritePlan<MemorySpace>& write_plan,
                                                                     const StepTokens<MemorySpace, Index>& tokens,
                                                                     const CanaryBuffer<MemorySpace>& buffer,
                                                                     const ViolationRing<MemorySpace>& ring,
                                                                     const WriteOptions<MemorySpace>& options) {
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
  check_buffer(kWhere, buffer);
  check_ring(kWhere, ring);
  check_kernel_kind(kWhere, options.kernel_kind);

  WriteFunctor<ExecutionSpace, MemorySpace, Index> functor{};
  functor.plan = DeviceWritePlan<MemorySpace>(write_plan);
  functor.tokens = DeviceStepTokens<MemorySpace, Index>(tokens);
  functor.buffer = DeviceBuffer<MemorySpace>(buffer);
  functor.real_kv = device_real_kv(kWhere, options.real_kv, buffer.num_slots());
  check_buffer_apart_from_sources(kWhere, buffer, options.real_kv);
  functor.ring = DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  return functor;
}

// The portable kernel with `lanes` threads per request (impl/write_portable.hpp); the tests run several
// widths.
template <class ExecutionSpace, class MemorySpace, class Index>
void write_with_lanes(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
                      const StepTokens<MemorySpace, Index>& tokens, const CanaryBuffer<MemorySpace>& buffer,
                      const ViolationRing<MemorySpace>& ring, const WriteOptions<MemorySpace>& options, int lanes) {
  const auto functor = checked_write_functor<ExecutionSpace>(write_plan, tokens, buffer, ring, options);
  Kokkos::Profiling::pushRegion("kvcanary::write");
  launch_write_portable(space, functor, lanes);
  Kokkos::Profiling::popRegion();
}

}  // namespace Impl

template <class ExecutionSpace, class MemorySpace, class Index>
void write(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
           const StepTokens<MemorySpace, Index>& tokens, const CanaryBuffer<MemorySpace>& buffer,
           const ViolationRing<MemorySpace>& ring, const WriteOptions<MemorySpace>& options = WriteOptions<MemorySpace>{}) {
  const auto functor = Impl::checked_write_functor<ExecutionSpace>(write_plan, tokens, buffer, ring, options);
  Kokkos::Profiling::pushRegion("kvcanary::write");
  using Backend = Impl::WriteBackend<ExecutionSpace>;
  bool done = false;
  if constexpr (Backend::has_cuda) {
    // The CUDA path returns false, having launched nothing, when it cannot run on this space.
    if (options.algorithm != CanaryAlgorithm::Portable) done = Backend::write(space, functor);
  }
  if (!done) Impl::launch_write_portable(space, functor, Impl::TeamShape<ExecutionSpace>::write_lanes());
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
