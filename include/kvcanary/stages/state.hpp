#ifndef KVCANARY_STATE_HPP
#define KVCANARY_STATE_HPP

// State records (SPEC-CANARY §13): a request's recurrent or compressed state (Mamba/SSM state slot) holds
// the record of the last position it summarises, stamped by write() and checked by verify() with the
// entries state_plan() builds from (state slot, pool row, position) triples.
//
//   auto plan = allocate_state_plan(space, capacity[, with_identities]);         // once
//   state_plan(space, inputs, plan, ring[, options]);   // positions = L - 1 (resume) or p (after the update)
//   verify(space, plan.check, buffer, ring);            // before a forward that resumes from the states
//   write(space, plan.stamp, plan.tokens, buffer, ring); // after the update, and after the step's KV write
//
// * State slot j lives at canary slot kv_slots + j of the attention group's buffer; the group's own stages
//   take leading_slots(buffer, kv_slots), the state stages the whole buffer with real-KV mode NONE.
// * Entry k is check entry (slot, q, prev, token) and stamp request k (one token, seed prev): the arrays are
//   shared. Padding (a negative slot or position) makes no entry; a pool row or position outside
//   req_to_token gives an OUT_OF_RANGE row and no entry. kernel_run_counter += 1; slot_run_counter += the
//   entries made.
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph). Host-side errors throw std::invalid_argument before any launch.

#include <kvcanary/impl/state_plan_portable.hpp>
#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace kvcanary {

// SPEC-CANARY §13.2: one triple per request that carries a state (the engine's padded batch included).
template <class MemorySpace>
struct StateInputs {
  using memory_space = MemorySpace;
  template <class T>
  using Vector = typename PlanInputs<MemorySpace>::template Vector<T>;  // the plan's input types
  template <class T>
  using Matrix = typename PlanInputs<MemorySpace>::template Matrix<T>;

  Vector<std::int64_t> state_slots;       // [n] canary slot of the state record (kv_slots + j); < 0: padding
  Vector<std::int64_t> req_pool_indices;  // [n] pool row of the request
  Vector<std::int64_t> positions;         // [n] the last position the state summarises (p, or L - 1); < 0: none
  Matrix<std::int32_t> req_to_token;      // [max_reqs, max_seq_len] of the group the records chain to
  std::optional<Matrix<std::int32_t>> token_pool;  // [pool_rows, pool_cols]: token per (pool row, position)
  std::optional<Vector<std::int64_t>> identities;  // [n] SPEC-CANARY §11.7, given exactly when the plan has them

  std::int64_t size() const { return static_cast<std::int64_t>(state_slots.extent(0)); }
};

// The entries as a verify plan (the check) and a write plan with its tokens (the stamp), sharing arrays.
template <class MemorySpace>
struct StatePlan {
  using memory_space = MemorySpace;
  VerifyPlan<MemorySpace> check;
  WritePlan<MemorySpace> stamp;
  StepTokens<MemorySpace, std::int64_t> tokens;

  std::int64_t capacity() const { return check.capacity(); }
};

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
StatePlan<MemorySpace> allocate_state_plan(const ExecutionSpace& space, std::int64_t capacity,
                                           bool with_identities = false) {
  if (capacity < 0 || capacity > std::numeric_limits<std::int32_t>::max())
    Impl::throw_invalid_in("allocate_state_plan", "capacity is ", capacity,
                           ", must be in [0, 2^31 - 1] (the counts are int32)");
  StatePlan<MemorySpace> plan;
  plan.check = allocate_verify_plan<ExecutionSpace, MemorySpace>(space, capacity, with_identities);
  WritePlan<MemorySpace>& stamp = plan.stamp;
  stamp.write_offsets = Impl::allocate_zeroed<Kokkos::View<std::int64_t*, MemorySpace>>(
      space, "kvcanary::state::write_offsets", static_cast<std::size_t>(capacity) + 1);
  stamp.write_seed_slot_indices = plan.check.verify_prev_slot_indices;
  stamp.write_num_valid_reqs =
      Impl::allocate_zeroed<Kokkos::View<std::int32_t, MemorySpace>>(space, "kvcanary::state::write_num_valid_reqs");
  stamp.write_identities = plan.check.verify_identities;
  plan.tokens.input_ids = plan.check.verify_expected_tokens;
  plan.tokens.positions = plan.check.verify_expected_positions;
  plan.tokens.out_cache_loc = plan.check.verify_slot_indices;
  Kokkos::View<std::int32_t, MemorySpace> assert_on(
      Kokkos::view_alloc(space, "kvcanary::state::chain_position_assert"));
  Kokkos::deep_copy(space, assert_on, 1);
  plan.tokens.chain_position_assert = assert_on;
  return plan;
}

// The first num_slots records of `buffer`, over the same bytes: the KV group's view of a buffer whose
// state records follow its KV slots (SPEC-CANARY §13.1).
template <class MemorySpace>
CanaryBuffer<MemorySpace> leading_slots(const CanaryBuffer<MemorySpace>& buffer, std::int64_t num_slots) {
  if (num_slots < 0 || num_slots > buffer.num_slots())
    Impl::throw_invalid_in("leading_slots", "num_slots is ", num_slots, ", must be in [0, ", buffer.num_slots(), "]");
  return CanaryBuffer<MemorySpace>{Kokkos::subview(
      buffer.records, std::make_pair(std::size_t{0}, static_cast<std::size_t>(num_slots)), Kokkos::ALL())};
}

struct StatePlanOptions {
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;  // the tag of OUT_OF_RANGE rows
};

template <class ExecutionSpace, class MemorySpace>
void state_plan(const ExecutionSpace& space, const StateInputs<MemorySpace>& inputs, const StatePlan<MemorySpace>& plan,
                const ViolationRing<MemorySpace>& ring, const StatePlanOptions& options = StatePlanOptions{}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::state_plan: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_memory_space<MemorySpace>::value,
                "kvcanary::state_plan: the state types must be templated on a Kokkos memory space");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::state_plan: the canary's memory space must be accessible from the execution space");
  constexpr const char* kWhere = "state_plan";
  using Impl::extent_of;
  const std::int64_t n = inputs.size();
  if (extent_of(inputs.req_pool_indices) != n || extent_of(inputs.positions) != n)
    Impl::throw_invalid_in(kWhere, "state_slots, req_pool_indices and positions have ", n, ", ",
                           extent_of(inputs.req_pool_indices), " and ", extent_of(inputs.positions),
                           " entries, must be equal");
  const std::int64_t capacity = plan.capacity();
  if (n > capacity) Impl::throw_invalid_in(kWhere, "got ", n, " entries, the plan's capacity is ", capacity);
  if (capacity > std::numeric_limits<std::int32_t>::max())
    Impl::throw_invalid_in(kWhere, "the plan's capacity is ", capacity, ", must be <= 2^31 - 1");
  const auto sized = [&](const char* name, const auto& view, std::int64_t extent) {
    if (extent_of(view) != extent)
      Impl::throw_invalid_in(kWhere, "the plan's ", name, " has ", extent_of(view), " entries, must be ", extent,
                             " (verify_slot_indices has ", capacity, ")");
  };
  sized("verify_expected_tokens", plan.check.verify_expected_tokens, capacity);
  sized("verify_expected_positions", plan.check.verify_expected_positions, capacity);
  sized("verify_prev_slot_indices", plan.check.verify_prev_slot_indices, capacity);
  sized("write_offsets", plan.stamp.write_offsets, capacity + 1);
  const auto& check = plan.check;
  const auto& stamp_ids = plan.stamp.write_identities;
  const bool identities_shared = check.verify_identities.has_value() == stamp_ids.has_value() &&
                                 (!stamp_ids || check.verify_identities->data() == stamp_ids->data());
  if (plan.stamp.write_seed_slot_indices.data() != check.verify_prev_slot_indices.data() ||
      plan.tokens.input_ids.data() != check.verify_expected_tokens.data() ||
      plan.tokens.positions.data() != check.verify_expected_positions.data() ||
      plan.tokens.out_cache_loc.data() != check.verify_slot_indices.data() || !identities_shared)
    Impl::throw_invalid_in(kWhere, "the plan's stamp does not share the check's arrays (use allocate_state_plan)");
  const auto count = [&](const char* name, const auto& view) {
    if (view.data() == nullptr)
      Impl::throw_invalid_in(kWhere, "the plan's ", name, " is not allocated (use allocate_state_plan)");
  };
  count("verify_num_valid", plan.check.verify_num_valid);
  count("enable", plan.check.enable);
  count("write_num_valid_reqs", plan.stamp.write_num_valid_reqs);
  if (inputs.identities.has_value() != plan.check.verify_identities.has_value())
    Impl::throw_invalid_in(kWhere, "identities are ", inputs.identities ? "given" : "absent",
                           " but the plan was allocated ", plan.check.verify_identities ? "with" : "without",
                           " identity arrays");
  if (inputs.identities && extent_of(*inputs.identities) != n)
    Impl::throw_invalid_in(kWhere, "identities has ", extent_of(*inputs.identities), " entries, must be ", n);
  if (plan.check.verify_identities && extent_of(*plan.check.verify_identities) != capacity)
    Impl::throw_invalid_in(kWhere, "the plan's identity array has ", extent_of(*plan.check.verify_identities),
                           " entries, must be ", capacity);
  // Entries from the extents: Kokkos 5's size() is 0 for a View without memory, whatever its extents.
  const auto allocated = [&](const char* name, const auto& view) {
    using View = std::decay_t<decltype(view)>;
    const std::int64_t entries = View::rank == 1 ? extent_of(view, 0) : extent_of(view, 0) * extent_of(view, 1);
    if (entries > 0 && view.data() == nullptr)
      Impl::throw_invalid_in(kWhere, name, " has ", entries, " entries but no memory");
  };
  allocated("state_slots", inputs.state_slots);
  allocated("req_pool_indices", inputs.req_pool_indices);
  allocated("positions", inputs.positions);
  allocated("req_to_token", inputs.req_to_token);
  if (inputs.token_pool) allocated("token_pool", *inputs.token_pool);
  if (inputs.identities) allocated("identities", *inputs.identities);
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, options.kernel_kind);

  Impl::StatePlanFunctor<MemorySpace> functor{};
  functor.state_slots = inputs.state_slots;
  functor.req_pool_indices = inputs.req_pool_indices;
  functor.positions = inputs.positions;
  functor.req_to_token = inputs.req_to_token;
  if (inputs.token_pool) functor.token_pool = *inputs.token_pool;
  if (inputs.identities) {
    functor.identities = *inputs.identities;
    functor.entry_identities = *plan.check.verify_identities;
  }
  functor.slots = plan.check.verify_slot_indices;
  functor.tokens = plan.check.verify_expected_tokens;
  functor.entry_positions = plan.check.verify_expected_positions;
  functor.prevs = plan.check.verify_prev_slot_indices;
  functor.offsets = plan.stamp.write_offsets;
  functor.verify_num_valid = plan.check.verify_num_valid;
  functor.enable = plan.check.enable;
  functor.write_num_valid_reqs = plan.stamp.write_num_valid_reqs;
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  functor.n = n;
  Kokkos::Profiling::pushRegion("kvcanary::state_plan");
  Impl::launch_state_plan_portable(space, functor);
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
