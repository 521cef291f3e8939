// The serial host reference of SPEC-CANARY §13.2: the entries of state records (one per state slot,
// pool row and position). Every index is compared before it is used; counters add mod 2^64.

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/tools/reference_state.hpp>

#include "reference_ring.hpp"

#include <limits>

namespace kvcanary {
namespace reference {

using detail::check_ring;
using detail::record_violation;
using detail::wrapping_add;

StatePlan make_state_plan(std::int64_t capacity, std::int64_t fill, bool with_identities) {
  StatePlan state;
  state.plan = make_outputs(capacity, capacity, fill);
  const auto n = static_cast<std::size_t>(capacity);
  if (with_identities) {
    state.plan.verify_identities = std::vector<std::int64_t>(n, fill);
    state.plan.write_identities = std::vector<std::int64_t>(n, fill);
  }
  state.tokens.input_ids = state.tokens.positions = state.tokens.out_cache_loc = std::vector<std::int64_t>(n, fill);
  state.tokens.chain_position_assert = 1;
  return state;
}

namespace {

constexpr const char* kFunction = "state_plan";

void check_state_call(const StateInputs& in, const StatePlan& state) {
  const Outputs& plan = state.plan;
  const std::size_t n = in.state_slots.size();
  if (in.req_pool_indices.size() != n || in.positions.size() != n)
    Impl::throw_invalid_in(kFunction, "state_slots, req_pool_indices and positions have ", n, ", ",
                           in.req_pool_indices.size(), " and ", in.positions.size(), " entries, must be equal");
  const std::size_t capacity = plan.verify_slot_indices.size();
  if (n > capacity) Impl::throw_invalid_in(kFunction, "got ", n, " entries, the plan's capacity is ", capacity);
  if (capacity > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    Impl::throw_invalid_in(kFunction, "the plan's capacity is ", capacity, ", must be <= 2^31 - 1");
  const auto sized = [capacity](const char* name, const std::vector<std::int64_t>& v, std::size_t extent) {
    if (v.size() != extent)
      Impl::throw_invalid_in(kFunction, "the plan's ", name, " has ", v.size(), " entries, must be ", extent,
                             " (verify_slot_indices has ", capacity, ")");
  };
  sized("verify_expected_tokens", plan.verify_expected_tokens, capacity);
  sized("verify_expected_positions", plan.verify_expected_positions, capacity);
  sized("verify_prev_slot_indices", plan.verify_prev_slot_indices, capacity);
  sized("write_seed_slot_indices", plan.write_seed_slot_indices, capacity);
  sized("write_offsets", plan.write_offsets, capacity + 1);
  sized("tokens.input_ids", state.tokens.input_ids, capacity);
  sized("tokens.positions", state.tokens.positions, capacity);
  sized("tokens.out_cache_loc", state.tokens.out_cache_loc, capacity);
  if (in.identities.has_value() != plan.verify_identities.has_value() ||
      plan.verify_identities.has_value() != plan.write_identities.has_value())
    Impl::throw_invalid_in(kFunction, "identities are ", in.identities ? "given" : "absent", " but the plan was made ",
                           plan.verify_identities ? "with" : "without", " identity arrays");
  if (in.identities && in.identities->size() != n)
    Impl::throw_invalid_in(kFunction, "identities has ", in.identities->size(), " entries, must be ", n);
  if (plan.verify_identities) {
    sized("verify_identities", *plan.verify_identities, capacity);
    sized("write_identities", *plan.write_identities, capacity);
  }
  if (!Impl::holds(in.req_to_token.size(), in.max_reqs, in.max_seq_len))
    Impl::throw_invalid_in(kFunction, "req_to_token holds ", in.req_to_token.size(), " values, not ", in.max_reqs,
                           " x ", in.max_seq_len);
  if (in.token_pool && !Impl::holds(in.token_pool->size(), in.pool_rows, in.pool_cols))
    Impl::throw_invalid_in(kFunction, "token_pool holds ", in.token_pool->size(), " values, not ", in.pool_rows, " x ",
                           in.pool_cols);
}

std::int64_t expected_token(const StateInputs& in, std::int64_t rp, std::int64_t q) {
  if (!in.token_pool || rp >= in.pool_rows || q >= in.pool_cols) return -1;
  return (*in.token_pool)[static_cast<std::size_t>(rp * in.pool_cols + q)];
}

}  // namespace

void state_plan(const StateInputs& in, StatePlan& state, KernelKind kernel_kind, ViolationRing& ring) {
  check_state_call(in, state);
  Impl::check_kernel_kind(kFunction, kernel_kind);
  check_ring(kFunction, ring);
  Outputs& plan = state.plan;
  std::int64_t made = 0;
  for (std::size_t i = 0; i < in.state_slots.size(); ++i) {
    const std::int64_t slot = in.state_slots[i], rp = in.req_pool_indices[i], q = in.positions[i];
    const auto index = static_cast<std::int64_t>(i);
    if (slot < 0 || q < 0) continue;
    if (rp < 0 || rp >= in.max_reqs) {
      record_violation(ring, kernel_kind, rp, q, -1, -1, -1, index, kOutOfRange);
      continue;
    }
    if (q >= in.max_seq_len) {
      record_violation(ring, kernel_kind, q, q, -1, -1, -1, index, kOutOfRange);
      continue;
    }
    const auto k = static_cast<std::size_t>(made);
    const std::int64_t prev = q >= 1 ? in.req_to_token[static_cast<std::size_t>(rp * in.max_seq_len + q - 1)] : -1;
    const std::int64_t token = expected_token(in, rp, q);
    plan.verify_slot_indices[k] = state.tokens.out_cache_loc[k] = slot;
    plan.verify_expected_positions[k] = state.tokens.positions[k] = q;
    plan.verify_prev_slot_indices[k] = plan.write_seed_slot_indices[k] = prev;
    plan.verify_expected_tokens[k] = state.tokens.input_ids[k] = token;
    if (in.identities) (*plan.verify_identities)[k] = (*plan.write_identities)[k] = (*in.identities)[i];
    plan.write_offsets[k] = made;
    ++made;
  }
  plan.write_offsets[static_cast<std::size_t>(made)] = made;
  plan.verify_num_valid = plan.write_num_valid_reqs = static_cast<std::int32_t>(made);
  plan.enable = 1;
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, made);
}

}  // namespace reference
}  // namespace kvcanary
