// Randomized differential tests of SPEC-CANARY §12.3 on this backend against the host reference: export,
// import and relocate over random buffers (never-written, FREED and arbitrary records; 32- and 48-byte
// strides), slot lists with padding, out-of-range and repeated entries (repeats only where the outcome is
// specified), overlapping relocations, poisoned transfer records and full rings. Every case is compared
// record by record, entry by entry and row by row (TransferRunner).

#include "test_travel_support.hpp"

#include <numeric>
#include <random>

namespace kvcanary_test {

class TravelDifferential : public ::testing::Test {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  std::mt19937_64 rng{20261224};

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }
  bool coin(int one_in) { return uniform(0, one_in - 1) == 0; }

  Record random_record() {
    if (coin(4)) return Record{};
    Record r{uniform(0, 50), uniform(0, 20), uniform(INT64_MIN, INT64_MAX), uniform(INT64_MIN, INT64_MAX)};
    if (coin(6)) r.token = kvcanary::kFreedToken;
    return r;
  }
  Buffer random_buffer(std::int64_t slots) {
    Buffer buffer(static_cast<std::size_t>(slots));
    for (Record& r : buffer) r = random_record();
    return buffer;
  }
  std::int64_t random_slot(std::int64_t slots) {
    return coin(8) ? uniform(-3, -1) : coin(10) ? (coin(4) ? INT64_MAX : uniform(slots, slots + 5)) : uniform(0, slots - 1);
  }
  // Distinct in-range slots (where duplicates would leave the outcome unspecified), with padding and
  // out-of-range entries mixed in.
  Int64s distinct_targets(std::int64_t slots, std::size_t n) {
    Int64s order(static_cast<std::size_t>(slots));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    Int64s list;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t s = random_slot(slots);
      list.push_back(s >= 0 && s < slots ? order[i % order.size()] : s);
    }
    for (std::size_t i = 0; i < list.size(); ++i)  // at most one entry per in-range slot
      for (std::size_t j = 0; j < i; ++j)
        if (list[j] == list[i] && list[i] >= 0 && list[i] < slots) list[i] = -1;
    return list;
  }
  Ring random_ring() {
    Ring ring = empty_ring(uniform(0, 4));
    ring.slot_run_counter = uniform(0, 3);
    ring.kernel_run_counter = coin(10) ? INT64_MAX : uniform(0, 3);  // counters wrap mod 2^64
    return ring;
  }
  Packed poisoned(std::size_t n) { return Packed(n, Record{-9, -9, -9, -9}); }
};

TEST_F(TravelDifferential, ExportMatchesTheReference) {
  for (int c = 0; c < 150; ++c) {
    TransferRunner<ExecSpace> runner;
    runner.stride_bytes = coin(2) ? 32 : 48;
    const std::int64_t slots = uniform(1, 48);
    Int64s list(static_cast<std::size_t>(uniform(0, 40)));
    for (std::int64_t& s : list) s = random_slot(slots);  // repeats are fine: export only reads
    runner.export_records(list, random_buffer(slots), poisoned(list.size() + static_cast<std::size_t>(uniform(0, 3))),
                          random_ring(), static_cast<KernelKind>(uniform(0, 11)));
  }
}

TEST_F(TravelDifferential, ImportMatchesTheReference) {
  for (int c = 0; c < 150; ++c) {
    TransferRunner<ExecSpace> runner;
    runner.stride_bytes = coin(2) ? 32 : 48;
    const std::int64_t slots = uniform(1, 48);
    const Int64s list = distinct_targets(slots, static_cast<std::size_t>(uniform(0, 40)));
    Packed in(list.size() + static_cast<std::size_t>(uniform(0, 3)));
    for (Record& r : in) r = random_record();
    runner.import_records(list, in, random_buffer(slots), random_ring(), static_cast<KernelKind>(uniform(0, 11)));
  }
}

TEST_F(TravelDifferential, RelocateMatchesTheReference) {
  for (int c = 0; c < 150; ++c) {
    TransferRunner<ExecSpace> runner;
    runner.stride_bytes = coin(2) ? 32 : 48;
    const std::int64_t slots = uniform(1, 48);
    const std::size_t n = static_cast<std::size_t>(uniform(0, 40));
    Int64s src(n);
    for (std::int64_t& s : src) s = random_slot(slots);  // sources may repeat and overlap destinations
    const Int64s dst = distinct_targets(slots, n);
    runner.relocate(src, dst, random_buffer(slots), poisoned(n + static_cast<std::size_t>(uniform(0, 3))), random_ring(),
                    static_cast<KernelKind>(uniform(0, 11)));
  }
}

TEST_F(TravelDifferential, ExportThenImportIsTheIdentityOnTheListedRecords) {
  for (int c = 0; c < 50; ++c) {
    TransferRunner<ExecSpace> runner;
    const std::int64_t slots = uniform(2, 48);
    const Buffer producer = random_buffer(slots);
    const Int64s from = distinct_targets(slots, static_cast<std::size_t>(uniform(1, 20)));
    const Int64s to = distinct_targets(slots, from.size());
    const Packed wire = runner.export_records(from, producer, Packed(from.size()), empty_ring(64)).records;
    const Buffer consumer = runner.import_records(to, wire, Buffer(static_cast<std::size_t>(slots)), empty_ring(64)).buffer;
    for (std::size_t i = 0; i < from.size(); ++i) {
      if (from[i] < 0 || from[i] >= slots || to[i] < 0 || to[i] >= slots) continue;
      EXPECT_EQ(consumer[static_cast<std::size_t>(to[i])], producer[static_cast<std::size_t>(from[i])]) << "entry " << i;
    }
  }
}

}  // namespace kvcanary_test
