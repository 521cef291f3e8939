// SPEC-CANARY §12.4 on this backend: a consumer that imports the producer's records (never re-stamping
// them) and verifies the imported prefix with its own plan and its own KV bytes catches a transfer that
// was partial, out of order, into the wrong pages, late, restored from a stale tier entry, read in another
// layout, or a defragmentation that copied wrong bytes — and passes a correct one. Two places, each a
// canary buffer and a real-KV source (32 bytes a token, page size 1), slots numbered differently.

#include "test_travel_support.hpp"

namespace kvcanary_test {

class TravelConsumer : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  static constexpr std::int64_t kSlots = 16;
  static constexpr std::int64_t kTokenBytes = 32;

  struct Place {
    Buffer canary = Buffer(kSlots);
    RealKv kv = empty_kv();
  };

  CanaryRunner<ExecSpace> canary = [] {
    CanaryRunner<ExecSpace> r;
    r.checks = kvcanary::VerifyChecks{};  // the library's defaults: freed and slot-zero checks on
    return r;
  }();
  TransferRunner<ExecSpace> transfer;

  const Int64s tokens{101, 202, 303, 404};
  const Int64s producer_slots{2, 5, 3, 7};
  const Int64s consumer_slots{9, 4, 11, 6};

  static RealKv empty_kv() {
    RealKv kv;
    kv.mode = kvcanary::RealKvMode::All;
    kvcanary::reference::RealKvSource source;
    source.pages = kSlots;
    source.row_bytes = kTokenBytes;
    source.bytes_per_token = kTokenBytes;
    source.read_bytes = kTokenBytes;
    source.bytes.assign(static_cast<std::size_t>(kSlots * kTokenBytes), 0);
    kv.sources.push_back(source);
    return kv;
  }
  static std::uint8_t* token_bytes(Place& place, std::int64_t slot) {
    return place.kv.sources[0].bytes.data() + slot * kTokenBytes;
  }
  // The KV an engine computes for (token, position): any bytes that differ between tokens.
  static void compute_kv(Place& place, std::int64_t slot, std::int64_t token, std::int64_t position) {
    for (std::int64_t b = 0; b < kTokenBytes; ++b)
      token_bytes(place, slot)[b] = static_cast<std::uint8_t>(token * 31 + position * 7 + b * 13);
  }
  static void copy_kv(Place& from, std::int64_t from_slot, Place& to, std::int64_t to_slot) {
    std::copy_n(token_bytes(from, from_slot), kTokenBytes, token_bytes(to, to_slot));
  }

  // A request's tokens at positions 0.. written (head stamp with the real KV) into `slots` of `place`.
  void write_request(Place& place, const Int64s& request_tokens, const Int64s& slots) const {
    for (std::size_t i = 0; i < slots.size(); ++i)
      compute_kv(place, slots[i], request_tokens[i], static_cast<std::int64_t>(i));
    Outputs plan = kvcanary::reference::make_outputs(0, 1, 0);
    plan.write_offsets = {0, static_cast<std::int64_t>(slots.size())};
    plan.write_seed_slot_indices = {-1};
    plan.write_num_valid_reqs = 1;
    Tokens t;
    t.input_ids = request_tokens;
    t.out_cache_loc = slots;
    for (std::size_t i = 0; i < slots.size(); ++i) t.positions.push_back(static_cast<std::int64_t>(i));
    place.canary = canary.write(plan, t, KernelKind::HEAD_K_FULL, place.kv, place.canary, empty_ring(16)).buffer;
  }

  // The consumer's verify of a request's prefix at `slots` (its own plan, pool and bytes).
  Ring verify(const Place& place, const Int64s& request_tokens, const Int64s& slots, bool pool = true) const {
    std::vector<std::array<std::int64_t, 4>> entries;
    for (std::size_t i = 0; i < slots.size(); ++i)
      entries.push_back({slots[i], static_cast<std::int64_t>(i), i == 0 ? -1 : slots[i - 1], request_tokens[i]});
    return canary.verify(verify_plan_of(entries), place.canary, empty_ring(32), pool, KernelKind::HEAD_K_FULL, place.kv);
  }

