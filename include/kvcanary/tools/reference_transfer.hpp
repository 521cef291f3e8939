#ifndef KVCANARY_REFERENCE_TRANSFER_HPP
#define KVCANARY_REFERENCE_TRANSFER_HPP

// The serial host reference of SPEC-CANARY §12.3 (records that travel): export, import and relocate in
// the SPEC's own words, the oracle of the device stages' tests. A transfer batch is a vector of Records
// (entry i = the record of the i-th listed slot). Host errors (std::invalid_argument, nothing touched):
// a batch shorter than the slot list, src and dst of different lengths, a ring that breaks §1, a
// kernel_kind outside the 12 launch tags.

#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace reference {

using TransferRecords = std::vector<Record>;

// out[i] = buffer[slots[i]]; a negative or out-of-range slot packs a zero record (out of range: a row).
// Entries of `out` past slots.size() are untouched.
void export_records(const std::vector<std::int64_t>& slots, const CanaryBuffer& buffer, TransferRecords& out,
                    KernelKind kernel_kind, ViolationRing& ring);

// buffer[slots[i]] = in[i], verbatim; negative slots skipped, out-of-range ones give a row.
void import_records(const std::vector<std::int64_t>& slots, const TransferRecords& in, CanaryBuffer& buffer,
                    KernelKind kernel_kind, ViolationRing& ring);

// buffer'[dst[i]] = buffer[src[i]] (a snapshot move); pairs with a bad source are skipped. `staging` holds
// the packed sources afterwards, as the device stage leaves its staging records.
void relocate(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst, CanaryBuffer& buffer,
              TransferRecords& staging, KernelKind kernel_kind, ViolationRing& ring);

}  // namespace reference
}  // namespace kvcanary

#endif
