// SPEC-CANARY §2–§3: every pinned hash value, on the host functions the kernels also use (impl/hash.hpp)
// and on the reference's slot_hash / fold.

#include "test_support.hpp"

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <limits>

namespace kvcanary_test {

namespace canary = kvcanary::reference;
using kvcanary::Impl::mix3;
using kvcanary::Impl::splitmix64;

TEST(Hashes, Splitmix64MatchesPinnedValues) {
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(1), 0x5692161D100B05E5ull);
  EXPECT_EQ(splitmix64(0xDEADBEEFCAFEBABEull), 0x7AD6664F09FFE52Cull);
  EXPECT_EQ(splitmix64(0xFFFFFFFFFFFFFFFFull), 0xB4D055FCF2CBBD7Bull);
  EXPECT_EQ(splitmix64(0x8000000000000000ull), 0x25C26EA579CEA98Aull);
  EXPECT_EQ(splitmix64(0), 0u);
}

TEST(Hashes, AnchorHashIsSplitmixOfAnchor) {
  EXPECT_EQ(splitmix64(0xC0FFEE1234567890ull), 0xDE7FAE23A9A1B716ull);
  EXPECT_EQ(kvcanary::Impl::kAnchorHash, 0xDE7FAE23A9A1B716ull);
  EXPECT_EQ(kvcanary::Impl::kAnchorHashInt64, -2414019407054260458LL);
}

TEST(Hashes, Mix3MatchesPinnedValues) {
  EXPECT_EQ(mix3(0xDE7FAE23A9A1B716ull, 100, 4), 0x5022670B6356AF64ull);
  EXPECT_EQ(mix3(0xDE7FAE23A9A1B716ull, 7, 10), 0x5E35681BCFCE7CF6ull);
  EXPECT_EQ(mix3(0, 0, 0), 0u);  // SPEC-CANARY §10: never-written records form a valid chain
}

TEST(Hashes, Int64RoundTripIsTwosComplement) {
  EXPECT_EQ(kvcanary::Impl::as_int64(0xFFFFFFFFFFFFFFFFull), -1);
  EXPECT_EQ(kvcanary::Impl::as_int64(0x8000000000000000ull), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(kvcanary::Impl::as_uint64(-1), 0xFFFFFFFFFFFFFFFFull);
}

// The §2 chain: seed −1, tokens 101…505 at positions 0–4; each record's prev_hash is the slot_hash of its
// predecessor, so the reference's slot_hash over a buffer of those records reproduces the pinned values.
TEST(Hashes, FiveTokenChainMatchesPinnedPrevHashes) {
  const std::uint64_t pinned[5] = {0xDE7FAE23A9A1B716ull, 0x542FE5061275A6ABull, 0x9890D56BDE53142Eull,
                                   0x5213C65EEE8A1DD1ull, 0xC749AFFE5A5A9634ull};
  canary::CanaryBuffer buffer(5);
  std::int64_t running = canary::slot_hash(buffer, -1);
  for (std::int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(kvcanary::Impl::as_uint64(running), pinned[i]) << "prev_hash of token " << i;
    buffer[static_cast<std::size_t>(i)] = canary::Record{101 * (i + 1), i, running, 0};
    running = canary::slot_hash(buffer, i);
  }
}

TEST(Hashes, SlotHashOfNegativeSlotIsAnchorHash) {
  const canary::CanaryBuffer buffer(3, canary::Record{5, 6, 7, 8});
  EXPECT_EQ(canary::slot_hash(buffer, -1), -2414019407054260458LL);
  EXPECT_EQ(canary::slot_hash(buffer, std::numeric_limits<std::int64_t>::min()), -2414019407054260458LL);
  // Slot 0 is read like any slot: mix3 of its record, not the anchor.
  EXPECT_EQ(canary::slot_hash(buffer, 0), kvcanary::Impl::as_int64(mix3(7, 5, 6)));
}

TEST(Hashes, SlotHashRejectsSlotOutsideTheBuffer) {
  const canary::CanaryBuffer buffer(3);
  const auto message = invalid_argument_message([&] { canary::slot_hash(buffer, 3); });
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, ::testing::HasSubstr("kvcanary::slot_hash: slot 3"));
}

// ---- §3 fold ----

inline canary::RealKvSource one_row_source(std::vector<std::uint8_t> bytes, std::int64_t page_size,
                                           std::int64_t bytes_per_token, std::int64_t read_bytes) {
  canary::RealKvSource source;
  source.row_bytes = static_cast<std::int64_t>(bytes.size());
  source.pages = 1;
  source.bytes = std::move(bytes);
  source.page_size = page_size;
  source.bytes_per_token = bytes_per_token;
  source.read_bytes = read_bytes;
  return source;
}

