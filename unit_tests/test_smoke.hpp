#include <kvcanary/kvcanary.hpp>
#include <gtest/gtest.h>

TEST(Smoke, Decode) {
  using namespace kvcanary;
  reference::Inputs in;
  in.max_reqs = 4; in.max_seq_len = 16;
  for (int i = 0; i < 64; ++i) in.req_to_token.push_back(i);
  in.req_pool_indices = {2}; in.prefix_lens = {7}; in.extend_seq_lens = {1};
  auto out = reference::make_outputs(64, 4, -7);
  auto ref = out;
  reference::plan(in, ref);
  plan_host_data(KVCANARY_TEST_EXECSPACE(), in, out);
  EXPECT_EQ(ref.verify_num_valid, 7);
  EXPECT_EQ(out.verify_num_valid, 7);
  EXPECT_EQ(out.verify_slot_indices, ref.verify_slot_indices);
  EXPECT_EQ(out.write_seed_slot_indices, ref.write_seed_slot_indices);
  EXPECT_EQ(out.write_offsets, ref.write_offsets);
}
