#ifndef KVCANARY_CROSS_CHECK_HPP
#define KVCANARY_CROSS_CHECK_HPP

// kvcanary::cross_check(): compare the attention backend's own page metadata (CSR kv_indptr/kv_indices,
// or a dense block_table + seq_lens) with req_to_token for the same batch, on the device
// (SPEC-CANARY §11.4). One METADATA_MISMATCH row (bit 512) per entry that differs, one per row whose
// length differs; OUT_OF_RANGE rows (bit 64) for CSR offsets outside kv_indices or a dense row longer
// than the table.
//
//   cross_check(space, plan_inputs, metadata, ring[, kernel_kind]);
//
// * plan_inputs: the plan's inputs of the step (SPEC §2); the window and the expected-token pool are
//   ignored, a LUT translates as the plan's T. The metadata covers prefix + extend tokens per row (pass
//   extend lengths of 0 for metadata of the prefix only).
// * kernel_run_counter += 1 per call; slot_run_counter += the entries compared.
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph: run it after the backend filled its graph-static buffers). Host-side errors throw
//   std::invalid_argument before any launch.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/stages/cross_check_types.hpp>
#include <kvcanary/impl/cross_check_portable.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/plan_validate.hpp>

#include <type_traits>

namespace kvcanary {

template <class MemorySpace, class Index = std::int32_t>
struct BackendMetadata {
  using memory_space = MemorySpace;
  template <class T>
  using Vector = Kokkos::View<const T*, Kokkos::LayoutRight, MemorySpace>;
  MetadataForm form = MetadataForm::Csr;
  std::int64_t page_size = 1;  // 1: entries are slots; > 1: page ids (slot / page_size)
  Vector<Index> kv_indptr;     // CSR: [bs + 1]
  Vector<Index> kv_indices;    // CSR: [nnz]
  Kokkos::View<const Index**, Kokkos::LayoutStride, MemorySpace> block_table;  // dense: [bs, max_blocks], rows contiguous
  Vector<Index> seq_lens;                                                       // dense: [bs]
};

template <class ExecutionSpace, class MemorySpace, class Index>
void cross_check(const ExecutionSpace& space, const PlanInputs<MemorySpace>& inputs,
                 const BackendMetadata<MemorySpace, Index>& metadata, const ViolationRing<MemorySpace>& ring,
                 KernelKind kernel_kind = KernelKind::HEAD_K_FULL) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::cross_check: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::cross_check: the memory space must be accessible from the execution space");
  static_assert(std::is_same<Index, std::int64_t>::value || std::is_same<Index, std::int32_t>::value,
                "kvcanary::cross_check: metadata holds int64 or int32");
  constexpr const char* kWhere = "cross_check";
  const auto extent = [](const auto& view, int dim = 0) { return static_cast<std::int64_t>(view.extent(dim)); };
  CrossCheckShapes s;
  s.batch_rows = inputs.batch_size();
  s.prefix_lens = extent(inputs.prefix_lens);
  s.extend_seq_lens = extent(inputs.extend_seq_lens);
  s.req_to_token_rows = extent(inputs.req_to_token, 0);
  s.req_to_token_cols = extent(inputs.req_to_token, 1);
  s.has_lut = inputs.full_to_swa_index_mapping.has_value();
  if (s.has_lut) s.lut_len = extent(*inputs.full_to_swa_index_mapping);
  s.form = metadata.form;
  s.page_size = metadata.page_size;
  s.kv_indptr = extent(metadata.kv_indptr);
  s.block_table_rows = extent(metadata.block_table, 0);
  s.seq_lens = extent(metadata.seq_lens);
  Impl::check_cross_check_shapes(s);
  check_row_major(inputs.req_to_token, "req_to_token");
  if (metadata.form == MetadataForm::Dense) check_row_major(metadata.block_table, "block_table");
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, kernel_kind);

  // Only the fields the cross-check reads: the window and the pool stay out of DeviceInputs.
  PlanInputs<MemorySpace> used = inputs;
  used.swa_window_size = 0;
  used.req_to_verify_expected_tokens.reset();
  used.req_to_verify_expected_tokens_valid_lens.reset();
  Impl::CrossCheckFunctor<MemorySpace, Index> functor{};
  functor.in = Impl::DeviceInputs<MemorySpace>(used);
  functor.csr = metadata.form == MetadataForm::Csr;
  functor.kv_indptr = metadata.kv_indptr;
  functor.kv_indices = metadata.kv_indices;
  functor.seq_lens = metadata.seq_lens;
  functor.block_table = metadata.block_table;
  functor.page_size = metadata.page_size;
  functor.batch_rows = s.batch_rows;
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(kernel_kind);
  Kokkos::Profiling::pushRegion("kvcanary::cross_check");
  Impl::launch_cross_check_portable(space, functor);
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
