// SPEC-CANARY §12.6 on this backend, each call also checked against the host reference: the head
// fingerprint is the same per token for any split of the heads between ranks (1, 2, 4 ranks, uneven) and
// for both declared layouts ([page, H, D] and [H, page, D]); the consumer's check fires bit 4 where a
// transfer scrambled the heads (TRT-LLM #6507's split/concat in the wrong layout) and nowhere else.

#include "test_travel_support.hpp"

#include <random>

namespace kvcanary_test {

class HeadFingerprint : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  using Shard = kvcanary::reference::HeadShard;
  static constexpr std::int64_t kHeads = 8, kHeadBytes = 32, kPageSize = 4, kPages = 6;

  // The model's KV of one tensor: head h of slot s, `kHeadBytes` bytes.
  std::vector<std::uint8_t> model = [] {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kPages * kPageSize * kHeads * kHeadBytes));
    std::mt19937_64 rng(2412);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    return bytes;
  }();
  const std::uint8_t* model_head(std::int64_t slot, std::int64_t h) const {
    return model.data() + (slot * kHeads + h) * kHeadBytes;
  }

  // A rank's shard of heads [first, first + count), stored in `head_major` ([H, page, D]) or token-major layout.
  Shard shard(std::int64_t first, std::int64_t count, bool head_major) const {
    Shard s;
    s.pages = kPages;
    s.row_bytes = kPageSize * count * kHeadBytes;
    s.page_size = kPageSize;
    s.head_bytes = kHeadBytes;
    s.first_head = first;
    s.num_heads = count;
    s.token_stride_bytes = head_major ? kHeadBytes : count * kHeadBytes;
    s.head_stride_bytes = head_major ? kPageSize * kHeadBytes : kHeadBytes;
    s.bytes.assign(static_cast<std::size_t>(s.pages * s.row_bytes), 0);
    for (std::int64_t slot = 0; slot < kPages * kPageSize; ++slot)
      for (std::int64_t j = 0; j < count; ++j) {
        const std::int64_t at = (slot / kPageSize) * s.row_bytes + (slot % kPageSize) * s.token_stride_bytes + j * s.head_stride_bytes;
        std::copy_n(model_head(slot, first + j), kHeadBytes, s.bytes.begin() + at);
      }
    return s;
  }

  // head_fingerprints on the backend (int64 and int32 slots) and the reference; checks they agree.
  Int64s partials(const Int64s& slots, const Shard& s, Ring* ring_out = nullptr) const {
    Int64s library(slots.size(), -5), reference(slots.size(), -5), narrow(slots.size(), -5);
    Ring lib_ring = empty_ring(8), ref_ring = empty_ring(8), narrow_ring = empty_ring(8);
    kvcanary::head_fingerprints_host_data(ExecSpace(), slots, s, library, KernelKind::HEAD_V_FULL, lib_ring);
    kvcanary::reference::head_fingerprints(slots, s, reference, KernelKind::HEAD_V_FULL, ref_ring);
    kvcanary::head_fingerprints_host_data<std::int32_t>(ExecSpace(), slots, s, narrow, KernelKind::HEAD_V_FULL, narrow_ring);
    EXPECT_EQ(library, reference);
    EXPECT_EQ(narrow, reference);
    EXPECT_TRUE(same_ring(lib_ring, ref_ring, ref_ring));
    EXPECT_TRUE(same_ring(narrow_ring, ref_ring, ref_ring));
    if (ring_out != nullptr) *ring_out = lib_ring;
    return library;
  }

  // The all-reduce of the ranks' partial sums (mod 2^64).
  Int64s combined(const Int64s& slots, const std::vector<std::pair<std::int64_t, std::int64_t>>& ranks, bool head_major) const {
    Int64s total(slots.size(), 0);
    for (const auto& rank : ranks) {
      const Int64s part = partials(slots, shard(rank.first, rank.second, head_major));
      for (std::size_t i = 0; i < slots.size(); ++i)
        total[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(total[i]) + static_cast<std::uint64_t>(part[i]));
    }
    return total;
  }

  Ring check(const Int64s& slots, const Int64s& expected, const Int64s& actual) const {
    Ring library = empty_ring(16), reference = empty_ring(16);
    kvcanary::check_fingerprints_host_data(ExecSpace(), slots, expected, actual, KernelKind::HEAD_V_FULL, library);
    kvcanary::reference::check_fingerprints(slots, expected, actual, KernelKind::HEAD_V_FULL, reference);
    EXPECT_TRUE(same_ring(library, reference, reference));
    return library;
  }

  const Int64s slots{0, 1, 5, 7, 13, 23};
};

TEST_F(HeadFingerprint, AnySplitOfTheHeadsAndEitherLayoutGiveTheSameValue) {
  const Int64s one_rank = combined(slots, {{0, 8}}, false);
  EXPECT_EQ(combined(slots, {{0, 4}, {4, 4}}, false), one_rank);                  // TP 2
  EXPECT_EQ(combined(slots, {{0, 2}, {2, 2}, {4, 2}, {6, 2}}, true), one_rank);   // TP 4, head-major layout
  EXPECT_EQ(combined(slots, {{6, 2}, {0, 3}, {3, 3}}, true), one_rank);           // uneven, any order
  EXPECT_EQ(combined(slots, {{0, 8}}, true), one_rank);
  for (std::size_t i = 1; i < slots.size(); ++i) EXPECT_NE(one_rank[i], one_rank[0]);  // tokens differ
}