  Packed export_prefix(const Place& producer) const {
    return transfer.export_records(producer_slots, producer.canary, Packed(producer_slots.size()), empty_ring(4)).records;
  }
  void import(Place& consumer, const Int64s& slots, const Packed& wire) const {
    consumer.canary = transfer.import_records(slots, wire, consumer.canary, empty_ring(4)).buffer;
  }
  void send_kv(Place& producer, Place& consumer) const {
    for (std::size_t i = 0; i < producer_slots.size(); ++i) copy_kv(producer, producer_slots[i], consumer, consumer_slots[i]);
  }
  // A correct disaggregated transfer: the producer's prefill, its records and bytes at the consumer's slots.
  void transfer_prefix(Place& producer, Place& consumer) const {
    write_request(producer, tokens, producer_slots);
    send_kv(producer, consumer);
    import(consumer, consumer_slots, export_prefix(producer));
  }

  static std::int64_t bits_of(const Ring& ring, std::int64_t slot) {
    std::int64_t bits = 0;
    for (const RingRow& row : ring.rows)
      if (row[kvcanary::kRowSlot] == slot) bits |= row[kvcanary::kRowFailReasonBits];
    return bits;
  }
  static std::vector<std::int64_t> slots_hit(const Ring& ring) {
    std::vector<std::int64_t> slots;
    for (const RingRow& row : ring.rows) slots.push_back(row[kvcanary::kRowSlot]);
    std::sort(slots.begin(), slots.end());
    return slots;
  }
};

TEST_F(TravelConsumer, TheSpecFactRenumberedChainVerifiesClean) {
  Place producer, consumer;
  write_request(producer, {101, 202, 303}, {1, 2, 3});
  const Packed wire = transfer.export_records({1, 2, 3}, producer.canary, Packed(3), empty_ring(4)).records;
  copy_kv(producer, 1, consumer, 7);
  copy_kv(producer, 2, consumer, 4);
  copy_kv(producer, 3, consumer, 9);
  import(consumer, {7, 4, 9}, wire);
  EXPECT_EQ(verify(consumer, {101, 202, 303}, {7, 4, 9}).count, 0);
}

TEST_F(TravelConsumer, ACorrectTransferVerifiesClean) {
  Place producer, consumer;
  transfer_prefix(producer, consumer);
  EXPECT_EQ(verify(consumer, tokens, consumer_slots).count, 0);
  EXPECT_EQ(verify(producer, tokens, producer_slots).count, 0);
}

TEST_F(TravelConsumer, PartialRecordsAreCaught) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  send_kv(producer, consumer);
  import(consumer, {9, 4, -1, -1}, export_prefix(producer));  // the last two records never arrived
  const Ring ring = verify(consumer, tokens, consumer_slots);
  EXPECT_EQ(slots_hit(ring), (std::vector<std::int64_t>{6, 11}));
  const std::int64_t never_written = kvcanary::kVerifyPosition | kvcanary::kVerifyToken;
  EXPECT_EQ(bits_of(ring, 11) & never_written, never_written);
  EXPECT_EQ(bits_of(ring, 6) & never_written, never_written);
}

TEST_F(TravelConsumer, PartialBytesAreBit4Only) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  for (std::size_t i = 0; i < 3; ++i) copy_kv(producer, producer_slots[i], consumer, consumer_slots[i]);  // one page short
  import(consumer, consumer_slots, export_prefix(producer));
  const Ring ring = verify(consumer, tokens, consumer_slots);
  ASSERT_EQ(ring.rows.size(), 1u);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowSlot], 6);
  EXPECT_EQ(ring.rows[0][kvcanary::kRowFailReasonBits], kvcanary::kVerifyRealKvHash);
}

TEST_F(TravelConsumer, RecordsOutOfOrderAreCaught) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  send_kv(producer, consumer);
  import(consumer, {4, 9, 11, 6}, export_prefix(producer));  // the first two swapped
  const Ring ring = verify(consumer, tokens, consumer_slots, /*pool=*/false);
  EXPECT_TRUE(bits_of(ring, 9) & kvcanary::kVerifyPosition);
  EXPECT_TRUE(bits_of(ring, 4) & kvcanary::kVerifyPosition);
  EXPECT_EQ(bits_of(ring, 11), kvcanary::kVerifyChainHash);  // its predecessor's record changed
  EXPECT_EQ(bits_of(ring, 6), 0);
}

TEST_F(TravelConsumer, BytesIntoTheWrongPagesAreBit4) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  copy_kv(producer, producer_slots[0], consumer, 9);
  copy_kv(producer, producer_slots[1], consumer, 11);  // entries 1 and 2 land in each other's pages
  copy_kv(producer, producer_slots[2], consumer, 4);
  copy_kv(producer, producer_slots[3], consumer, 6);
  import(consumer, consumer_slots, export_prefix(producer));
  const Ring ring = verify(consumer, tokens, consumer_slots);
  EXPECT_EQ(slots_hit(ring), (std::vector<std::int64_t>{4, 11}));
  EXPECT_EQ(bits_of(ring, 4), kvcanary::kVerifyRealKvHash);
  EXPECT_EQ(bits_of(ring, 11), kvcanary::kVerifyRealKvHash);
}

