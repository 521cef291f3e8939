#ifndef KVCANARY_REFERENCE_HPP
#define KVCANARY_REFERENCE_HPP

// reference::plan(): the serial host model of SPEC §4, written straight from the text on std::vector.
// It is the oracle of the tests and of `kvcanary check`; it shares nothing with the kernels
// except the host-side shape checks (shape_checks.hpp), so both reject the same calls the same way.

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvcanary {
namespace reference {

struct Inputs {
  std::vector<std::int64_t> req_pool_indices;
  std::vector<std::int64_t> prefix_lens;
  std::vector<std::int64_t> extend_seq_lens;
  std::vector<std::int32_t> req_to_token;  // row-major [max_reqs, max_seq_len]
  std::int64_t max_reqs = 0;
  std::int64_t max_seq_len = 0;
  int swa_window_size = 0;
  std::optional<std::vector<std::int64_t>> full_to_swa_index_mapping;
  std::optional<std::vector<std::int32_t>> req_to_verify_expected_tokens;  // row-major [pool_rows, pool_cols]
  std::int64_t pool_rows = 0;
  std::int64_t pool_cols = 0;
  std::optional<std::vector<std::int64_t>> req_to_verify_expected_tokens_valid_lens;
  int kv_token_id_vs_position_offset = 0;
  std::optional<std::vector<std::int64_t>> req_identities;  // [bs], SPEC-CANARY §11.7
};

struct Outputs {
  std::vector<std::int64_t> verify_slot_indices;        // [verify_capacity]
  std::vector<std::int64_t> verify_expected_tokens;     // [verify_capacity]
  std::vector<std::int64_t> verify_expected_positions;  // [verify_capacity]
  std::vector<std::int64_t> verify_prev_slot_indices;   // [verify_capacity]
  std::int32_t verify_num_valid = 0;
  std::int32_t enable = 0;
  std::vector<std::int64_t> write_offsets;            // [write_req_capacity + 1]
  std::vector<std::int64_t> write_seed_slot_indices;  // [write_req_capacity]
  std::int32_t write_num_valid_reqs = 0;
  std::int32_t input_error_bits = 0;
  std::int32_t first_bad_row = 0;
  // SPEC-CANARY §11.7: present exactly when the inputs' req_identities is.
  std::optional<std::vector<std::int64_t>> verify_identities;  // [verify_capacity]
  std::optional<std::vector<std::int64_t>> write_identities;   // [write_req_capacity]
};

// Outputs of the given capacities with every element (scalars too) set to `fill`.
Outputs make_outputs(std::int64_t verify_capacity, std::int64_t write_req_capacity, std::int64_t fill);

// The verify plan (SPEC-CANARY §5) of `entries` (slot, expected position, prev slot, expected token), in
// order, all valid and enabled; no write plan. Built by hand, not by plan(): for tests and tools that
// check prefixes they name themselves.
Outputs verify_plan_of(const std::vector<std::array<std::int64_t, 4>>& entries);

// The shapes of a call, as check_plan_shapes() sees them.
PlanShapes shapes_of(const Inputs& inputs, const Outputs& outputs);

// Throws std::invalid_argument when a flat matrix does not hold rows x cols values.
void check_flat_sizes(const Inputs& inputs);

// Checks the shapes (throws std::invalid_argument, outputs untouched), then writes `outputs`
// exactly as SPEC §4 says, leaving alone what it says to leave alone.
void plan(const Inputs& inputs, Outputs& outputs);

}  // namespace reference
}  // namespace kvcanary

#endif
