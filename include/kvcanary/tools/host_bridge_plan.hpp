#ifndef KVCANARY_HOST_BRIDGE_HPP
#define KVCANARY_HOST_BRIDGE_HPP

// Moving a plan call's data between host vectors (the reference's types) and Views in a memory space.
// For tests, the CLI, benchmarks and tools: these functions allocate and copy, and
// plan_host_data() fences. Engines build PlanInputs over their own device buffers instead.

#include <kvcanary/stages/plan.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <string>
#include <vector>

namespace kvcanary {

namespace Impl {

template <class T, class MemorySpace, class ExecutionSpace>
Kokkos::View<T*, Kokkos::LayoutRight, MemorySpace> upload(const ExecutionSpace& space, const std::string& label,
                                                          const std::vector<T>& values) {
  Kokkos::View<T*, Kokkos::LayoutRight, MemorySpace> view(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label),
                                                          values.size());
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(values.data(), values.size());
  Kokkos::deep_copy(space, view, host);
  return view;
}

template <class T, class MemorySpace, class ExecutionSpace>
Kokkos::View<T**, Kokkos::LayoutRight, MemorySpace> upload(const ExecutionSpace& space, const std::string& label,
                                                           const std::vector<T>& values, std::int64_t rows,
                                                           std::int64_t cols) {
  Kokkos::View<T**, Kokkos::LayoutRight, MemorySpace> view(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), rows, cols);
  Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
      values.data(), rows, cols);
  Kokkos::deep_copy(space, view, host);
  return view;
}

template <class View, class T, class ExecutionSpace>
void copy_into(const ExecutionSpace& space, const View& device, const std::vector<T>& values) {
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(values.data(), values.size());
  Kokkos::deep_copy(space, device, host);
}

template <class View, class T, class ExecutionSpace>
void copy_out(const ExecutionSpace& space, const View& device, std::vector<T>& values) {
  values.resize(device.extent(0));
  Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(values.data(), values.size());
  Kokkos::deep_copy(space, host, device);
}

template <class View, class T, class ExecutionSpace>
void copy_scalar_into(const ExecutionSpace& space, const View& device, T value) {
  Kokkos::deep_copy(space, device, value);
}

template <class View, class T, class ExecutionSpace>
void copy_scalar_out(const ExecutionSpace& space, const View& device, T& value) {
  Kokkos::View<T, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(&value);
  Kokkos::deep_copy(space, host, device);
}

// Throws std::invalid_argument ("kvcanary::<function>: <name> has N entries but <what> has M") unless the
// host array and the device array have one extent: checked before any copy, never inside Kokkos.
inline void check_same_extent(const char* function, const char* name, std::size_t host, const char* what,
                              std::size_t device) {
  if (host != device) throw_invalid_in(function, name, " has ", host, " entries but ", what, " has ", device);
}

}  // namespace Impl

// Device copies of host inputs (the shapes are carried over as they are, valid or not).
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
PlanInputs<MemorySpace> upload_inputs(const ExecutionSpace& space, const reference::Inputs& host) {
  using Impl::upload;
  PlanInputs<MemorySpace> in;
  in.req_pool_indices = upload<std::int64_t, MemorySpace>(space, "kvcanary::req_pool_indices", host.req_pool_indices);
  in.prefix_lens = upload<std::int64_t, MemorySpace>(space, "kvcanary::prefix_lens", host.prefix_lens);
  in.extend_seq_lens = upload<std::int64_t, MemorySpace>(space, "kvcanary::extend_seq_lens", host.extend_seq_lens);
  in.req_to_token = upload<std::int32_t, MemorySpace>(space, "kvcanary::req_to_token", host.req_to_token, host.max_reqs,
                                                      host.max_seq_len);
  in.swa_window_size = host.swa_window_size;
  in.kv_token_id_vs_position_offset = host.kv_token_id_vs_position_offset;
  if (host.full_to_swa_index_mapping)
    in.full_to_swa_index_mapping = upload<std::int64_t, MemorySpace>(space, "kvcanary::full_to_swa_index_mapping",
                                                                     *host.full_to_swa_index_mapping);
  if (host.req_to_verify_expected_tokens)
    in.req_to_verify_expected_tokens =
        upload<std::int32_t, MemorySpace>(space, "kvcanary::req_to_verify_expected_tokens",
                                          *host.req_to_verify_expected_tokens, host.pool_rows, host.pool_cols);
  if (host.req_to_verify_expected_tokens_valid_lens)
    in.req_to_verify_expected_tokens_valid_lens = upload<std::int64_t, MemorySpace>(
        space, "kvcanary::req_to_verify_expected_tokens_valid_lens", *host.req_to_verify_expected_tokens_valid_lens);
  if (host.req_identities)
    in.req_identities = upload<std::int64_t, MemorySpace>(space, "kvcanary::req_identities", *host.req_identities);
  return in;
}

