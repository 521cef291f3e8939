#ifndef KVCANARY_CANARY_HOST_BRIDGE_HPP
#define KVCANARY_CANARY_HOST_BRIDGE_HPP

// Moving the canary stages' data between the host reference's types and Views in a memory space, and
// write()/verify() on host data. For tests, the CLI, benchmarks and tools: these functions allocate and
// copy, and the *_host_data() calls fence. Engines keep their canary on the device.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/tools/reference_canary.hpp>
#include <kvcanary/stages/verify.hpp>
#include <kvcanary/stages/write.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace kvcanary {

namespace Impl {

template <class MemorySpace>
using PackedRecords = Kokkos::View<std::int64_t* [kRecordFields], Kokkos::LayoutRight, MemorySpace>;

}  // namespace Impl

// A device buffer holding `host`'s records at `stride_bytes` per record (>= 32, a multiple of 8). The
// words between records hold a filler value, so that a read through the wrong stride shows.
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
CanaryBuffer<MemorySpace> upload_canary_buffer(const ExecutionSpace& space, const reference::CanaryBuffer& host,
                                               std::int64_t stride_bytes = kRecordBytes) {
  if (stride_bytes < kRecordBytes || stride_bytes % 8 != 0)
    Impl::throw_invalid_in("upload_canary_buffer", "stride_bytes is ", stride_bytes, ", must be >= 32 and a multiple of 8");
  const auto n = host.size();
  const auto words = static_cast<std::size_t>(stride_bytes / 8);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, MemorySpace> storage(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kvcanary::canary_buffer"), n, words);
  Kokkos::deep_copy(space, storage, std::int64_t(-0x5A5A5A5A5A5A5A5ALL));
  Impl::PackedRecords<Kokkos::HostSpace> packed(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kvcanary::records"), n);
  for (std::size_t s = 0; s < n; ++s) {
    packed(s, kToken) = host[s].token;
    packed(s, kPosition) = host[s].position;
    packed(s, kPrevHash) = host[s].prev_hash;
    packed(s, kRealKvHash) = host[s].real_kv_hash;
  }
  const auto device_packed = Kokkos::create_mirror_view_and_copy(MemorySpace(), packed);
  CanaryBuffer<MemorySpace> buffer{Kokkos::subview(storage, Kokkos::ALL, std::make_pair(0, int(kRecordFields)))};
  Kokkos::deep_copy(space, buffer.records, device_packed);
  space.fence();
  return buffer;
}

// The records of a device buffer (fences `space`).
template <class ExecutionSpace, class MemorySpace>
reference::CanaryBuffer download_canary_buffer(const ExecutionSpace& space, const CanaryBuffer<MemorySpace>& buffer) {
  Impl::PackedRecords<MemorySpace> packed(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kvcanary::records"),
                                          buffer.records.extent(0));
  Kokkos::deep_copy(space, packed, buffer.records);
  const auto host = Kokkos::create_mirror_view(packed);
  Kokkos::deep_copy(space, host, packed);
  space.fence();
  reference::CanaryBuffer records(packed.extent(0));
  for (std::size_t s = 0; s < records.size(); ++s)
    records[s] = {host(s, kToken), host(s, kPosition), host(s, kPrevHash), host(s, kRealKvHash)};
  return records;
}

// A device ring holding `host`'s state: its capacity, rows, count and counters.
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
ViolationRing<MemorySpace> upload_violation_ring(const ExecutionSpace& space, const reference::ViolationRing& host) {
  ViolationRing<MemorySpace> ring = allocate_violation_ring(space, host.capacity);
  const auto rows = Kokkos::create_mirror_view(ring.rows);
  for (std::size_t i = 0; i < host.rows.size() && i < rows.extent(0); ++i)
    for (int f = 0; f < kRingFields; ++f) rows(i, f) = host.rows[i][static_cast<std::size_t>(f)];
  Kokkos::deep_copy(space, ring.rows, rows);
  Kokkos::deep_copy(space, ring.count, host.count);
  Kokkos::deep_copy(space, ring.slot_run_counter, host.slot_run_counter);
  Kokkos::deep_copy(space, ring.kernel_run_counter, host.kernel_run_counter);
  space.fence();
  return ring;
}

// The state of a device ring (fences `space`): rows [0, min(count, capacity)), in the device's order.
template <class ExecutionSpace, class MemorySpace>
reference::ViolationRing download_violation_ring(const ExecutionSpace& space, const ViolationRing<MemorySpace>& ring) {
  reference::ViolationRing host;
  host.capacity = ring.capacity();
  const auto rows = Kokkos::create_mirror_view(ring.rows);
  Kokkos::deep_copy(space, rows, ring.rows);
  Impl::copy_scalar_out(space, ring.count, host.count);
  Impl::copy_scalar_out(space, ring.slot_run_counter, host.slot_run_counter);
  Impl::copy_scalar_out(space, ring.kernel_run_counter, host.kernel_run_counter);
  space.fence();
  const std::int64_t kept = std::min(std::max<std::int64_t>(host.count, 0), host.capacity);
  host.rows.resize(static_cast<std::size_t>(kept));
  for (std::int64_t i = 0; i < kept; ++i)
    for (int f = 0; f < kRingFields; ++f) host.rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(f)] = rows(i, f);
  return host;
}

// Device copies of real-KV sources (rows of row_bytes, as in the host copy).
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
RealKv<MemorySpace> upload_real_kv(const ExecutionSpace& space, const reference::RealKv& host) {
  RealKv<MemorySpace> real_kv;
  real_kv.mode = host.mode;
  for (const reference::RealKvSource& s : host.sources) {
    RealKvSource<MemorySpace> source;
    source.bytes = Impl::upload<std::uint8_t, MemorySpace>(space, "kvcanary::real_kv", s.bytes, s.pages, s.row_bytes);
    source.page_size = s.page_size;
    source.bytes_per_token = s.bytes_per_token;
    source.read_bytes = s.read_bytes;
    real_kv.sources.push_back(source);
  }
  return real_kv;
}

// Device copies of the step's token arrays, as Index (int64 or int32: values are cast, so give int32
// only values that fit), and the chain-position flag.
template <class Index = std::int64_t, class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
StepTokens<MemorySpace, Index> upload_step_tokens(const ExecutionSpace& space, const reference::StepTokens& host) {
  const auto cast = [](const std::vector<std::int64_t>& values) {
    return std::vector<Index>(values.begin(), values.end());
  };
  const auto upload = [&](const char* label, const std::vector<std::int64_t>& values) {
    return Impl::upload<Index, MemorySpace>(space, label, cast(values));
  };
  StepTokens<MemorySpace, Index> tokens;
  tokens.input_ids = upload("kvcanary::input_ids", host.input_ids);
  tokens.positions = upload("kvcanary::positions", host.positions);
  tokens.out_cache_loc = upload("kvcanary::out_cache_loc", host.out_cache_loc);
  if (host.expected_input_ids) tokens.expected_input_ids = upload("kvcanary::expected_input_ids", *host.expected_input_ids);
  if (host.expected_positions) tokens.expected_positions = upload("kvcanary::expected_positions", *host.expected_positions);
  Kokkos::View<std::int32_t, MemorySpace> flag(Kokkos::view_alloc(space, "kvcanary::chain_position_assert"));
  Kokkos::deep_copy(space, flag, host.chain_position_assert);
  tokens.chain_position_assert = flag;
  return tokens;
}

// A device VerifyPlan / WritePlan holding the plan arrays and scalars of `host`. upload_verify_plan throws
// std::invalid_argument, before anything is allocated, when the four verify arrays differ in length.
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
VerifyPlan<MemorySpace> upload_verify_plan(const ExecutionSpace& space, const reference::Outputs& host) {
  const std::size_t capacity = host.verify_slot_indices.size();
  const auto same = [&](const char* name, const std::vector<std::int64_t>& values) {
    Impl::check_same_extent("upload_verify_plan", name, values.size(), "verify_slot_indices", capacity);
  };
  same("verify_expected_tokens", host.verify_expected_tokens);
  same("verify_expected_positions", host.verify_expected_positions);
  same("verify_prev_slot_indices", host.verify_prev_slot_indices);
  if (host.verify_identities) same("verify_identities", *host.verify_identities);
  VerifyPlan<MemorySpace> plan = allocate_verify_plan(space, static_cast<std::int64_t>(host.verify_slot_indices.size()),
                                                      host.verify_identities.has_value());
  if (host.verify_identities) Impl::copy_into(space, *plan.verify_identities, *host.verify_identities);
  Impl::copy_into(space, plan.verify_slot_indices, host.verify_slot_indices);
  Impl::copy_into(space, plan.verify_expected_tokens, host.verify_expected_tokens);
  Impl::copy_into(space, plan.verify_expected_positions, host.verify_expected_positions);
  Impl::copy_into(space, plan.verify_prev_slot_indices, host.verify_prev_slot_indices);
  Impl::copy_scalar_into(space, plan.verify_num_valid, host.verify_num_valid);
  Impl::copy_scalar_into(space, plan.enable, host.enable);
  return plan;
}

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
WritePlan<MemorySpace> upload_write_plan(const ExecutionSpace& space, const reference::Outputs& host) {
  WritePlan<MemorySpace> plan;
  plan.write_offsets = Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::write_offsets", host.write_offsets);
  plan.write_seed_slot_indices =
      Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::write_seed_slot_indices", host.write_seed_slot_indices);
  plan.write_num_valid_reqs = Kokkos::View<std::int32_t, MemorySpace>(Kokkos::view_alloc(space, "kvcanary::write_num_valid_reqs"));
  Impl::copy_scalar_into(space, plan.write_num_valid_reqs, host.write_num_valid_reqs);
  if (host.write_identities)
    plan.write_identities =
        Impl::upload<std::int64_t, MemorySpace>(space, "kvcanary::write_identities", *host.write_identities);
  return plan;
}

// How the *_host_data() calls lay the data out on the device (tests vary it).
struct HostDataLayout {
  std::int64_t stride_bytes = kRecordBytes;  // of the uploaded canary buffer
  bool int32_tokens = false;                 // token arrays as int32 (values must fit)
  int write_lanes = 0;                       // > 0: the portable write() kernel at this width (tests vary it)
};

// write() on host data over one or more buffers sharing the plan and tokens (one target: the one-buffer
// write()): uploads everything, runs on `space`, and writes back the buffers and the ring.
template <class ExecutionSpace>
void write_host_data(const ExecutionSpace& space, const reference::Outputs& plan, const reference::StepTokens& tokens,
                     const std::vector<reference::CanaryBuffer*>& buffers, const std::vector<KernelKind>& kinds,
                     const std::vector<const reference::RealKv*>& real_kvs, reference::ViolationRing& ring,
                     CanaryAlgorithm algorithm = CanaryAlgorithm::Default, const HostDataLayout& layout = HostDataLayout{}) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  std::vector<WriteTarget<MemorySpace>> targets;
  for (std::size_t t = 0; t < buffers.size(); ++t)
    targets.push_back({upload_canary_buffer(space, *buffers[t], layout.stride_bytes), kinds.at(t),
                       upload_real_kv(space, *real_kvs.at(t))});
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);
  const WritePlan<MemorySpace> write_plan = upload_write_plan(space, plan);
  // A width the test asks for runs the portable kernel at that width; else write() picks the path.
  const auto run = [&](const auto& device_tokens) {
    if (layout.write_lanes > 0)
      Impl::write_with_lanes(space, write_plan, device_tokens, targets, device_ring, layout.write_lanes);
    else if (targets.size() == 1)
      write(space, write_plan, device_tokens, targets[0].buffer, device_ring,
            WriteOptions<MemorySpace>{targets[0].kernel_kind, targets[0].real_kv, algorithm});
    else
      write(space, write_plan, device_tokens, targets, device_ring, WriteCallOptions{algorithm});
  };
  if (layout.int32_tokens)
    run(upload_step_tokens<std::int32_t>(space, tokens));
  else
    run(upload_step_tokens<std::int64_t>(space, tokens));
  for (std::size_t t = 0; t < buffers.size(); ++t) *buffers[t] = download_canary_buffer(space, targets[t].buffer);
  ring = download_violation_ring(space, device_ring);
}

