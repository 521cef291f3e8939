// What SPEC-CANARY §4 leaves open in a write call (write_outcomes.hpp): the oracle accepts every order
// of two requests' store and seed read (and a torn seed read), and nothing else.

#include "test_canary_support.hpp"

#include <kvcanary/tools/write_outcomes.hpp>

namespace kvcanary_test {

namespace outcomes = kvcanary::reference;

// Request 1's seed slot 4 is request 0's target (repro seed_is_other_requests_target.json of issue 19).
class WriteOutcomes : public ::testing::Test {
 protected:
  Outputs plan = kvcanary::reference::make_outputs(0, 2, 0);
  Tokens tokens;
  Buffer before = Buffer(5);
  Ring ring_before = empty_ring(16);

  WriteOutcomes() {
    plan.write_offsets = {0, 1, 2};
    plan.write_seed_slot_indices = {-1, 4};
    plan.write_num_valid_reqs = 2;
    tokens.input_ids = {7, 8};
    tokens.positions = {239, 48};
    tokens.out_cache_loc = {4, 2};
    before[4] = {9, 47, 0, 0};
  }

  // The call's outcome when request 1 reads its seed as `seed` (the serial order reads request 0's store).
  std::pair<Buffer, Ring> with_seed_read(const kvcanary::reference::Record& seed) const {
    std::pair<Buffer, Ring> out{before, ring_before};
    out.second.kernel_run_counter += 1;
    for (std::int64_t r = 0; r < 2; ++r) {
      const auto record = r == 1 ? seed : kvcanary::reference::Record{};
      out.second.slot_run_counter += kvcanary::reference::write_request(
          plan, tokens, KernelKind::HEAD_K_FULL, {}, 5, r, record, out.second,
          [&](std::int64_t slot, const kvcanary::reference::Record& stored) { out.first[static_cast<std::size_t>(slot)] = stored; });
    }
    return out;
  }

  bool allowed(const std::pair<Buffer, Ring>& outcome) const {
    return outcomes::check_write_outcome(plan, tokens, KernelKind::HEAD_K_FULL, {}, before, ring_before, outcome.first,
                                         outcome.second)
        .allowed;
  }
};

TEST_F(WriteOutcomes, OpenPartsAreFoundFromTheCallAlone) {
  const auto open = outcomes::open_writes(plan, tokens, 5);
  EXPECT_EQ(open.contested_seeds, Int64s{1});
  EXPECT_TRUE(open.shared_slots.empty());
  tokens.out_cache_loc = {3, 3};  // two tokens, one slot; the seed no one writes
  const auto shared = outcomes::open_writes(plan, tokens, 5);
  EXPECT_TRUE(shared.contested_seeds.empty());
  EXPECT_EQ(shared.shared_slots, Int64s{3});
  tokens.out_cache_loc = {1, 2};
  EXPECT_FALSE(outcomes::open_writes(plan, tokens, 5).any());
}

TEST_F(WriteOutcomes, EitherOrderOfTheStoreAndTheSeedReadIsAllowed) {
  Buffer serial_buffer = before;
  Ring serial_ring = ring_before;
  kvcanary::reference::write(plan, tokens, KernelKind::HEAD_K_FULL, {}, serial_buffer, serial_ring);
  const auto after_store = with_seed_read(serial_buffer[4]);  // request 0's store first: the serial order
  EXPECT_EQ(after_store.first, serial_buffer);
  EXPECT_TRUE(allowed(after_store));
  const auto before_store = with_seed_read(before[4]);  // the seed read first: the old record
  EXPECT_NE(before_store.first, serial_buffer);
  EXPECT_NE(before_store.second.count, serial_ring.count);  // no chain-position row from position 47
  EXPECT_TRUE(allowed(before_store));
  auto torn = before[4];  // a torn read: the new token, the old position and prev_hash
  torn.token = serial_buffer[4].token;
  EXPECT_TRUE(allowed(with_seed_read(torn)));
}

TEST_F(WriteOutcomes, AnythingElseIsNot) {
  const auto good = with_seed_read(before[4]);
  auto wrong_record = good;
  wrong_record.first[2].token += 1;
  EXPECT_FALSE(allowed(wrong_record));
  auto foreign_seed = before[4];  // a record neither before the call nor stored by it
  foreign_seed.position = 12;
  EXPECT_FALSE(allowed(with_seed_read(foreign_seed)));
  auto lost_row = with_seed_read(Buffer(5)[0]);
  EXPECT_FALSE(allowed(lost_row));
  auto extra_row = good;
  extra_row.second.rows.push_back({0, 1, 2, 3, 4, 5, 6, 8});
  extra_row.second.count += 1;
  EXPECT_FALSE(allowed(extra_row));
  auto counters = good;
  counters.second.slot_run_counter += 1;
  EXPECT_FALSE(allowed(counters));
}

}  // namespace kvcanary_test
