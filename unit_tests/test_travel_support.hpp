#ifndef KVCANARY_TEST_TRAVEL_SUPPORT_HPP
#define KVCANARY_TEST_TRAVEL_SUPPORT_HPP

// Helpers of the tests of SPEC-CANARY §12 (records that travel): export, import and relocate on a backend
// (int64 and, where the values fit, int32 slot lists) and on the host reference from the same state,
// compared record by record, entry by entry and row by row.

#include "test_canary_support.hpp"

#include <kvcanary/tools/host_bridge_transfer.hpp>
#include <kvcanary/tools/reference_transfer.hpp>

namespace kvcanary_test {

using Packed = kvcanary::reference::TransferRecords;

inline bool fits_int32(const Int64s& values) {
  return std::all_of(values.begin(), values.end(), [](std::int64_t v) { return v == static_cast<std::int32_t>(v); });
}

// What a transfer call leaves: the canary buffer, the packed records (out or staging) and the ring.
struct TransferRun {
  Buffer buffer;
  Packed records;
  Ring ring;
};

template <class ExecSpace>
struct TransferRunner {
  std::int64_t stride_bytes = kvcanary::kRecordBytes;

  // The ring the reference fills with room for every row (to judge which rows a full ring may keep).
  static Ring roomy(const Ring& ring, const Ring& after) {
    Ring all = ring;
    all.capacity = ring.count + after.count + 1;
    return all;
  }

  TransferRun export_records(const Int64s& slots, const Buffer& buffer, const Packed& out, const Ring& ring,
                             KernelKind kind = KernelKind::HEAD_K_FULL) const {
    TransferRun library{buffer, out, ring}, reference{buffer, out, ring};
    kvcanary::export_records_host_data(ExecSpace(), slots, library.buffer, library.records, kind, library.ring,
                                       stride_bytes);
    kvcanary::reference::export_records(slots, reference.buffer, reference.records, kind, reference.ring);
    Ring all = roomy(ring, reference.ring);
    Packed scratch = out;
    kvcanary::reference::export_records(slots, buffer, scratch, kind, all);
    EXPECT_TRUE(same_buffer(library.records, reference.records));
    EXPECT_TRUE(same_ring(library.ring, reference.ring, all));
    if (fits_int32(slots)) {
      TransferRun narrow{buffer, out, ring};
      kvcanary::export_records_host_data<std::int32_t>(ExecSpace(), slots, narrow.buffer, narrow.records, kind,
                                                       narrow.ring, stride_bytes);
      EXPECT_TRUE(same_buffer(narrow.records, reference.records));
      EXPECT_TRUE(same_ring(narrow.ring, reference.ring, all));
    }
    return library;
  }

  TransferRun import_records(const Int64s& slots, const Packed& in, const Buffer& buffer, const Ring& ring,
                             KernelKind kind = KernelKind::HEAD_K_FULL) const {
    TransferRun library{buffer, in, ring}, reference{buffer, in, ring};
    kvcanary::import_records_host_data(ExecSpace(), slots, in, library.buffer, kind, library.ring, stride_bytes);
    kvcanary::reference::import_records(slots, in, reference.buffer, kind, reference.ring);
    Ring all = roomy(ring, reference.ring);
    Buffer scratch = buffer;
    kvcanary::reference::import_records(slots, in, scratch, kind, all);
    EXPECT_TRUE(same_buffer(library.buffer, reference.buffer));
    EXPECT_TRUE(same_ring(library.ring, reference.ring, all));
    if (fits_int32(slots)) {
      TransferRun narrow{buffer, in, ring};
      kvcanary::import_records_host_data<std::int32_t>(ExecSpace(), slots, in, narrow.buffer, kind, narrow.ring,
                                                       stride_bytes);
      EXPECT_TRUE(same_buffer(narrow.buffer, reference.buffer));
      EXPECT_TRUE(same_ring(narrow.ring, reference.ring, all));
    }
    return library;
  }

  TransferRun relocate(const Int64s& src, const Int64s& dst, const Buffer& buffer, const Packed& staging,
                       const Ring& ring, KernelKind kind = KernelKind::HEAD_K_FULL) const {
    TransferRun library{buffer, staging, ring}, reference{buffer, staging, ring};
    kvcanary::relocate_host_data(ExecSpace(), src, dst, library.buffer, library.records, kind, library.ring,
                                 stride_bytes);
    kvcanary::reference::relocate(src, dst, reference.buffer, reference.records, kind, reference.ring);
    Ring all = roomy(ring, reference.ring);
    Buffer scratch = buffer;
    Packed scratch_staging = staging;
    kvcanary::reference::relocate(src, dst, scratch, scratch_staging, kind, all);
    EXPECT_TRUE(same_buffer(library.buffer, reference.buffer));
    EXPECT_TRUE(same_buffer(library.records, reference.records));
    EXPECT_TRUE(same_ring(library.ring, reference.ring, all));
    if (fits_int32(src) && fits_int32(dst)) {
      TransferRun narrow{buffer, staging, ring};
      kvcanary::relocate_host_data<std::int32_t>(ExecSpace(), src, dst, narrow.buffer, narrow.records, kind,
                                                 narrow.ring, stride_bytes);
      EXPECT_TRUE(same_buffer(narrow.buffer, reference.buffer));
      EXPECT_TRUE(same_ring(narrow.ring, reference.ring, all));
    }
    return library;
  }
};

}  // namespace kvcanary_test

#endif
