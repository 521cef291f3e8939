#ifndef KVCANARY_REFERENCE_STATE_HPP
#define KVCANARY_REFERENCE_STATE_HPP

// The serial host reference of SPEC-CANARY §13.2 (state_plan) in the SPEC's words, the oracle of the device
// stage's tests. The stamp and the check it builds are reference::write() and reference::verify().

#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace kvcanary {
namespace reference {

struct StateInputs {
  std::vector<std::int64_t> state_slots, req_pool_indices, positions;  // [n] each
  std::vector<std::int32_t> req_to_token;                              // row-major [max_reqs, max_seq_len]
  std::int64_t max_reqs = 0, max_seq_len = 0;
  std::optional<std::vector<std::int32_t>> token_pool;  // row-major [pool_rows, pool_cols]
  std::int64_t pool_rows = 0, pool_cols = 0;
  std::optional<std::vector<std::int64_t>> identities;  // [n]
};

// The device StatePlan's data: `plan` holds the check (verify_*, enable) and the stamp's write plan
// (write_offsets, write_seed_slot_indices, write_num_valid_reqs, write_identities), `tokens` the stamp's
// token arrays. On the device the stamp's seeds, tokens and identities are the check's arrays; here they are
// copies that state_plan() writes alike.
struct StatePlan {
  Outputs plan;
  StepTokens tokens;
};

// A plan of `capacity` entries with every element (scalars too) set to `fill`, identity arrays when asked,
// and the stamp's chain-position assert on.
StatePlan make_state_plan(std::int64_t capacity, std::int64_t fill, bool with_identities = false);

// SPEC-CANARY §13.2. Throws std::invalid_argument (nothing touched) on host-side errors.
void state_plan(const StateInputs& inputs, StatePlan& plan, KernelKind kernel_kind, ViolationRing& ring);

}  // namespace reference
}  // namespace kvcanary

#endif
