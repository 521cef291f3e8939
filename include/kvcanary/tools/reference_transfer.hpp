#ifndef KVCANARY_REFERENCE_TRANSFER_HPP
#define KVCANARY_REFERENCE_TRANSFER_HPP

// The serial host reference of SPEC-CANARY §12.3 and §12.6 (records that travel, head fingerprints) in the
// SPEC's own words, the oracle of the device stages' tests. A transfer batch is a vector of Records (entry
// i = the record of the i-th listed slot). Host errors (std::invalid_argument, nothing touched): a batch or
// value array shorter than the slot list, src and dst of different lengths, a shard that breaks §12.6, a
// ring that breaks §1, a kernel_kind outside the 12 launch tags.

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

// SPEC-CANARY §12.6: a rank's shard of one KV tensor, bytes [pages, row_bytes] row-major.
struct HeadShard {
  std::vector<std::uint8_t> bytes;
  std::int64_t pages = 0, row_bytes = 0, page_size = 1;
  std::int64_t token_stride_bytes = 0, head_stride_bytes = 0, head_bytes = 16;
  std::int64_t first_head = 0, num_heads = 1;
};

// out[i] = the shard's partial head fingerprint of slots[i] (0 for padding; 0 and a row past the shard).
void head_fingerprints(const std::vector<std::int64_t>& slots, const HeadShard& shard, std::vector<std::int64_t>& out,
                       KernelKind kernel_kind, ViolationRing& ring);

// A bit-4 row (slot, -1, -1, -1, actual, expected, 4) for each listed slot >= 0 whose values differ.
void check_fingerprints(const std::vector<std::int64_t>& slots, const std::vector<std::int64_t>& expected,
                        const std::vector<std::int64_t>& actual, KernelKind kernel_kind, ViolationRing& ring);

}  // namespace reference
}  // namespace kvcanary

#endif
