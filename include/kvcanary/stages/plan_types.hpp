#ifndef KVCANARY_PLAN_TYPES_HPP
#define KVCANARY_PLAN_TYPES_HPP

// The data of a plan call (SPEC §2–§3): inputs, outputs, status, scratch and options.
// Every type is a bundle of Kokkos Views in one memory space; copying one copies handles, not data.

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace kvcanary {

// Input error bits of SPEC §4, OR-ed into PlanStatus::input_error_bits.
enum InputErrorBits : std::int32_t {
  kBadPoolIndex = 1,  // req_pool_indices[r] outside [0, max_reqs)
  kBadPrefixLen = 2,  // prefix_lens[r] > max_seq_len
  kBadPoolRow = 4,    // with a pool: pool row outside [0, pool_rows) or valid_lens[r] > pool_cols
  kBadExtendLen = 8,  // extend_seq_lens[r] > 2^31 - 1 (no step writes that many; keeps every sum inside int64)
};

// The largest extend_seq_lens of a good row (SPEC §4, bit 8).
constexpr std::int64_t kMaxExtendLen = std::numeric_limits<std::int32_t>::max();

// Which implementation expands the verify entries (the offsets stage is the same for all).
enum class EntriesAlgorithm {
  Default,         // the backend trait decides (CUDA: persistent kernel, elsewhere: portable)
  Portable,        // Kokkos TeamPolicy expansion, on every backend
  CudaPersistent,  // raw CUDA persistent kernel; falls back to Portable where it cannot run
};

struct PlanOptions {
  EntriesAlgorithm algorithm = EntriesAlgorithm::Default;
};

// SPEC §2. Optional inputs are std::optional: "absent" and "present but empty" differ
// (an empty LUT is an error, an absent one means identity).
template <class MemorySpace>
struct PlanInputs {
  using memory_space = MemorySpace;
  template <class T>
  using Vector = Kokkos::View<const T*, Kokkos::LayoutRight, MemorySpace>;
  // Any 2-D layout converts to LayoutStride (LayoutRight, a padded LayoutRight, a column range of a wider
  // table, LayoutLeft, ...); validate() accepts those whose rows are contiguous (column stride 1) and
  // do not overlap, and the kernels honour the row stride.
  template <class T>
  using Matrix = Kokkos::View<const T**, Kokkos::LayoutStride, MemorySpace>;

  Vector<std::int64_t> req_pool_indices;                                         // [bs]; 0 = padding row
  Vector<std::int64_t> prefix_lens;                                              // [bs]
  Vector<std::int64_t> extend_seq_lens;                                          // [bs]
  Matrix<std::int32_t> req_to_token;                                             // [max_reqs, max_seq_len]
  int swa_window_size = 0;                                                       // 0: full attention; > 0: window width
  std::optional<Vector<std::int64_t>> full_to_swa_index_mapping;                 // LUT, [lut_len]
  std::optional<Matrix<std::int32_t>> req_to_verify_expected_tokens;             // pool, [rows, cols]
  std::optional<Vector<std::int64_t>> req_to_verify_expected_tokens_valid_lens;  // [bs]
  int kv_token_id_vs_position_offset = 0;                                        // 0 target pools, +1 draft pools
  // SPEC-CANARY §11.7: a 64-bit identity per batch row (LoRA adapter, cache salt, multimodal hash; 0 = none),
  // copied into the plans' verify_identities / write_identities. Given exactly when the plans hold them.
  std::optional<Vector<std::int64_t>> req_identities;                            // [bs]

  std::int64_t batch_size() const { return static_cast<std::int64_t>(req_pool_indices.extent(0)); }
};

// Views over buffers the caller owns, in MemorySpace (unmanaged: kvcanary never frees them), e.g.
//   inputs.req_pool_indices = kvcanary::unmanaged_vector<Kokkos::CudaSpace>(device_ptr, bs);
template <class MemorySpace, class T>
Kokkos::View<const T*, Kokkos::LayoutRight, MemorySpace> unmanaged_vector(const T* data, std::int64_t size) {
  return Kokkos::View<const T*, Kokkos::LayoutRight, MemorySpace>(data, static_cast<std::size_t>(size));
}

// A row-major [rows, cols] matrix over a buffer the caller owns, whose rows start `row_stride` elements
// apart (default: cols, no padding), e.g. an engine's page table padded to an aligned row length.
template <class MemorySpace, class T>
Kokkos::View<const T**, Kokkos::LayoutStride, MemorySpace> unmanaged_matrix(const T* data, std::int64_t rows,
                                                                            std::int64_t cols,
                                                                            std::int64_t row_stride = -1) {
  const auto stride = static_cast<std::size_t>(row_stride < 0 ? cols : row_stride);
  return Kokkos::View<const T**, Kokkos::LayoutStride, MemorySpace>(
      data, Kokkos::LayoutStride(static_cast<std::size_t>(rows), stride, static_cast<std::size_t>(cols), 1));
}

// SPEC §3, VerifyPlan: four arrays of extent verify_capacity and two scalars.
template <class MemorySpace>
struct VerifyPlan {
  using memory_space = MemorySpace;
  Kokkos::View<std::int64_t*, MemorySpace> verify_slot_indices;
  Kokkos::View<std::int64_t*, MemorySpace> verify_expected_tokens;
  Kokkos::View<std::int64_t*, MemorySpace> verify_expected_positions;
  Kokkos::View<std::int64_t*, MemorySpace> verify_prev_slot_indices;
  Kokkos::View<std::int32_t, MemorySpace> verify_num_valid;
  Kokkos::View<std::int32_t, MemorySpace> enable;
  // SPEC-CANARY §11.7, optional: the identity of each entry's request (allocate_verify_plan(..., true)).
  std::optional<Kokkos::View<std::int64_t*, MemorySpace>> verify_identities;

  std::int64_t capacity() const { return static_cast<std::int64_t>(verify_slot_indices.extent(0)); }
};

// SPEC §3, WritePlan: offsets [write_req_capacity + 1], seeds [write_req_capacity], one scalar.
template <class MemorySpace>
struct WritePlan {
  using memory_space = MemorySpace;
  Kokkos::View<std::int64_t*, MemorySpace> write_offsets;
  Kokkos::View<std::int64_t*, MemorySpace> write_seed_slot_indices;
  Kokkos::View<std::int32_t, MemorySpace> write_num_valid_reqs;
  // SPEC-CANARY §11.7, optional: the identity of each request (allocate_write_plan(..., true)).
  std::optional<Kokkos::View<std::int64_t*, MemorySpace>> write_identities;

  std::int64_t capacity() const { return static_cast<std::int64_t>(write_seed_slot_indices.extent(0)); }
};

// What the device saw wrong in the batch (SPEC §4): OR of InputErrorBits, and the smallest bad row or -1.
template <class MemorySpace>
struct PlanStatus {
  using memory_space = MemorySpace;
  Kokkos::View<std::int32_t, MemorySpace> input_error_bits;
  Kokkos::View<std::int32_t, MemorySpace> first_bad_row;
};

// Scratch of a plan call, sized once for a maximum batch size.
template <class MemorySpace>
struct PlanWorkspace {
  using memory_space = MemorySpace;
  // verify_offsets[r] = exclusive prefix sum of verify_len; verify_offsets[bs] = total.
  Kokkos::View<std::int64_t*, MemorySpace> verify_offsets;

  std::int64_t max_batch_size() const {
    return verify_offsets.extent(0) == 0 ? -1 : static_cast<std::int64_t>(verify_offsets.extent(0)) - 1;
  }
};

// ---- allocation helpers: one labelled allocation per View, on `space`, once up front ----
// A negative size is a host error (std::invalid_argument naming the helper, the argument and the value).
// The plans start in the empty state (every array and scalar 0: enable 0, no entry, no request), so
// that a verify() or write() before the first plan() does nothing; status and workspace are written by
// plan() before they are read.

namespace Impl {
template <class ViewType, class ExecutionSpace, class... Extents>
ViewType allocate(const ExecutionSpace& space, const std::string& label, Extents... extents) {
  return ViewType(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), extents...);
}

// Zero-filled on `space` (asynchronously: no fence).
template <class ViewType, class ExecutionSpace, class... Extents>
ViewType allocate_zeroed(const ExecutionSpace& space, const std::string& label, Extents... extents) {
  return ViewType(Kokkos::view_alloc(space, label), extents...);
}
}  // namespace Impl

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
VerifyPlan<MemorySpace> allocate_verify_plan(const ExecutionSpace& space, std::int64_t verify_capacity,
                                             bool with_identities = false) {
  using Array = Kokkos::View<std::int64_t*, MemorySpace>;
  using Scalar = Kokkos::View<std::int32_t, MemorySpace>;
  const std::size_t n = Impl::allocation_size("allocate_verify_plan", "verify_capacity", verify_capacity);
  VerifyPlan<MemorySpace> plan;
  plan.verify_slot_indices = Impl::allocate_zeroed<Array>(space, "kvcanary::verify_slot_indices", n);
  plan.verify_expected_tokens = Impl::allocate_zeroed<Array>(space, "kvcanary::verify_expected_tokens", n);
  plan.verify_expected_positions = Impl::allocate_zeroed<Array>(space, "kvcanary::verify_expected_positions", n);
  plan.verify_prev_slot_indices = Impl::allocate_zeroed<Array>(space, "kvcanary::verify_prev_slot_indices", n);
  plan.verify_num_valid = Impl::allocate_zeroed<Scalar>(space, "kvcanary::verify_num_valid");
  plan.enable = Impl::allocate_zeroed<Scalar>(space, "kvcanary::enable");
  if (with_identities) plan.verify_identities = Impl::allocate_zeroed<Array>(space, "kvcanary::verify_identities", n);
  return plan;
}

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
WritePlan<MemorySpace> allocate_write_plan(const ExecutionSpace& space, std::int64_t write_req_capacity,
                                           bool with_identities = false) {
  using Array = Kokkos::View<std::int64_t*, MemorySpace>;
  const std::size_t n = Impl::allocation_size("allocate_write_plan", "write_req_capacity", write_req_capacity);
  WritePlan<MemorySpace> plan;
  plan.write_offsets = Impl::allocate_zeroed<Array>(space, "kvcanary::write_offsets", n + 1);
  plan.write_seed_slot_indices = Impl::allocate_zeroed<Array>(space, "kvcanary::write_seed_slot_indices", n);
  plan.write_num_valid_reqs =
      Impl::allocate_zeroed<Kokkos::View<std::int32_t, MemorySpace>>(space, "kvcanary::write_num_valid_reqs");
  if (with_identities) plan.write_identities = Impl::allocate_zeroed<Array>(space, "kvcanary::write_identities", n);
  return plan;
}

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
PlanStatus<MemorySpace> allocate_plan_status(const ExecutionSpace& space) {
  using Scalar = Kokkos::View<std::int32_t, MemorySpace>;
  PlanStatus<MemorySpace> status;
  status.input_error_bits = Impl::allocate<Scalar>(space, "kvcanary::input_error_bits");
  status.first_bad_row = Impl::allocate<Scalar>(space, "kvcanary::first_bad_row");
  return status;
}

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
PlanWorkspace<MemorySpace> allocate_plan_workspace(const ExecutionSpace& space, std::int64_t max_batch_size) {
  PlanWorkspace<MemorySpace> workspace;
  const std::size_t n = Impl::allocation_size("allocate_plan_workspace", "max_batch_size", max_batch_size);
  workspace.verify_offsets =
      Impl::allocate<Kokkos::View<std::int64_t*, MemorySpace>>(space, "kvcanary::workspace::verify_offsets", n + 1);
  return workspace;
}

}  // namespace kvcanary

#endif
