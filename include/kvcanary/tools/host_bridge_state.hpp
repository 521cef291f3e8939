#ifndef KVCANARY_HOST_BRIDGE_STATE_HPP
#define KVCANARY_HOST_BRIDGE_STATE_HPP

// state_plan() (SPEC-CANARY §13.2) on host data, for tests and tools: allocates, copies and fences.

#include <kvcanary/stages/state.hpp>
#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/reference_state.hpp>

#include <vector>

namespace kvcanary {

// Uploads `state` (the check's arrays, which the device stamp shares, write_offsets and the counts) and the
// inputs, runs state_plan(), and downloads the plan into `state` (the stamp's copies from the check's
// arrays) and the ring into `ring`.
template <class ExecutionSpace>
void state_plan_host_data(const ExecutionSpace& space, const reference::StateInputs& in, reference::StatePlan& state,
                          KernelKind kernel_kind, reference::ViolationRing& ring) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  using Impl::copy_into;
  using Impl::copy_out;
  using Impl::upload;
  constexpr const char* kWhere = "state_plan_host_data";
  reference::Outputs& host = state.plan;
  const std::size_t capacity = host.verify_slot_indices.size();
  const auto sized = [&](const char* name, const std::vector<std::int64_t>& values) {
    Impl::check_same_extent(kWhere, name, values.size(), "verify_slot_indices", capacity);
  };
  sized("verify_expected_tokens", host.verify_expected_tokens);
  sized("verify_expected_positions", host.verify_expected_positions);
  sized("verify_prev_slot_indices", host.verify_prev_slot_indices);
  if (host.verify_identities) sized("verify_identities", *host.verify_identities);
  Impl::check_same_extent(kWhere, "write_offsets", host.write_offsets.size(), "verify_slot_indices + 1", capacity + 1);

  const StatePlan<MemorySpace> plan =
      allocate_state_plan(space, static_cast<std::int64_t>(capacity), host.verify_identities.has_value());
  // Every array and count of the plan with its host copy; `arrays` and `counts` are called once per pair.
  const auto each = [&](const auto& arrays, const auto& counts) {
    arrays(plan.check.verify_slot_indices, host.verify_slot_indices);
    arrays(plan.check.verify_expected_tokens, host.verify_expected_tokens);
    arrays(plan.check.verify_expected_positions, host.verify_expected_positions);
    arrays(plan.check.verify_prev_slot_indices, host.verify_prev_slot_indices);
    arrays(plan.stamp.write_offsets, host.write_offsets);
    if (host.verify_identities) arrays(*plan.check.verify_identities, *host.verify_identities);
    counts(plan.check.verify_num_valid, host.verify_num_valid);
    counts(plan.check.enable, host.enable);
    counts(plan.stamp.write_num_valid_reqs, host.write_num_valid_reqs);
  };
  each([&](const auto& device, const auto& values) { copy_into(space, device, values); },
       [&](const auto& device, const auto value) { Impl::copy_scalar_into(space, device, value); });

  StateInputs<MemorySpace> inputs;
  inputs.state_slots = upload<std::int64_t, MemorySpace>(space, "kvcanary::state_slots", in.state_slots);
  inputs.req_pool_indices = upload<std::int64_t, MemorySpace>(space, "kvcanary::req_pool_indices", in.req_pool_indices);
  inputs.positions = upload<std::int64_t, MemorySpace>(space, "kvcanary::state_positions", in.positions);
  inputs.req_to_token =
      upload<std::int32_t, MemorySpace>(space, "kvcanary::req_to_token", in.req_to_token, in.max_reqs, in.max_seq_len);
  if (in.token_pool)
    inputs.token_pool =
        upload<std::int32_t, MemorySpace>(space, "kvcanary::token_pool", *in.token_pool, in.pool_rows, in.pool_cols);
  if (in.identities)
    inputs.identities = upload<std::int64_t, MemorySpace>(space, "kvcanary::identities", *in.identities);
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);

  state_plan(space, inputs, plan, device_ring, StatePlanOptions{kernel_kind});

  each([&](const auto& device, auto& values) { copy_out(space, device, values); },
       [&](const auto& device, auto& value) { Impl::copy_scalar_out(space, device, value); });
  ring = download_violation_ring(space, device_ring);  // fences
  host.write_seed_slot_indices = host.verify_prev_slot_indices;
  if (host.verify_identities) host.write_identities = host.verify_identities;
  state.tokens.input_ids = host.verify_expected_tokens;
  state.tokens.positions = host.verify_expected_positions;
  state.tokens.out_cache_loc = host.verify_slot_indices;
}

}  // namespace kvcanary

#endif