TEST_F(TravelConsumer, ALayoutMixUpIsBit4OnEveryToken) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  send_kv(producer, consumer);
  for (const std::int64_t slot : consumer_slots)  // read as another layout: the token's two 16-byte halves swapped
    std::swap_ranges(token_bytes(consumer, slot), token_bytes(consumer, slot) + 16, token_bytes(consumer, slot) + 16);
  import(consumer, consumer_slots, export_prefix(producer));
  const Ring ring = verify(consumer, tokens, consumer_slots);
  EXPECT_EQ(slots_hit(ring), (std::vector<std::int64_t>{4, 6, 9, 11}));
  for (const std::int64_t slot : consumer_slots) EXPECT_EQ(bits_of(ring, slot), kvcanary::kVerifyRealKvHash);
}

TEST_F(TravelConsumer, ALateWriteIntoFreedAndReusedPagesIsCaught) {
  Place producer, consumer;
  write_request(producer, tokens, producer_slots);
  // The consumer aborts the request before its KV lands: it frees the destination pages ...
  consumer.canary = canary.free(consumer_slots, 1, consumer.canary, empty_ring(4)).buffer;
  // ... a read of them now fires at once (bit 128) ...
  const Buffer freed_records = consumer.canary;
  EXPECT_TRUE(bits_of(verify(consumer, {7, 8}, {4, 6}), 4) & kvcanary::kVerifyFreed);
  // ... and gives two of them to request B, which writes its own KV and records.
  write_request(consumer, {7, 8}, {4, 6});
  EXPECT_EQ(verify(consumer, {7, 8}, {4, 6}).count, 0);
  // The prefill's late write lands: bytes only (B's records stay) -> bit 4; bytes and records -> B's plan fails.
  Place late = consumer;
  send_kv(producer, late);
  Ring ring = verify(late, {7, 8}, {4, 6});
  EXPECT_EQ(bits_of(ring, 4), kvcanary::kVerifyRealKvHash);
  EXPECT_EQ(bits_of(ring, 6), kvcanary::kVerifyRealKvHash);
  import(late, consumer_slots, export_prefix(producer));
  ring = verify(late, {7, 8}, {4, 6});
  EXPECT_TRUE(bits_of(ring, 4) & kvcanary::kVerifyToken);
  EXPECT_TRUE(bits_of(ring, 6) & kvcanary::kVerifyPosition);
  EXPECT_EQ(freed_records[4].token, kvcanary::kFreedToken);
}

TEST_F(TravelConsumer, AStaleTierEntryIsCaught) {
  Place tier_old, device;
  // An older entry of the same prefix (token 999 at position 2) stays in the tier; the plan describes the new.
  write_request(tier_old, {101, 202, 999, 404}, producer_slots);
  send_kv(tier_old, device);
  import(device, consumer_slots, export_prefix(tier_old));
  const Ring ring = verify(device, tokens, consumer_slots);
  EXPECT_EQ(bits_of(ring, 11), kvcanary::kVerifyToken);  // the stale record is self-consistent: its token differs
  EXPECT_EQ(bits_of(ring, 6), 0);  // 404's record chains from 999's: consistent with what was restored
  // Without a pool the stale token is a blind spot (§12.4): only a successor from the *new* version shows it.
  EXPECT_EQ(verify(device, tokens, consumer_slots, /*pool=*/false).count, 0);
}

TEST_F(TravelConsumer, DefragmentationThatCopiesWrongBytesIsBit4OnTheMovedSlot) {
  Place producer, consumer;
  transfer_prefix(producer, consumer);
  const Int64s compacted{1, 2, 3, 5};
  consumer.canary = transfer.relocate(consumer_slots, compacted, consumer.canary, Packed(4), empty_ring(4)).buffer;
  for (std::size_t i = 0; i < compacted.size(); ++i) copy_kv(consumer, consumer_slots[i], consumer, compacted[i]);
  EXPECT_EQ(verify(consumer, tokens, compacted).count, 0);
  token_bytes(consumer, 3)[5] ^= 0xFF;  // the copy of one cell moved garbage
  const Ring ring = verify(consumer, tokens, compacted);
  EXPECT_EQ(slots_hit(ring), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(bits_of(ring, 3), kvcanary::kVerifyRealKvHash);
}

}  // namespace kvcanary_test
