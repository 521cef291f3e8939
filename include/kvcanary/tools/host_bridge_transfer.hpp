#ifndef KVCANARY_TRANSFER_HOST_BRIDGE_HPP
#define KVCANARY_TRANSFER_HOST_BRIDGE_HPP

// The stages of SPEC-CANARY §12 (records that travel) on host data (the host reference's types): upload,
// run on `space`, write back. For tests and tools: these allocate, copy and fence.

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/reference_transfer.hpp>
#include <kvcanary/stages/transfer.hpp>

#include <vector>

namespace kvcanary {

// Device transfer records holding `host` (a filler past nothing: every entry is uploaded).
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
TransferRecords<MemorySpace> upload_transfer_records(const ExecutionSpace& space, const reference::TransferRecords& host) {
  TransferRecords<MemorySpace> records(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kvcanary::transfer_records"),
                                       host.size());
  const auto mirror = Kokkos::create_mirror_view(records);
  for (std::size_t i = 0; i < host.size(); ++i) {
    mirror(i, kToken) = host[i].token;
    mirror(i, kPosition) = host[i].position;
    mirror(i, kPrevHash) = host[i].prev_hash;
    mirror(i, kRealKvHash) = host[i].real_kv_hash;
  }
  Kokkos::deep_copy(space, records, mirror);
  space.fence();
  return records;
}

// The entries of device transfer records (fences `space`).
template <class ExecutionSpace, class MemorySpace>
reference::TransferRecords download_transfer_records(const ExecutionSpace& space, const TransferRecords<MemorySpace>& records) {
  const auto mirror = Kokkos::create_mirror_view(records);
  Kokkos::deep_copy(space, mirror, records);
  space.fence();
  reference::TransferRecords host(records.extent(0));
  for (std::size_t i = 0; i < host.size(); ++i)
    host[i] = {mirror(i, kToken), mirror(i, kPosition), mirror(i, kPrevHash), mirror(i, kRealKvHash)};
  return host;
}

namespace Impl {
template <class Index, class ExecutionSpace>
auto upload_slots(const ExecutionSpace& space, const char* label, const std::vector<std::int64_t>& slots) {
  return upload<Index, typename ExecutionSpace::memory_space>(space, label, std::vector<Index>(slots.begin(), slots.end()));
}
}  // namespace Impl

// export_records() on host data; `out` keeps its length (entries past slots.size() come back as they were).
template <class Index = std::int64_t, class ExecutionSpace>
void export_records_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                              const reference::CanaryBuffer& buffer, reference::TransferRecords& out,
                              KernelKind kernel_kind, reference::ViolationRing& ring,
                              std::int64_t stride_bytes = kRecordBytes) {
  const auto device_buffer = upload_canary_buffer(space, buffer, stride_bytes);
  const auto device_out = upload_transfer_records(space, out);
  const auto device_ring = upload_violation_ring(space, ring);
  const auto device_slots = Impl::upload_slots<Index>(space, "kvcanary::export_slots", slots);
  export_records(space, device_slots, device_buffer, device_out, device_ring, TransferOptions{kernel_kind});
  out = download_transfer_records(space, device_out);
  ring = download_violation_ring(space, device_ring);
}

template <class Index = std::int64_t, class ExecutionSpace>
void import_records_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                              const reference::TransferRecords& in, reference::CanaryBuffer& buffer,
                              KernelKind kernel_kind, reference::ViolationRing& ring,
                              std::int64_t stride_bytes = kRecordBytes) {
  const auto device_buffer = upload_canary_buffer(space, buffer, stride_bytes);
  const auto device_in = upload_transfer_records(space, in);
  const auto device_ring = upload_violation_ring(space, ring);
  const auto device_slots = Impl::upload_slots<Index>(space, "kvcanary::import_slots", slots);
  import_records(space, device_slots, device_in, device_buffer, device_ring, TransferOptions{kernel_kind});
  buffer = download_canary_buffer(space, device_buffer);
  ring = download_violation_ring(space, device_ring);
}

template <class Index = std::int64_t, class ExecutionSpace>
void relocate_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& src,
                        const std::vector<std::int64_t>& dst, reference::CanaryBuffer& buffer,
                        reference::TransferRecords& staging, KernelKind kernel_kind, reference::ViolationRing& ring,
                        std::int64_t stride_bytes = kRecordBytes) {
  const auto device_buffer = upload_canary_buffer(space, buffer, stride_bytes);
  const auto device_staging = upload_transfer_records(space, staging);
  const auto device_ring = upload_violation_ring(space, ring);
  const auto device_src = Impl::upload_slots<Index>(space, "kvcanary::relocate_src", src);
  const auto device_dst = Impl::upload_slots<Index>(space, "kvcanary::relocate_dst", dst);
  relocate(space, device_src, device_dst, device_buffer, device_staging, device_ring, TransferOptions{kernel_kind});
  buffer = download_canary_buffer(space, device_buffer);
  staging = download_transfer_records(space, device_staging);
  ring = download_violation_ring(space, device_ring);
}

}  // namespace kvcanary

#endif