// Every output of the plan (arrays and scalars) set to the host values, e.g. to poison it. Throws
// std::invalid_argument, having copied nothing, when a host array's length is not its device array's.
template <class ExecutionSpace, class MemorySpace>
void upload_outputs(const ExecutionSpace& space, const reference::Outputs& host, const VerifyPlan<MemorySpace>& v,
                    const WritePlan<MemorySpace>& w, const PlanStatus<MemorySpace>& s) {
  using Impl::copy_into;
  using Impl::copy_scalar_into;
  const auto same = [](const char* name, const std::vector<std::int64_t>& host, const auto& device) {
    Impl::check_same_extent("upload_outputs", name, host.size(), "the device array", device.extent(0));
  };
  same("verify_slot_indices", host.verify_slot_indices, v.verify_slot_indices);
  same("verify_expected_tokens", host.verify_expected_tokens, v.verify_expected_tokens);
  same("verify_expected_positions", host.verify_expected_positions, v.verify_expected_positions);
  same("verify_prev_slot_indices", host.verify_prev_slot_indices, v.verify_prev_slot_indices);
  same("write_offsets", host.write_offsets, w.write_offsets);
  same("write_seed_slot_indices", host.write_seed_slot_indices, w.write_seed_slot_indices);
  if (host.verify_identities.has_value() != v.verify_identities.has_value() ||
      host.write_identities.has_value() != w.write_identities.has_value())
    Impl::throw_invalid_in("upload_outputs", "the host and device plans disagree on holding identities");
  if (host.verify_identities) same("verify_identities", *host.verify_identities, *v.verify_identities);
  if (host.write_identities) same("write_identities", *host.write_identities, *w.write_identities);
  if (host.verify_identities) copy_into(space, *v.verify_identities, *host.verify_identities);
  if (host.write_identities) copy_into(space, *w.write_identities, *host.write_identities);
  copy_into(space, v.verify_slot_indices, host.verify_slot_indices);
  copy_into(space, v.verify_expected_tokens, host.verify_expected_tokens);
  copy_into(space, v.verify_expected_positions, host.verify_expected_positions);
  copy_into(space, v.verify_prev_slot_indices, host.verify_prev_slot_indices);
  copy_scalar_into(space, v.verify_num_valid, host.verify_num_valid);
  copy_scalar_into(space, v.enable, host.enable);
  copy_into(space, w.write_offsets, host.write_offsets);
  copy_into(space, w.write_seed_slot_indices, host.write_seed_slot_indices);
  copy_scalar_into(space, w.write_num_valid_reqs, host.write_num_valid_reqs);
  copy_scalar_into(space, s.input_error_bits, host.input_error_bits);
  copy_scalar_into(space, s.first_bad_row, host.first_bad_row);
}

// Copies every output back to the host and fences `space`.
template <class ExecutionSpace, class MemorySpace>
void download_outputs(const ExecutionSpace& space, const VerifyPlan<MemorySpace>& v, const WritePlan<MemorySpace>& w,
                      const PlanStatus<MemorySpace>& s, reference::Outputs& host) {
  using Impl::copy_out;
  using Impl::copy_scalar_out;
  copy_out(space, v.verify_slot_indices, host.verify_slot_indices);
  copy_out(space, v.verify_expected_tokens, host.verify_expected_tokens);
  copy_out(space, v.verify_expected_positions, host.verify_expected_positions);
  copy_out(space, v.verify_prev_slot_indices, host.verify_prev_slot_indices);
  copy_scalar_out(space, v.verify_num_valid, host.verify_num_valid);
  copy_scalar_out(space, v.enable, host.enable);
  copy_out(space, w.write_offsets, host.write_offsets);
  copy_out(space, w.write_seed_slot_indices, host.write_seed_slot_indices);
  copy_scalar_out(space, w.write_num_valid_reqs, host.write_num_valid_reqs);
  copy_scalar_out(space, s.input_error_bits, host.input_error_bits);
  copy_scalar_out(space, s.first_bad_row, host.first_bad_row);
  if (v.verify_identities) {
    host.verify_identities.emplace();
    copy_out(space, *v.verify_identities, *host.verify_identities);
  }
  if (w.write_identities) {
    host.write_identities.emplace();
    copy_out(space, *w.write_identities, *host.write_identities);
  }
  space.fence();
}

// The library's plan() on host data: uploads `inputs`, starts from the current contents of `outputs`
// (so untouched elements can be checked), runs on `space`, and writes the results back into `outputs`.
// Throws std::invalid_argument, leaving `outputs` untouched, for a call that plan() would reject.
template <class ExecutionSpace>
void plan_host_data(const ExecutionSpace& space, const reference::Inputs& inputs, reference::Outputs& outputs,
                    const PlanOptions& options = PlanOptions{}) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  check_plan_shapes(reference::shapes_of(inputs, outputs));
  reference::check_flat_sizes(inputs);  // before anything is read for the upload
  const auto n = static_cast<std::int64_t>(outputs.verify_slot_indices.size());
  const auto w = static_cast<std::int64_t>(outputs.write_seed_slot_indices.size());
  VerifyPlan<MemorySpace> verify_plan = allocate_verify_plan(space, n, outputs.verify_identities.has_value());
  // write_offsets: w + 1, checked above
  WritePlan<MemorySpace> write_plan = allocate_write_plan(space, w, outputs.write_identities.has_value());
  PlanStatus<MemorySpace> status = allocate_plan_status(space);
  PlanWorkspace<MemorySpace> workspace =
      allocate_plan_workspace(space, static_cast<std::int64_t>(inputs.req_pool_indices.size()));
  const PlanInputs<MemorySpace> device_inputs = upload_inputs(space, inputs);
  upload_outputs(space, outputs, verify_plan, write_plan, status);
  plan(space, device_inputs, verify_plan, write_plan, status, workspace, options);
  download_outputs(space, verify_plan, write_plan, status, outputs);
}

}  // namespace kvcanary

#endif