inline std::vector<std::uint8_t> pinned_fold_bytes() {
  return {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x81, 0x82, 0x84, 0x88, 0x90, 0xA0, 0xC0, 0xFF};
}

TEST(Hashes, FoldMatchesPinnedValue) {
  canary::RealKv real_kv{kvcanary::RealKvMode::All, {one_row_source(pinned_fold_bytes(), 1, 16, 16)}};
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), 0x6041580849E6407Dull);
  real_kv.mode = kvcanary::RealKvMode::Partial;  // eff = 16 = read_bytes: the same bytes
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), 0x6041580849E6407Dull);
}

TEST(Hashes, FoldIsZeroInModeNoneOrWithoutSources) {
  canary::RealKv real_kv{kvcanary::RealKvMode::None, {one_row_source(pinned_fold_bytes(), 1, 16, 16)}};
  EXPECT_EQ(canary::fold(real_kv, 0), 0);
  EXPECT_EQ(canary::fold(canary::RealKv{kvcanary::RealKvMode::All, {}}, 0), 0);
}

// The pinned 16 bytes at slot 1 of a page of 2 tokens (column 1 * bytes_per_token), zeros elsewhere.
TEST(Hashes, FoldReadsTheSlotsPageAndColumn) {
  std::vector<std::uint8_t> bytes(64, 0);
  const auto pinned = pinned_fold_bytes();
  std::copy(pinned.begin(), pinned.end(), bytes.begin() + 32);
  canary::RealKv real_kv{kvcanary::RealKvMode::All, {one_row_source(bytes, 2, 32, 16)}};
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(real_kv, 1)), 0x6041580849E6407Dull);
  EXPECT_NE(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), 0x6041580849E6407Dull);
}

// PARTIAL reads only the first 16 bytes of each token; ALL reads read_bytes.
TEST(Hashes, FoldPartialReadsSixteenBytesAndAllReadsReadBytes) {
  std::vector<std::uint8_t> bytes = pinned_fold_bytes();
  bytes.resize(32, 0x5A);
  canary::RealKv real_kv{kvcanary::RealKvMode::Partial, {one_row_source(bytes, 1, 32, 32)}};
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), 0x6041580849E6407Dull);
  real_kv.mode = kvcanary::RealKvMode::All;
  EXPECT_NE(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), 0x6041580849E6407Dull);
  // ALL over 32 bytes: acc chains over both 16-byte halves, then total = splitmix64(0 ^ acc).
  std::uint64_t acc = 0;
  for (int o = 0; o < 32; o += 8) {
    std::uint64_t word = 0;
    for (int b = 7; b >= 0; --b) word = word << 8 | bytes[static_cast<std::size_t>(o + b)];
    acc = splitmix64(acc ^ word);
  }
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(real_kv, 0)), splitmix64(acc));
}

TEST(Hashes, FoldSourceOrderMatters) {
  std::vector<std::uint8_t> zeros(16, 0);
  const auto a = one_row_source(pinned_fold_bytes(), 1, 16, 16);
  const auto b = one_row_source(zeros, 1, 16, 16);
  const canary::RealKv ab{kvcanary::RealKvMode::All, {a, b}};
  const canary::RealKv ba{kvcanary::RealKvMode::All, {b, a}};
  EXPECT_NE(canary::fold(ab, 0), canary::fold(ba, 0));
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(ba, 0)), 0x6041580849E6407Dull);  // splitmix64(0) == 0 first
  // One source: total = splitmix64(0 ^ acc); two: total = splitmix64(first ^ acc_b), and acc of 16 zero bytes is 0.
  EXPECT_EQ(kvcanary::Impl::as_uint64(canary::fold(ab, 0)), splitmix64(0x6041580849E6407Dull));
}

TEST(Hashes, FoldRejectsSlotOutsideTheSource) {
  const canary::RealKv real_kv{kvcanary::RealKvMode::All, {one_row_source(pinned_fold_bytes(), 1, 16, 16)}};
  for (const std::int64_t slot : {std::int64_t{1}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()}) {
    const auto message = invalid_argument_message([&] { canary::fold(real_kv, slot); });
    ASSERT_TRUE(message.has_value()) << "slot " << slot;
    EXPECT_THAT(*message, ::testing::HasSubstr("kvcanary::fold: "));
  }
}

}  // namespace kvcanary_test
