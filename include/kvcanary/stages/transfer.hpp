#ifndef KVCANARY_TRANSFER_HPP
#define KVCANARY_TRANSFER_HPP

// Records that travel with the KV (SPEC-CANARY §12): disaggregated prefill/decode, cache tiers,
// defragmentation.
//
//   export_records(space, slots, buffer, out, ring[, options]);         // buffer[slots[i]] -> out[i]
//   import_records(space, slots, in, buffer, ring[, options]);          // in[i] -> buffer[slots[i]], verbatim
//   relocate(space, src, dst, buffer, staging, ring[, options]);        // buffer[src[i]] -> buffer[dst[i]]
//
// * The chain is content-addressed (a record's prev_hash is its predecessor's hash, never its slot), so
//   import and relocate copy records verbatim and never re-stamp: the consumer's verify is the check.
// * TransferRecords: the wire format, n records of four little-endian int64, contiguous (n x 32 bytes).
// * Negative slots are padding (export packs 32 zero bytes, import and relocate skip); a slot >= num_slots
//   gives an OUT_OF_RANGE row. relocate reads every source before it writes any destination (overlapping
//   lists are a snapshot move) through `staging`, which the caller allocates once.
// * kernel_run_counter += 1 per call; slot_run_counter += the records stored.
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph). Host-side errors throw std::invalid_argument before any launch.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/transfer_portable.hpp>

#include <string>
#include <type_traits>

namespace kvcanary {

// SPEC-CANARY §12.2: the packed records that travel (entry i = the record of the i-th listed slot).
template <class MemorySpace>
using TransferRecords = Kokkos::View<std::int64_t* [kRecordFields], Kokkos::LayoutRight, MemorySpace>;

template <class MemorySpace>
TransferRecords<MemorySpace> allocate_transfer_records(const std::string& label, std::int64_t entries) {
  if (entries < 0) Impl::throw_invalid_in("allocate_transfer_records", "entries is ", entries, ", must be >= 0");
  return TransferRecords<MemorySpace>(label, static_cast<std::size_t>(entries));
}

struct TransferOptions {
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;  // the tag of OUT_OF_RANGE rows
};

namespace Impl {

template <class ExecutionSpace, class SlotsView, class MemorySpace>
constexpr bool check_transfer_types() {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary transfer stages: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_view<SlotsView>::value && SlotsView::rank == 1,
                "kvcanary transfer stages: slot lists must be rank-1 Kokkos::Views");
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  static_assert(std::is_same<Index, std::int64_t>::value || std::is_same<Index, std::int32_t>::value,
                "kvcanary transfer stages: slot lists hold int64 or int32");
  static_assert(std::is_same<typename SlotsView::memory_space, MemorySpace>::value,
                "kvcanary transfer stages: slot lists must live in the canary buffer's memory space");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary transfer stages: the canary's memory space must be accessible from the execution space");
  return true;
}

template <class SlotsView>
void check_slot_list(const char* where, const char* name, const SlotsView& slots) {
  if (slots.extent(0) > 0 && slots.data() == nullptr)
    throw_invalid_in(where, name, " has ", slots.extent(0), " entries but no memory");
}

template <class RecordsView>
void check_records(const char* where, const char* name, const RecordsView& records, std::int64_t needed) {
  if (extent_of(records) < needed)
    throw_invalid_in(where, name, " holds ", extent_of(records), " records, the slot list needs ", needed);
  if (needed > 0 && records.data() == nullptr) throw_invalid_in(where, name, " is not allocated");
}

template <class MemorySpace>
void check_transfer_common(const char* where, const CanaryBuffer<MemorySpace>& buffer,
                           const ViolationRing<MemorySpace>& ring, const TransferOptions& options) {
  check_buffer(where, buffer);
  check_ring(where, ring);
  check_kernel_kind(where, options.kernel_kind);
}

template <class MemorySpace, class Index>
TransferFunctor<MemorySpace, Index> transfer_functor(const CanaryBuffer<MemorySpace>& buffer,
                                                     const ViolationRing<MemorySpace>& ring,
                                                     const TransferOptions& options) {
  TransferFunctor<MemorySpace, Index> functor{};
  functor.buffer = DeviceBuffer<MemorySpace>(buffer);
  functor.ring = DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  return functor;
}

// export_records() and import_records(), which differ only in `direction`: errors, the region and the kernel
// label name the public function, and `records` as its argument ("out" on export, "in" on import).
template <class ExecutionSpace, class SlotsView, class MemorySpace>
void transfer_listed(const ExecutionSpace& space, TransferDirection direction, const SlotsView& slots,
                     const CanaryBuffer<MemorySpace>& buffer, const TransferRecords<MemorySpace>& records,
                     const ViolationRing<MemorySpace>& ring, const TransferOptions& options) {
  static_assert(check_transfer_types<ExecutionSpace, SlotsView, MemorySpace>());
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  const bool exporting = direction == TransferDirection::Export;
  const char* where = exporting ? "export_records" : "import_records";
  check_slot_list(where, "slots", slots);
  check_records(where, exporting ? "out" : "in", records, extent_of(slots));
  check_transfer_common(where, buffer, ring, options);
  auto functor = transfer_functor<MemorySpace, Index>(buffer, ring, options);
  functor.slots = slots;
  functor.records = records;
  functor.direction = direction;
  Kokkos::Profiling::pushRegion(exporting ? "kvcanary::export_records" : "kvcanary::import_records");
  launch_transfer_portable(space, exporting ? "kvcanary::export_records[portable]" : "kvcanary::import_records[portable]",
                           functor);
  Kokkos::Profiling::popRegion();
}

}  // namespace Impl

