#ifndef KVCANARY_TEST_CANARY_SUPPORT_HPP
#define KVCANARY_TEST_CANARY_SUPPORT_HPP

// Helpers of the canary-stage tests: running write()/verify() on a backend and the reference from the
// same state, and comparing buffers, rings (rows as multisets: their order across threads is
// unspecified) and counters.

#include "test_support.hpp"

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/host_bridge_canary_v2.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

namespace kvcanary_test {

using kvcanary::CanaryAlgorithm;
using kvcanary::KernelKind;
using Buffer = kvcanary::reference::CanaryBuffer;
using Record = kvcanary::reference::Record;
using Ring = kvcanary::reference::ViolationRing;
using RingRow = kvcanary::reference::RingRow;
using RealKv = kvcanary::reference::RealKv;
using Tokens = kvcanary::reference::StepTokens;

constexpr std::int64_t kAnchorHash = -2414019407054260458LL;  // SPEC-CANARY §2, as int64

inline Ring empty_ring(std::int64_t capacity) {
  Ring ring;
  ring.capacity = capacity;
  return ring;
}

inline std::vector<RingRow> sorted(std::vector<RingRow> rows) {
  std::sort(rows.begin(), rows.end());
  return rows;
}

inline std::string describe(const RingRow& row) {
  std::ostringstream os;
  os << "[";
  for (std::size_t f = 0; f < row.size(); ++f) os << (f ? ", " : "") << row[f];
  return os.str() + "]";
}

// Buffers record by record.
inline ::testing::AssertionResult same_buffer(const Buffer& library, const Buffer& reference) {
  if (library.size() != reference.size())
    return ::testing::AssertionFailure() << "buffers of " << library.size() << " and " << reference.size() << " slots";
  std::ostringstream diff;
  int shown = 0;
  for (std::size_t s = 0; s < library.size(); ++s) {
    const Record& a = library[s];
    const Record& b = reference[s];
    if (a == b || ++shown > 5) continue;
    diff << "\n  slot " << s << ": library (" << a.token << ", " << a.position << ", " << a.prev_hash << ", "
         << a.real_kv_hash << "), reference (" << b.token << ", " << b.position << ", " << b.prev_hash << ", "
         << b.real_kv_hash << ")";
  }
  if (shown == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << shown << " records differ:" << diff.str();
}

// Rings: counters and count equal; rows equal as multisets when nothing overflowed, else the library's
// kept rows must be `capacity` rows of `all` (the reference's rows of the same call with room for all).
inline ::testing::AssertionResult same_ring(const Ring& library, const Ring& reference, const Ring& all) {
  std::ostringstream diff;
  if (library.count != reference.count) diff << "\n  count: library " << library.count << ", reference " << reference.count;
  if (library.slot_run_counter != reference.slot_run_counter)
    diff << "\n  slot_run_counter: library " << library.slot_run_counter << ", reference " << reference.slot_run_counter;
  if (library.kernel_run_counter != reference.kernel_run_counter)
    diff << "\n  kernel_run_counter: library " << library.kernel_run_counter << ", reference "
         << reference.kernel_run_counter;
  if (library.rows.size() != reference.rows.size())
    diff << "\n  kept rows: library " << library.rows.size() << ", reference " << reference.rows.size();
  const std::vector<RingRow> rows = sorted(library.rows);
  const std::vector<RingRow> expected = sorted(reference.count <= reference.capacity ? reference.rows : all.rows);
  if (reference.count <= reference.capacity) {
    if (rows != expected) {
      diff << "\n  rows differ:";
      for (const RingRow& r : rows) diff << "\n    library   " << describe(r);
      for (const RingRow& r : expected) diff << "\n    reference " << describe(r);
    }
  } else if (!std::includes(expected.begin(), expected.end(), rows.begin(), rows.end())) {
    diff << "\n  the library kept rows that no violation of the call produced";
  }
  if (diff.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rings differ:" << diff.str();
}

inline bool fits_int32(const Tokens& t) {
  const auto fits = [](const std::vector<std::int64_t>& values) {
    return std::all_of(values.begin(), values.end(), [](std::int64_t v) { return v == static_cast<std::int32_t>(v); });
  };
  return fits(t.input_ids) && fits(t.positions) && fits(t.out_cache_loc) &&
         (!t.expected_input_ids || (fits(*t.expected_input_ids) && fits(*t.expected_positions)));
}

// A VerifyPlan of entries (slot, expected position, prev, expected token), all valid, enabled.
using kvcanary::reference::verify_plan_of;

// The write of SPEC-CANARY §2's example and §11's facts: one request, tokens 101, 202, 303 at positions
// 0-2 into slots 1-3, from seed -1.
inline Outputs three_token_write_plan() {
  Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
  plan.write_offsets = {0, 3};
  plan.write_seed_slot_indices = {-1};
  plan.write_num_valid_reqs = 1;
  return plan;
}
inline Tokens three_tokens_in_slots_1_to_3() {
  Tokens t;
  t.input_ids = {101, 202, 303};
  t.positions = {0, 1, 2};
  t.out_cache_loc = {1, 2, 3};
  return t;
}

// One stage call on both sides from the same state.
struct StageRun {
  Buffer buffer;
  Ring ring;
};

template <class ExecSpace>
struct CanaryRunner {
  using ExecSpaceType = ExecSpace;
  CanaryAlgorithm algorithm = CanaryAlgorithm::Default;
  kvcanary::HostDataLayout layout{};
  // The verify checks of SPEC-CANARY §11 on both sides (v1: §5 as the original wrote it).
  kvcanary::VerifyChecks checks = kvcanary::VerifyChecks::v1();

  // write() on the backend and the reference from (buffer, ring); checks both agree; returns the library's.
  StageRun write(const Outputs& plan, const Tokens& tokens, KernelKind kind, const RealKv& real_kv, const Buffer& buffer,
                 const Ring& ring) const {
    StageRun library{buffer, ring}, reference{buffer, ring};
    kvcanary::HostDataLayout as_uploaded = layout;
    as_uploaded.int32_tokens = layout.int32_tokens && fits_int32(tokens);  // int32 arrays hold only int32 values
    kvcanary::write_host_data(ExecSpace(), plan, tokens, kind, real_kv, library.buffer, library.ring, algorithm,
                              as_uploaded);
    kvcanary::reference::write(plan, tokens, kind, real_kv, reference.buffer, reference.ring);
    Ring all = ring;
    all.capacity = ring.count + reference.ring.count + 1;
    Buffer scratch = buffer;
    kvcanary::reference::write(plan, tokens, kind, real_kv, scratch, all);
    EXPECT_TRUE(same_buffer(library.buffer, reference.buffer));
    EXPECT_TRUE(same_ring(library.ring, reference.ring, all));
    return library;
  }

  // write() of several buffers in one call on the backend, and the reference's write() once per buffer in
  // order, from the same state; checks both agree; returns the library's buffers.
  std::vector<Buffer> write(const Outputs& plan, const Tokens& tokens, const std::vector<KernelKind>& kinds,
                            const std::vector<const RealKv*>& real_kvs, const std::vector<Buffer>& buffers,
                            const Ring& ring, Ring* library_ring = nullptr) const {
    std::vector<Buffer> library = buffers, reference = buffers, scratch = buffers;
    std::vector<Buffer*> library_buffers;
    for (Buffer& b : library) library_buffers.push_back(&b);
    Ring library_ring_state = ring, reference_ring = ring, all = ring;
    kvcanary::HostDataLayout as_uploaded = layout;
    as_uploaded.int32_tokens = layout.int32_tokens && fits_int32(tokens);
    kvcanary::write_host_data(ExecSpace(), plan, tokens, library_buffers, kinds, real_kvs, library_ring_state,
                              algorithm, as_uploaded);
    for (std::size_t t = 0; t < buffers.size(); ++t)
      kvcanary::reference::write(plan, tokens, kinds[t], *real_kvs[t], reference[t], reference_ring);
    all.capacity = ring.count + reference_ring.count + 1;
    for (std::size_t t = 0; t < buffers.size(); ++t)
      kvcanary::reference::write(plan, tokens, kinds[t], *real_kvs[t], scratch[t], all);
    for (std::size_t t = 0; t < buffers.size(); ++t)
      EXPECT_TRUE(same_buffer(library[t], reference[t])) << "target " << t;
    EXPECT_TRUE(same_ring(library_ring_state, reference_ring, all));
    if (library_ring != nullptr) *library_ring = library_ring_state;
    return library;
  }

  // verify() of one or more buffers on the backend and the reference; checks both agree.
  Ring verify(const Outputs& plan, const std::vector<const Buffer*>& buffers, const std::vector<KernelKind>& kinds,
              const std::vector<const RealKv*>& real_kvs, bool check_expected_token, const Ring& ring) const {
    Ring library = ring;
    kvcanary::verify_host_data(ExecSpace(), plan, buffers, kinds, real_kvs, check_expected_token, checks, library,
                               algorithm, layout);
    Ring reference = ring;
    Ring all = ring;
    for (std::size_t t = 0; t < buffers.size(); ++t)
      kvcanary::reference::verify(plan, *buffers[t], kinds[t], *real_kvs[t], check_expected_token, checks, reference);
    all.capacity = reference.count + 1;
    for (std::size_t t = 0; t < buffers.size(); ++t)
      kvcanary::reference::verify(plan, *buffers[t], kinds[t], *real_kvs[t], check_expected_token, checks, all);
    EXPECT_TRUE(same_ring(library, reference, all));
    return library;
  }

  // free() on the backend (int64 and, where the values fit, int32 slots) and the reference; checks all agree.
  StageRun free(const Int64s& slots, std::int64_t epoch, const Buffer& buffer, const Ring& ring,
                KernelKind kind = KernelKind::HEAD_K_FULL) const {
    StageRun library{buffer, ring}, reference{buffer, ring};
    kvcanary::free_host_data(ExecSpace(), slots, epoch, kind, library.buffer, library.ring, layout.stride_bytes);
    kvcanary::reference::free(slots, epoch, kind, reference.buffer, reference.ring);
    Ring all = ring;
    all.capacity = ring.count + reference.ring.count + 1;
    Buffer scratch = buffer;
    kvcanary::reference::free(slots, epoch, kind, scratch, all);
    EXPECT_TRUE(same_buffer(library.buffer, reference.buffer));
    EXPECT_TRUE(same_ring(library.ring, reference.ring, all));
    if (std::all_of(slots.begin(), slots.end(), [](std::int64_t v) { return v == static_cast<std::int32_t>(v); })) {
      StageRun narrow{buffer, ring};
      kvcanary::free_host_data<std::int32_t>(ExecSpace(), slots, epoch, kind, narrow.buffer, narrow.ring);
      EXPECT_TRUE(same_buffer(narrow.buffer, reference.buffer));
      EXPECT_TRUE(same_ring(narrow.ring, reference.ring, all));
    }
    return library;
  }

  // cross_check() on the backend (int32 and int64 metadata where the values fit) and the reference.
  Ring cross_check(const Inputs& inputs, const kvcanary::reference::BackendMetadata& metadata, const Ring& ring,
                   KernelKind kind = KernelKind::HEAD_K_FULL) const {
    Ring library = ring, reference = ring;
    kvcanary::cross_check_host_data<std::int64_t>(ExecSpace(), inputs, metadata, kind, library);
    kvcanary::reference::cross_check(inputs, metadata, kind, reference);
    Ring all = ring;
    all.capacity = reference.count + 1;
    kvcanary::reference::cross_check(inputs, metadata, kind, all);
    EXPECT_TRUE(same_ring(library, reference, all));
    const auto fits = [](const Int64s& values) {
      return std::all_of(values.begin(), values.end(), [](std::int64_t v) { return v == static_cast<std::int32_t>(v); });
    };
    if (fits(metadata.kv_indptr) && fits(metadata.kv_indices) && fits(metadata.block_table) && fits(metadata.seq_lens)) {
      Ring narrow = ring;
      kvcanary::cross_check_host_data<std::int32_t>(ExecSpace(), inputs, metadata, kind, narrow);
      EXPECT_TRUE(same_ring(narrow, reference, all));
    }
    return library;
  }

  Ring verify(const Outputs& plan, const Buffer& buffer, const Ring& ring, bool check_expected_token = true,
              KernelKind kind = KernelKind::HEAD_K_FULL, const RealKv& real_kv = RealKv{}) const {
    return verify(plan, {&buffer}, {kind}, {&real_kv}, check_expected_token, ring);
  }
};

}  // namespace kvcanary_test

#endif
