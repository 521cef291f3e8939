#ifndef KVCANARY_IMPL_DEVICE_OUTPUTS_HPP
#define KVCANARY_IMPL_DEVICE_OUTPUTS_HPP

// Unmanaged handles to everything a plan call writes (outputs, status, workspace), for small kernels.

#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct DeviceOutputs {
  using Array = Kokkos::View<std::int64_t*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Scalar = Kokkos::View<std::int32_t, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  Array verify_slot_indices, verify_expected_tokens, verify_expected_positions, verify_prev_slot_indices;
  Scalar verify_num_valid, enable;
  Array write_offsets, write_seed_slot_indices;
  Scalar write_num_valid_reqs, input_error_bits, first_bad_row;
  Array verify_offsets;  // workspace

  DeviceOutputs() = default;
  DeviceOutputs(const VerifyPlan<MemorySpace>& v, const WritePlan<MemorySpace>& w, const PlanStatus<MemorySpace>& s,
                const PlanWorkspace<MemorySpace>& ws)
      : verify_slot_indices(v.verify_slot_indices.data(), v.verify_slot_indices.extent(0)),
        verify_expected_tokens(v.verify_expected_tokens.data(), v.verify_expected_tokens.extent(0)),
        verify_expected_positions(v.verify_expected_positions.data(), v.verify_expected_positions.extent(0)),
        verify_prev_slot_indices(v.verify_prev_slot_indices.data(), v.verify_prev_slot_indices.extent(0)),
        verify_num_valid(v.verify_num_valid.data()),
        enable(v.enable.data()),
        write_offsets(w.write_offsets.data(), w.write_offsets.extent(0)),
        write_seed_slot_indices(w.write_seed_slot_indices.data(), w.write_seed_slot_indices.extent(0)),
        write_num_valid_reqs(w.write_num_valid_reqs.data()),
        input_error_bits(s.input_error_bits.data()),
        first_bad_row(s.first_bad_row.data()),
        verify_offsets(ws.verify_offsets.data(), ws.verify_offsets.extent(0)) {}

  KOKKOS_INLINE_FUNCTION std::int64_t verify_capacity() const {
    return static_cast<std::int64_t>(verify_slot_indices.extent(0));
  }
  KOKKOS_INLINE_FUNCTION std::int64_t write_req_capacity() const {
    return static_cast<std::int64_t>(write_seed_slot_indices.extent(0));
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif
