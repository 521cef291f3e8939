// The serial host reference of SPEC-CANARY §12.3: records that travel with the KV. Every index is
// compared before it is used; counters add mod 2^64 (reference_ring.hpp).

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/tools/reference_transfer.hpp>

#include "reference_ring.hpp"

namespace kvcanary {
namespace reference {

using detail::check_ring;
using detail::record_violation;
using detail::wrapping_add;

namespace {

void check_batch(const char* function, const char* name, std::size_t have, std::size_t needed) {
  if (have < needed) Impl::throw_invalid_in(function, name, " holds ", have, " records, the slot list needs ", needed);
}

std::int64_t num_slots_of(const CanaryBuffer& buffer) { return static_cast<std::int64_t>(buffer.size()); }

// One export entry; true when packed from a slot.
bool pack(std::int64_t i, std::int64_t slot, const CanaryBuffer& buffer, TransferRecords& out, KernelKind kind,
          ViolationRing& ring) {
  Record& entry = out[static_cast<std::size_t>(i)];
  if (slot >= 0 && slot < num_slots_of(buffer)) {
    entry = buffer[static_cast<std::size_t>(slot)];
    return true;
  }
  entry = Record{};
  if (slot >= num_slots_of(buffer)) record_violation(ring, kind, slot, -1, -1, -1, -1, i, kOutOfRange);
  return false;
}

// One import entry; true when stored.
bool place(std::int64_t i, std::int64_t slot, const Record& entry, CanaryBuffer& buffer, KernelKind kind,
           ViolationRing& ring) {
  if (slot < 0) return false;
  if (slot >= num_slots_of(buffer)) {
    record_violation(ring, kind, slot, entry.position, entry.token, -1, entry.prev_hash, i, kOutOfRange);
    return false;
  }
  buffer[static_cast<std::size_t>(slot)] = entry;
  return true;
}

}  // namespace

void export_records(const std::vector<std::int64_t>& slots, const CanaryBuffer& buffer, TransferRecords& out,
                    KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "export_records";
  check_batch(function, "out", out.size(), slots.size());
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  std::int64_t packed = 0;
  for (std::size_t i = 0; i < slots.size(); ++i)
    packed += pack(static_cast<std::int64_t>(i), slots[i], buffer, out, kernel_kind, ring) ? 1 : 0;
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, packed);
}

void import_records(const std::vector<std::int64_t>& slots, const TransferRecords& in, CanaryBuffer& buffer,
                    KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "import_records";
  check_batch(function, "in", in.size(), slots.size());
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  std::int64_t stored = 0;
  for (std::size_t i = 0; i < slots.size(); ++i)
    stored += place(static_cast<std::int64_t>(i), slots[i], in[i], buffer, kernel_kind, ring) ? 1 : 0;
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, stored);
}

void relocate(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst, CanaryBuffer& buffer,
              TransferRecords& staging, KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "relocate";
  if (src.size() != dst.size())
    Impl::throw_invalid_in(function, "src has ", src.size(), " entries and dst ", dst.size(), ", must be equal");
  check_batch(function, "staging", staging.size(), src.size());
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  // Every source is read before any destination is written: overlapping lists move a snapshot.
  std::vector<bool> good(src.size());
  for (std::size_t i = 0; i < src.size(); ++i)
    good[i] = pack(static_cast<std::int64_t>(i), src[i], buffer, staging, kernel_kind, ring);
  std::int64_t stored = 0;
  for (std::size_t i = 0; i < dst.size(); ++i)
    if (good[i]) stored += place(static_cast<std::int64_t>(i), dst[i], staging[i], buffer, kernel_kind, ring) ? 1 : 0;
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, stored);
}

}  // namespace reference
}  // namespace kvcanary