TEST_F(HeadFingerprint, AByteOfOneHeadChangesThatTokenOnly) {
  const Int64s before = partials(slots, shard(0, 8, false));
  Shard s = shard(0, 8, false);
  s.bytes[static_cast<std::size_t>(1 * s.row_bytes + 1 * s.token_stride_bytes + 3 * kHeadBytes + 17)] ^= 0x01;  // slot 5, head 3
  const Int64s after = partials(slots, s);
  for (std::size_t i = 0; i < slots.size(); ++i) EXPECT_EQ(after[i] != before[i], slots[i] == 5) << slots[i];
}

TEST_F(HeadFingerprint, ASplitInTheWrongLayoutIsCaughtAtTheConsumer) {
  // Prefill TP 2 stamps the combined fingerprint; decode TP 4 receives the heads through a split kernel that
  // reads the producer's token-major shard as head-major (TRT-LLM #6507) and fingerprints its own bytes.
  const Int64s expected = combined(slots, {{0, 4}, {4, 4}}, false);
  EXPECT_TRUE(check(slots, expected, combined(slots, {{0, 2}, {2, 2}, {4, 2}, {6, 2}}, true)).rows.empty());
  Int64s actual(slots.size(), 0);
  for (const std::int64_t producer : {0, 4}) {
    const Shard sent = shard(producer, 4, false);
    for (const std::int64_t half : {0, 2}) {
      Shard received = shard(producer + half, 2, true);
      // The wrong split: (slot, head j) taken from the producer's bytes at head-major offsets.
      for (std::int64_t slot = 0; slot < kPages * kPageSize; ++slot)
        for (std::int64_t j = 0; j < 2; ++j) {
          const std::int64_t from = (slot / kPageSize) * sent.row_bytes + (half + j) * kPageSize * kHeadBytes + (slot % kPageSize) * kHeadBytes;
          const std::int64_t to = (slot / kPageSize) * received.row_bytes + (slot % kPageSize) * received.token_stride_bytes + j * received.head_stride_bytes;
          std::copy_n(sent.bytes.begin() + from, kHeadBytes, received.bytes.begin() + to);
        }
      const Int64s part = partials(slots, received);
      for (std::size_t i = 0; i < slots.size(); ++i)
        actual[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(actual[i]) + static_cast<std::uint64_t>(part[i]));
    }
  }
  const Ring ring = check(slots, expected, actual);
  EXPECT_EQ(ring.count, static_cast<std::int64_t>(slots.size()));  // every token's heads were scrambled
  for (const RingRow& row : ring.rows) EXPECT_EQ(row[kvcanary::kRowFailReasonBits], kvcanary::kVerifyRealKvHash);
  EXPECT_EQ(ring.slot_run_counter, static_cast<std::int64_t>(slots.size()));
}

TEST_F(HeadFingerprint, PaddingOutOfRangeAndHostErrors) {
  Ring ring;
  const Int64s out = partials({-1, 24, 3}, shard(0, 8, false), &ring);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 0);
  EXPECT_NE(out[2], 0);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0], (RingRow{1, 24, -1, -1, -1, -1, 1, kvcanary::kOutOfRange}));
  EXPECT_EQ(ring.slot_run_counter, 1);
  EXPECT_EQ(check({-1, 2}, {1, 2}, {3, 2}).count, 0);  // padding is not compared
  Shard bad = shard(0, 8, false);
  bad.num_heads = 9;  // reads past the row
  Int64s values(1);
  Ring r = empty_ring(1);
  EXPECT_THROW(kvcanary::head_fingerprints_host_data(ExecSpace(), {1}, bad, values, KernelKind::HEAD_K_FULL, r),
               std::invalid_argument);
  EXPECT_THROW(kvcanary::reference::head_fingerprints({1}, bad, values, KernelKind::HEAD_K_FULL, r), std::invalid_argument);
  bad = shard(0, 8, false);
  bad.head_bytes = 24;
  EXPECT_THROW(kvcanary::reference::head_fingerprints({1}, bad, values, KernelKind::HEAD_K_FULL, r), std::invalid_argument);
  bad = shard(0, 8, false);
  bad.token_stride_bytes = std::numeric_limits<std::int64_t>::max() / 16 * 16;  // overflow-proof bound check
  EXPECT_THROW(kvcanary::reference::head_fingerprints({1}, bad, values, KernelKind::HEAD_K_FULL, r), std::invalid_argument);
  EXPECT_THROW(kvcanary::check_fingerprints_host_data(ExecSpace(), {1, 2}, {1}, {1, 2}, KernelKind::HEAD_K_FULL, r),
               std::invalid_argument);
  EXPECT_EQ(r.kernel_run_counter, 0);
}

}  // namespace kvcanary_test
