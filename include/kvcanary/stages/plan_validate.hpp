#ifndef KVCANARY_VALIDATE_HPP
#define KVCANARY_VALIDATE_HPP

// validate(): the host-side checks of SPEC §4 on the Views of a plan call. Shapes only: no device
// data is read, so validate() neither copies nor waits.

#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/plan_shape_checks.hpp>

namespace kvcanary {

template <class MemorySpace>
PlanShapes plan_shapes(const PlanInputs<MemorySpace>& inputs, const VerifyPlan<MemorySpace>& verify_plan,
                       const WritePlan<MemorySpace>& write_plan, const PlanWorkspace<MemorySpace>& workspace) {
  const auto extent = [](const auto& view, int dim = 0) { return static_cast<std::int64_t>(view.extent(dim)); };
  PlanShapes s;
  s.req_pool_indices = extent(inputs.req_pool_indices);
  s.prefix_lens = extent(inputs.prefix_lens);
  s.extend_seq_lens = extent(inputs.extend_seq_lens);
  s.req_to_token_rows = extent(inputs.req_to_token, 0);
  s.req_to_token_cols = extent(inputs.req_to_token, 1);
  s.swa_window_size = inputs.swa_window_size;
  s.has_lut = inputs.full_to_swa_index_mapping.has_value();
  if (s.has_lut) s.lut_len = extent(*inputs.full_to_swa_index_mapping);
  s.has_pool = inputs.req_to_verify_expected_tokens.has_value();
  s.has_valid_lens = inputs.req_to_verify_expected_tokens_valid_lens.has_value();
  if (s.has_valid_lens) s.valid_lens = extent(*inputs.req_to_verify_expected_tokens_valid_lens);
  s.verify_extents[0] = extent(verify_plan.verify_slot_indices);
  s.verify_extents[1] = extent(verify_plan.verify_expected_tokens);
  s.verify_extents[2] = extent(verify_plan.verify_expected_positions);
  s.verify_extents[3] = extent(verify_plan.verify_prev_slot_indices);
  s.write_req_capacity = extent(write_plan.write_seed_slot_indices);
  s.write_offsets = extent(write_plan.write_offsets);
  s.max_batch_size = workspace.max_batch_size();
  Impl::set_identity_shapes(s, inputs.req_identities, verify_plan.verify_identities, write_plan.write_identities,
                            [&](const auto& view) { return extent(view); });
  return s;
}

// The kernels read a matrix row by row, each row contiguous (column stride 1), rows `stride(0)` apart
// (docs/design.md, "Strided tables"). Throws std::invalid_argument for any other layout.
template <class Matrix>
void check_row_major(const Matrix& m, const char* name) {
  const auto rows = static_cast<std::int64_t>(m.extent(0));
  const auto cols = static_cast<std::int64_t>(m.extent(1));
  const auto row_stride = static_cast<std::int64_t>(m.stride(0));
  const auto column_stride = static_cast<std::int64_t>(m.stride(1));
  if (cols > 1 && column_stride != 1)
    Impl::throw_invalid(name, " has column stride ", column_stride,
                        ", must be 1 (each row contiguous: LayoutRight, padded or a column range of a wider table)");
  if (rows > 1 && row_stride < cols)
    Impl::throw_invalid(name, " has row stride ", row_stride, " but ", cols, " columns (its rows would overlap)");
}

// Throws std::invalid_argument (message starting "kvcanary::plan: ", naming the argument and the
// values) when the call breaks SPEC §4's host-side rules or an output scalar is not allocated.
template <class MemorySpace>
void validate(const PlanInputs<MemorySpace>& inputs, const VerifyPlan<MemorySpace>& verify_plan,
              const WritePlan<MemorySpace>& write_plan, const PlanStatus<MemorySpace>& status,
              const PlanWorkspace<MemorySpace>& workspace) {
  check_plan_shapes(plan_shapes(inputs, verify_plan, write_plan, workspace));
  check_row_major(inputs.req_to_token, "req_to_token");
  if (inputs.req_to_verify_expected_tokens)
    check_row_major(*inputs.req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  const auto require = [](const auto& scalar, const char* name) {
    if (scalar.data() == nullptr) Impl::throw_invalid(name, " is not allocated");
  };
  require(verify_plan.verify_num_valid, "verify_num_valid");
  require(verify_plan.enable, "enable");
  require(write_plan.write_num_valid_reqs, "write_num_valid_reqs");
  require(status.input_error_bits, "input_error_bits");
  require(status.first_bad_row, "first_bad_row");
}

}  // namespace kvcanary

#endif
