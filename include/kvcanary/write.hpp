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
// * Host-side errors (shapes, strides, sources, kinds) throw std::invalid_argument before any launch.
//   Wrong device data (offsets past the token arrays, slots past the buffer) gives OUT_OF_RANGE rows.

#include <kvcanary/canary_types.hpp>
#include <kvcanary/canary_validate.hpp>
#include <kvcanary/impl/write_portable.hpp>
#include <kvcanary/plan_types.hpp>

#include <type_traits>

namespace kvcanary {

namespace Impl {

// write() with `lanes` threads per request (impl/write_portable.hpp); the tests run several widths.
template <class ExecutionSpace, class MemorySpace, class Index>
void write_with_lanes(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
                      const StepTokens<MemorySpace, Index>& tokens, const CanaryBuffer<MemorySpace>& buffer,
                      const ViolationRing<MemorySpace>& ring, const WriteOptions<MemorySpace>& options, int lanes) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::write: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::write: the canary's memory space must be accessible from the execution space");
  static_assert(std::is_same<Index, std::int64_t>::value || std::is_same<Index, std::int32_t>::value,
                "kvcanary::write: token arrays hold int64 or int32");
  using Impl::throw_invalid_in;
  constexpr const char* kWhere = "write";
  const std::int64_t num_tokens = tokens.num_tokens();
  if (Impl::extent_of(tokens.positions) != num_tokens || Impl::extent_of(tokens.out_cache_loc) != num_tokens)
    throw_invalid_in(kWhere, "input_ids, positions and out_cache_loc have ", num_tokens, ", ", Impl::extent_of(tokens.positions),
                     " and ", Impl::extent_of(tokens.out_cache_loc), " entries, must be equal");
  if (tokens.expected_input_ids.has_value() != tokens.expected_positions.has_value())
    throw_invalid_in(kWhere, "expected_input_ids and expected_positions must be given both or neither");
  if (tokens.expected_input_ids &&
      (Impl::extent_of(*tokens.expected_input_ids) != num_tokens || Impl::extent_of(*tokens.expected_positions) != num_tokens))
    throw_invalid_in(kWhere, "expected_input_ids and expected_positions have ", Impl::extent_of(*tokens.expected_input_ids),
                     " and ", Impl::extent_of(*tokens.expected_positions), " entries, must be num_tokens = ", num_tokens);
  if (tokens.chain_position_assert.data() == nullptr) throw_invalid_in(kWhere, "chain_position_assert is not allocated");
  if (Impl::extent_of(write_plan.write_offsets) - 1 != write_plan.capacity())
    throw_invalid_in(kWhere, "write_offsets has ", Impl::extent_of(write_plan.write_offsets),
                     " entries, must be write_req_capacity + 1 (write_seed_slot_indices has ", write_plan.capacity(), ")");
  if (write_plan.write_num_valid_reqs.data() == nullptr) throw_invalid_in(kWhere, "write_num_valid_reqs is not allocated");
  Impl::check_buffer(kWhere, buffer);
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, options.kernel_kind);

  Impl::WriteFunctor<ExecutionSpace, MemorySpace, Index> functor{};
  functor.plan = Impl::DeviceWritePlan<MemorySpace>(write_plan);
  functor.tokens = Impl::DeviceStepTokens<MemorySpace, Index>(tokens);
  functor.buffer = Impl::DeviceBuffer<MemorySpace>(buffer);
  functor.real_kv = Impl::device_real_kv(kWhere, options.real_kv, buffer.num_slots());
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);

  Kokkos::Profiling::pushRegion("kvcanary::write");
  Impl::launch_write_portable(space, functor, lanes);
  Kokkos::Profiling::popRegion();
}

}  // namespace Impl

template <class ExecutionSpace, class MemorySpace, class Index>
void write(const ExecutionSpace& space, const WritePlan<MemorySpace>& write_plan,
           const StepTokens<MemorySpace, Index>& tokens, const CanaryBuffer<MemorySpace>& buffer,
           const ViolationRing<MemorySpace>& ring, const WriteOptions<MemorySpace>& options = WriteOptions<MemorySpace>{}) {
  Impl::write_with_lanes(space, write_plan, tokens, buffer, ring, options, Impl::TeamShape<ExecutionSpace>::write_lanes());
}

}  // namespace kvcanary

#endif
