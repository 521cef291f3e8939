#ifndef KVCANARY_CANARY_V2_HOST_BRIDGE_HPP
#define KVCANARY_CANARY_V2_HOST_BRIDGE_HPP

// The stages of SPEC-CANARY §11 on host data (the host reference's types): upload, run on `space`, write
// back. For tests, the CLI and tools: these allocate, copy and fence. Engines keep their canary on the device.

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/stages/cross_check.hpp>
#include <kvcanary/stages/free.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/stages/padding_check.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <vector>

namespace kvcanary {

// free() on host data: `slots` as Index (int64 or int32: values are cast, give int32 only values that fit).
template <class Index = std::int64_t, class ExecutionSpace>
void free_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots, std::int64_t epoch,
                    KernelKind kernel_kind, reference::CanaryBuffer& buffer, reference::ViolationRing& ring,
                    std::int64_t stride_bytes = kRecordBytes) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  const CanaryBuffer<MemorySpace> device_buffer = upload_canary_buffer(space, buffer, stride_bytes);
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);
  const auto device_slots =
      Impl::upload<Index, MemorySpace>(space, "kvcanary::freed_slots", std::vector<Index>(slots.begin(), slots.end()));
  Kokkos::View<std::int64_t, MemorySpace> device_epoch(Kokkos::view_alloc(space, "kvcanary::epoch"));
  Kokkos::deep_copy(space, device_epoch, epoch);
  FreeOptions<MemorySpace> options;
  options.kernel_kind = kernel_kind;
  options.epoch = device_epoch;
  free(space, device_slots, device_buffer, device_ring, options);
  buffer = download_canary_buffer(space, device_buffer);
  ring = download_violation_ring(space, device_ring);
}

// cross_check() on host data, the metadata as Index (int64 or int32).
template <class Index = std::int32_t, class ExecutionSpace>
void cross_check_host_data(const ExecutionSpace& space, const reference::Inputs& inputs,
                           const reference::BackendMetadata& metadata, KernelKind kernel_kind,
                           reference::ViolationRing& ring) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  const PlanInputs<MemorySpace> device_inputs = upload_inputs(space, inputs);
  const auto upload = [&](const char* label, const std::vector<std::int64_t>& values) {
    return Impl::upload<Index, MemorySpace>(space, label, std::vector<Index>(values.begin(), values.end()));
  };
  BackendMetadata<MemorySpace, Index> device;
  device.form = metadata.form;
  device.page_size = metadata.page_size;
  if (metadata.form == MetadataForm::Csr) {
    device.kv_indptr = upload("kvcanary::kv_indptr", metadata.kv_indptr);
    device.kv_indices = upload("kvcanary::kv_indices", metadata.kv_indices);
  } else {
    const std::int64_t bs = static_cast<std::int64_t>(inputs.req_pool_indices.size());
    Impl::check_flat_block_table(metadata.block_table.size(), bs, metadata.max_blocks);
    device.block_table = Impl::upload<Index, MemorySpace>(
        space, "kvcanary::block_table", std::vector<Index>(metadata.block_table.begin(), metadata.block_table.end()), bs,
        metadata.max_blocks);
    device.seq_lens = upload("kvcanary::seq_lens", metadata.seq_lens);
  }
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);
  cross_check(space, device_inputs, device, device_ring, kernel_kind);
  ring = download_violation_ring(space, device_ring);
}

// check_padding_slot() on host data.
template <class ExecutionSpace>
void check_padding_slot_host_data(const ExecutionSpace& space, const reference::RealKv& real_kv,
                                  std::int64_t expected_fold, KernelKind kernel_kind, reference::ViolationRing& ring) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);
  check_padding_slot(space, upload_real_kv(space, real_kv), expected_fold, device_ring, kernel_kind);
  ring = download_violation_ring(space, device_ring);
}

}  // namespace kvcanary

#endif
