// Plans are allocated once for a maximum batch and reused every step (SPEC §4, execution contract):
// a sequence of growing and shrinking batches on one set of outputs and one workspace, each call compared
// with the reference run on the outputs the previous call left behind.

#include "test_support.hpp"

#include <random>
#include <string>

namespace kvcanary_test {

class RepeatedCalls : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

// bs random rows over 16 pool rows of 48 positions; `full` makes every row a non-padding full prefix.
inline void random_batch(Inputs& in, std::int64_t bs, bool full, std::mt19937_64& rng) {
  const auto between = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  in.req_pool_indices.clear();
  in.prefix_lens.clear();
  in.extend_seq_lens.clear();
  in.req_to_verify_expected_tokens_valid_lens->clear();
  for (std::int64_t r = 0; r < bs; ++r) {
    in.req_pool_indices.push_back(between(full ? 1 : 0, 15));
    in.prefix_lens.push_back(full ? 48 : between(0, 48));
    in.extend_seq_lens.push_back(between(0, 4));
    in.req_to_verify_expected_tokens_valid_lens->push_back(between(0, 48));
  }
}

TEST_P(RepeatedCalls, GrowingAndShrinkingBatchesReuseOnePlan) {
  using Space = execution_space;
  const Space space;
  constexpr std::int64_t kMaxBatch = 64;
  Outputs expected = poisoned({1500, kMaxBatch});
  const DevicePlan<Space> device(space, expected, kMaxBatch);

  Inputs in = linear(16, 48);
  set_pool(in, 16, 48, {});
  in.full_to_swa_index_mapping = shifted_lut(16 * 48, 5);
  std::mt19937_64 rng(20240611);
  const struct {
    std::int64_t bs;
    int window;
    bool full;  // 64 full rows: 3072 entries, an overflow
  } steps[] = {{8, 0, false}, {3, 0, false}, {64, 16, false}, {0, 0, false}, {64, 0, true},
               {17, 7, false}, {1, 0, false}, {64, 0, false}, {40, 0, true}, {2, 0, false}};
  Outputs previous = expected;
  for (const auto& step : steps) {
    SCOPED_TRACE("bs " + std::to_string(step.bs) + ", window " + std::to_string(step.window));
    random_batch(in, step.bs, step.full, rng);
    in.swa_window_size = step.window;
    device.plan(space, kvcanary::upload_inputs(space, in), options());
    const Outputs out = device.download(space);
    kvcanary::reference::plan(in, expected);
    EXPECT_TRUE(same_plan(out, expected));

    EXPECT_EQ(out.write_num_valid_reqs, step.bs);
    EXPECT_EQ(Int64s(out.write_offsets.begin() + step.bs + 1, out.write_offsets.end()),
              Int64s(static_cast<std::size_t>(kMaxBatch - step.bs), 0));
    EXPECT_EQ(Int64s(out.write_seed_slot_indices.begin() + step.bs, out.write_seed_slot_indices.end()),
              Int64s(previous.write_seed_slot_indices.begin() + step.bs, previous.write_seed_slot_indices.end()));
    if (step.full) {
      EXPECT_EQ(out.enable, 0);
      EXPECT_EQ(out.verify_slot_indices, previous.verify_slot_indices);
      EXPECT_EQ(out.verify_expected_tokens, previous.verify_expected_tokens);
      EXPECT_EQ(out.verify_expected_positions, previous.verify_expected_positions);
      EXPECT_EQ(out.verify_prev_slot_indices, previous.verify_prev_slot_indices);
    }
    previous = out;
  }
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(RepeatedCalls);

}  // namespace kvcanary_test
