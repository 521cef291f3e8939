#ifndef KVCANARY_TRANSFER_HOST_BRIDGE_HPP
#define KVCANARY_TRANSFER_HOST_BRIDGE_HPP

// The stages of SPEC-CANARY §12 (records that travel) on host data (the host reference's types): upload,
// run on `space`, write back. For tests and tools: these allocate, copy and fence.

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/reference_transfer.hpp>
#include <kvcanary/stages/head_fingerprint.hpp>
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

// export_records_host_data() and import_records_host_data(), which differ only in `direction`: the side the
// direction writes (export: `records`, import: `buffer`) comes back, the side it only reads stays const.
template <TransferDirection direction, class Index, class ExecutionSpace, class HostBuffer, class HostRecords>
void transfer_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots, HostBuffer& buffer,
                        HostRecords& records, KernelKind kernel_kind, reference::ViolationRing& ring,
                        std::int64_t stride_bytes) {
  constexpr bool exporting = direction == TransferDirection::Export;
  const auto device_buffer = upload_canary_buffer(space, buffer, stride_bytes);
  const auto device_records = upload_transfer_records(space, records);
  const auto device_ring = upload_violation_ring(space, ring);
  const auto device_slots = upload_slots<Index>(space, exporting ? "kvcanary::export_slots" : "kvcanary::import_slots", slots);
  transfer_listed(space, direction, device_slots, device_buffer, device_records, device_ring, TransferOptions{kernel_kind});
  if constexpr (exporting)
    records = download_transfer_records(space, device_records);
  else
    buffer = download_canary_buffer(space, device_buffer);
  ring = download_violation_ring(space, device_ring);
}
}  // namespace Impl

// export_records() on host data; `out` keeps its length (entries past slots.size() come back as they were).
template <class Index = std::int64_t, class ExecutionSpace>
void export_records_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                              const reference::CanaryBuffer& buffer, reference::TransferRecords& out,
                              KernelKind kernel_kind, reference::ViolationRing& ring,
                              std::int64_t stride_bytes = kRecordBytes) {
  Impl::transfer_host_data<Impl::TransferDirection::Export, Index>(space, slots, buffer, out, kernel_kind, ring,
                                                                   stride_bytes);
}

template <class Index = std::int64_t, class ExecutionSpace>
void import_records_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                              const reference::TransferRecords& in, reference::CanaryBuffer& buffer,
                              KernelKind kernel_kind, reference::ViolationRing& ring,
                              std::int64_t stride_bytes = kRecordBytes) {
  Impl::transfer_host_data<Impl::TransferDirection::Import, Index>(space, slots, buffer, in, kernel_kind, ring,
                                                                   stride_bytes);
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

// head_fingerprints() on host data (the shard's bytes uploaded as [pages, row_bytes], row-major).
template <class Index = std::int64_t, class ExecutionSpace>
void head_fingerprints_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                                 const reference::HeadShard& shard, std::vector<std::int64_t>& out,
                                 KernelKind kernel_kind, reference::ViolationRing& ring) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  if (!Impl::holds(shard.bytes.size(), shard.pages, shard.row_bytes))
    Impl::throw_invalid_in("head_fingerprints_host_data", "shard.bytes holds ", shard.bytes.size(), " bytes, not ",
                           shard.pages, " x ", shard.row_bytes);
  Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, MemorySpace> bytes("kvcanary::shard_bytes", shard.pages, shard.row_bytes);
  const auto mirror = Kokkos::create_mirror_view(bytes);
  for (std::int64_t p = 0; p < shard.pages; ++p)
    for (std::int64_t b = 0; b < shard.row_bytes; ++b) mirror(p, b) = shard.bytes[static_cast<std::size_t>(p * shard.row_bytes + b)];
  Kokkos::deep_copy(space, bytes, mirror);
  HeadShard<MemorySpace> device;
  device.bytes = bytes;
  device.page_size = shard.page_size;
  device.token_stride_bytes = shard.token_stride_bytes;
  device.head_stride_bytes = shard.head_stride_bytes;
  device.head_bytes = shard.head_bytes;
  device.first_head = shard.first_head;
  device.num_heads = shard.num_heads;
  const auto device_slots = Impl::upload_slots<Index>(space, "kvcanary::fingerprint_slots", slots);
  const auto device_out = Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::fingerprints", out);
  const auto device_ring = upload_violation_ring(space, ring);
  head_fingerprints(space, device_slots, device, device_out, device_ring, TransferOptions{kernel_kind});
  const auto host_out = Kokkos::create_mirror_view(device_out);
  Kokkos::deep_copy(space, host_out, device_out);
  space.fence();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = host_out(i);
  ring = download_violation_ring(space, device_ring);
}

template <class Index = std::int64_t, class ExecutionSpace>
void check_fingerprints_host_data(const ExecutionSpace& space, const std::vector<std::int64_t>& slots,
                                  const std::vector<std::int64_t>& expected, const std::vector<std::int64_t>& actual,
                                  KernelKind kernel_kind, reference::ViolationRing& ring) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  const auto device_slots = Impl::upload_slots<Index>(space, "kvcanary::fingerprint_slots", slots);
  const auto device_expected = Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::expected_fingerprints", expected);
  const auto device_actual = Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::actual_fingerprints", actual);
  const auto device_ring = upload_violation_ring(space, ring);
  check_fingerprints(space, device_slots, device_expected, device_actual, device_ring, TransferOptions{kernel_kind});
  ring = download_violation_ring(space, device_ring);
}

}  // namespace kvcanary

#endif