template <class ExecutionSpace>
void write_host_data(const ExecutionSpace& space, const reference::Outputs& plan, const reference::StepTokens& tokens,
                     KernelKind kernel_kind, const reference::RealKv& real_kv, reference::CanaryBuffer& buffer,
                     reference::ViolationRing& ring, CanaryAlgorithm algorithm = CanaryAlgorithm::Default,
                     const HostDataLayout& layout = HostDataLayout{}) {
  write_host_data(space, plan, tokens, {&buffer}, {kernel_kind}, {&real_kv}, ring, algorithm, layout);
}

// verify() on host data over one or more buffers sharing the plan, with the checks of SPEC-CANARY §11;
// the ring is written back.
template <class ExecutionSpace>
void verify_host_data(const ExecutionSpace& space, const reference::Outputs& plan,
                      const std::vector<const reference::CanaryBuffer*>& buffers, const std::vector<KernelKind>& kinds,
                      const std::vector<const reference::RealKv*>& real_kvs, bool check_expected_token,
                      const VerifyChecks& checks, reference::ViolationRing& ring,
                      CanaryAlgorithm algorithm = CanaryAlgorithm::Default, const HostDataLayout& layout = HostDataLayout{}) {
  using MemorySpace = typename ExecutionSpace::memory_space;
  std::vector<VerifyTarget<MemorySpace>> targets;
  for (std::size_t t = 0; t < buffers.size(); ++t)
    targets.push_back({upload_canary_buffer(space, *buffers[t], layout.stride_bytes), kinds.at(t),
                       upload_real_kv(space, *real_kvs.at(t))});
  const ViolationRing<MemorySpace> device_ring = upload_violation_ring(space, ring);
  verify(space, upload_verify_plan(space, plan), targets, device_ring, VerifyOptions{check_expected_token, algorithm, checks});
  ring = download_violation_ring(space, device_ring);
}

// The same with VerifyChecks::v1(): §5 as the original system wrote it (as reference::verify without checks).
template <class ExecutionSpace>
void verify_host_data(const ExecutionSpace& space, const reference::Outputs& plan,
                      const std::vector<const reference::CanaryBuffer*>& buffers, const std::vector<KernelKind>& kinds,
                      const std::vector<const reference::RealKv*>& real_kvs, bool check_expected_token,
                      reference::ViolationRing& ring, CanaryAlgorithm algorithm = CanaryAlgorithm::Default,
                      const HostDataLayout& layout = HostDataLayout{}) {
  verify_host_data(space, plan, buffers, kinds, real_kvs, check_expected_token, VerifyChecks::v1(), ring, algorithm,
                   layout);
}

}  // namespace kvcanary

#endif