template <class ExecutionSpace, class SlotsView, class MemorySpace>
void export_records(const ExecutionSpace& space, const SlotsView& slots, const CanaryBuffer<MemorySpace>& buffer,
                    const TransferRecords<MemorySpace>& out, const ViolationRing<MemorySpace>& ring,
                    const TransferOptions& options = TransferOptions{}) {
  Impl::transfer_listed(space, Impl::TransferDirection::Export, slots, buffer, out, ring, options);
}

// `in` is read only; it is taken as a non-const View so that the one functor serves both directions.
template <class ExecutionSpace, class SlotsView, class MemorySpace>
void import_records(const ExecutionSpace& space, const SlotsView& slots, const TransferRecords<MemorySpace>& in,
                    const CanaryBuffer<MemorySpace>& buffer, const ViolationRing<MemorySpace>& ring,
                    const TransferOptions& options = TransferOptions{}) {
  Impl::transfer_listed(space, Impl::TransferDirection::Import, slots, buffer, in, ring, options);
}

template <class ExecutionSpace, class SlotsView, class MemorySpace>
void relocate(const ExecutionSpace& space, const SlotsView& src, const SlotsView& dst,
              const CanaryBuffer<MemorySpace>& buffer, const TransferRecords<MemorySpace>& staging,
              const ViolationRing<MemorySpace>& ring, const TransferOptions& options = TransferOptions{}) {
  static_assert(Impl::check_transfer_types<ExecutionSpace, SlotsView, MemorySpace>());
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  constexpr const char* kWhere = "relocate";
  Impl::check_slot_list(kWhere, "src", src);
  Impl::check_slot_list(kWhere, "dst", dst);
  if (src.extent(0) != dst.extent(0))
    Impl::throw_invalid_in(kWhere, "src has ", src.extent(0), " entries and dst ", dst.extent(0), ", must be equal");
  Impl::check_records(kWhere, "staging", staging, Impl::extent_of(src));
  Impl::check_transfer_common(kWhere, buffer, ring, options);
  auto gather = Impl::transfer_functor<MemorySpace, Index>(buffer, ring, options);
  gather.slots = src;
  gather.records = staging;
  gather.direction = Impl::TransferDirection::Export;
  gather.count_kernel = false;
  gather.count_stores = false;
  auto scatter = Impl::transfer_functor<MemorySpace, Index>(buffer, ring, options);
  scatter.slots = dst;
  scatter.sources = src;
  scatter.records = staging;
  scatter.direction = Impl::TransferDirection::Import;
  // Both halves on `space`, in order: every source is read before any destination is written.
  Kokkos::Profiling::pushRegion("kvcanary::relocate");
  Impl::launch_transfer_portable(space, "kvcanary::relocate[portable]", gather);
  Impl::launch_transfer_portable(space, "kvcanary::relocate[portable]", scatter);
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
