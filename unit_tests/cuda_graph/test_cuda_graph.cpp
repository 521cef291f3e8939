// A plan() call captured once in a CUDA graph (global capture mode, user stream) and replayed with
// the inputs refilled in place: more rows, fewer rows (padding), overflow, bad rows. The capture
// itself proves the call neither allocates, nor copies to the host, nor synchronizes; each replay is
// compared with the host reference, run from the same poisoned outputs.

#include <kvcanary/kvcanary.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace {

using Space = Kokkos::Cuda;
using Memory = Space::memory_space;
constexpr std::int64_t kPoison = -777777;

// The shapes a graph is captured with; every replay's batch is drawn inside them.
struct GraphShapes {
  std::int64_t batch_size, max_reqs, max_seq_len, verify_capacity;
  int window;  // > 0: sliding window with a LUT
};

// A random batch of exactly `s.batch_size` rows (the captured extent): the kind of batch selects
// how full it is. Kinds: 0 light (many padding rows), 1 heavy, 2 overflowing, 3 heavy with bad rows.
kvcanary::reference::Inputs make_batch(const GraphShapes& s, int kind, int token_offset, std::mt19937_64& rng) {
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  kvcanary::reference::Inputs in;
  in.max_reqs = s.max_reqs;
  in.max_seq_len = s.max_seq_len;
  in.req_to_token.resize(static_cast<std::size_t>(s.max_reqs * s.max_seq_len));
  for (auto& slot : in.req_to_token) slot = static_cast<std::int32_t>(uniform(-2, 1 << 20));
  in.swa_window_size = s.window;
  if (s.window > 0) {
    in.full_to_swa_index_mapping.emplace(1 << 19);
    for (auto& v : *in.full_to_swa_index_mapping) v = uniform(0, 1 << 30);
  }
  in.pool_rows = s.max_reqs;
  in.pool_cols = s.max_seq_len + 1;
  in.req_to_verify_expected_tokens.emplace(static_cast<std::size_t>(in.pool_rows * in.pool_cols));
  for (auto& t : *in.req_to_verify_expected_tokens) t = static_cast<std::int32_t>(uniform(0, 150000));
  in.req_to_verify_expected_tokens_valid_lens.emplace();
  in.kv_token_id_vs_position_offset = token_offset;
  const std::int64_t max_prefix = kind == 0 ? s.max_seq_len / 8 : kind == 2 ? s.max_seq_len : s.max_seq_len / 4;
  const double padding = kind == 0 ? 0.7 : 0.1;
  for (std::int64_t r = 0; r < s.batch_size; ++r) {
    const bool pad = std::bernoulli_distribution(padding)(rng);
    in.req_pool_indices.push_back(pad ? 0 : uniform(1, s.max_reqs - 1));
    std::int64_t prefix = uniform(kind == 2 ? max_prefix / 2 : 0, max_prefix);
    in.extend_seq_lens.push_back(uniform(-1, 8));
    in.req_to_verify_expected_tokens_valid_lens->push_back(uniform(0, in.pool_cols));
    if (kind == 3 && std::bernoulli_distribution(0.05)(rng)) {
      switch (uniform(0, 2)) {
        case 0: in.req_pool_indices.back() = uniform(0, 1) ? -3 : s.max_reqs + 5; break;
        case 1: prefix = s.max_seq_len + uniform(1, 100); break;
        default: in.req_to_verify_expected_tokens_valid_lens->back() = in.pool_cols + 1; break;
      }
    }
    in.prefix_lens.push_back(prefix);
  }
  if (kind == 3) in.req_pool_indices[uniform(0, s.batch_size - 1)] = s.max_reqs + 1;  // at least one bad row
  return in;
}

// Device buffers with the captured shapes, refilled in place before each replay.
struct DeviceBatch {
  kvcanary::PlanInputs<Memory> inputs;
  Kokkos::View<std::int64_t*, Memory> rpi, prefix, extend, lut, valid;
  Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Memory> rtt, pool;

  DeviceBatch(const Space& space, const kvcanary::reference::Inputs& first) {
    rpi = Kokkos::View<std::int64_t*, Memory>("rpi", first.req_pool_indices.size());
    prefix = Kokkos::View<std::int64_t*, Memory>("prefix", first.prefix_lens.size());
    extend = Kokkos::View<std::int64_t*, Memory>("extend", first.extend_seq_lens.size());
    valid = Kokkos::View<std::int64_t*, Memory>("valid", first.req_to_verify_expected_tokens_valid_lens->size());
    rtt = decltype(rtt)("rtt", first.max_reqs, first.max_seq_len);
    pool = decltype(pool)("pool", first.pool_rows, first.pool_cols);
    inputs.req_pool_indices = rpi;
    inputs.prefix_lens = prefix;
    inputs.extend_seq_lens = extend;
    inputs.req_to_token = rtt;
    inputs.swa_window_size = first.swa_window_size;
    inputs.kv_token_id_vs_position_offset = first.kv_token_id_vs_position_offset;
    if (first.full_to_swa_index_mapping) {
      lut = Kokkos::View<std::int64_t*, Memory>("lut", first.full_to_swa_index_mapping->size());
      inputs.full_to_swa_index_mapping = lut;
    }
    inputs.req_to_verify_expected_tokens = pool;
    inputs.req_to_verify_expected_tokens_valid_lens = valid;
    refill(space, first);
  }

  // Contents change, Views (and so the captured pointers and extents) do not.
  void refill(const Space& space, const kvcanary::reference::Inputs& in) {
    using kvcanary::Impl::copy_into;
    copy_into(space, rpi, in.req_pool_indices);
    copy_into(space, prefix, in.prefix_lens);
    copy_into(space, extend, in.extend_seq_lens);
    copy_into(space, valid, *in.req_to_verify_expected_tokens_valid_lens);
    if (lut.extent(0) > 0) copy_into(space, lut, *in.full_to_swa_index_mapping);
    Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace> host_rtt(
        in.req_to_token.data(), in.max_reqs, in.max_seq_len);
    Kokkos::deep_copy(space, rtt, host_rtt);
    Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace> host_pool(
        in.req_to_verify_expected_tokens->data(), in.pool_rows, in.pool_cols);
    Kokkos::deep_copy(space, pool, host_pool);
    // The graph's inputs must be in place before its launch: plain device copies run eagerly.
    space.fence();
  }
};

class CudaGraph : public ::testing::TestWithParam<std::tuple<kvcanary::EntriesAlgorithm, int>> {};

// Shapes: decode-like batch, a batch past the fused kernel's row limit, a windowed one, and a small
// batch (the CUDA small kernel, bs <= 32) whose capacity overflows when the batch is heavy.
const GraphShapes kShapes[] = {
    {64, 33, 700, 16000, 0},
    {5000, 257, 96, 140000, 0},
    {300, 61, 900, 45000, 256},
    {8, 17, 700, 2048, 0},
};

TEST_P(CudaGraph, CapturedPlanReplaysWithInputsRefilledInPlace) {
  const auto [algorithm, shape_index] = GetParam();
  const GraphShapes shapes = kShapes[shape_index];
  std::mt19937_64 rng(20261202 + shape_index * 7919 + static_cast<int>(algorithm));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const Space space(stream);
    // The token offset is a scalar argument of the captured call, fixed like the shapes.
    const int token_offset = shape_index % 2;
    const auto first = make_batch(shapes, 1, token_offset, rng);
    DeviceBatch batch(space, first);
    const auto verify_plan = kvcanary::allocate_verify_plan(space, shapes.verify_capacity);
    const auto write_plan = kvcanary::allocate_write_plan(space, shapes.batch_size + 3);
    const auto status = kvcanary::allocate_plan_status(space);
    const auto workspace = kvcanary::allocate_plan_workspace(space, shapes.batch_size);
    const kvcanary::PlanOptions options{algorithm};

    // One eager call first: Kokkos' first launch in a translation unit and scan scratch growth must
    // not happen during capture (KOKKOS34-CUDA.md, rules 1-2).
    kvcanary::plan(space, batch.inputs, verify_plan, write_plan, status, workspace, options);
    space.fence();

    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    kvcanary::plan(space, batch.inputs, verify_plan, write_plan, status, workspace, options);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));

    // Every node is a kernel: no memcpy, memset, allocation or host node slipped in.
    std::size_t node_count = 0;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &node_count));
    std::vector<cudaGraphNode_t> nodes(node_count);
    CHECK_CUDA(cudaGraphGetNodes(graph, nodes.data(), &node_count));
    ASSERT_GE(node_count, 1u);
    for (auto node : nodes) {
      cudaGraphNodeType type;
      CHECK_CUDA(cudaGraphNodeGetType(node, &type));
      EXPECT_EQ(type, cudaGraphNodeTypeKernel);
    }
    std::printf("[ graph    ] algorithm %d, bs %lld: %zu kernel nodes\n", static_cast<int>(algorithm),
                static_cast<long long>(shapes.batch_size), node_count);

    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    const int kinds[] = {1, 0, 2, 3, 0, 1, 3, 2};
    for (int replay = 0; replay < 8; ++replay) {
      SCOPED_TRACE("replay " + std::to_string(replay) + ", batch kind " + std::to_string(kinds[replay]));
      const auto host_inputs = make_batch(shapes, kinds[replay], token_offset, rng);
      batch.refill(space, host_inputs);
      auto expected = kvcanary::reference::make_outputs(shapes.verify_capacity, shapes.batch_size + 3, kPoison);
      kvcanary::upload_outputs(space, expected, verify_plan, write_plan, status);
      space.fence();
      kvcanary::reference::plan(host_inputs, expected);

      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));

      kvcanary::reference::Outputs actual;
      kvcanary::download_outputs(space, verify_plan, write_plan, status, actual);
      EXPECT_EQ(actual.verify_num_valid, expected.verify_num_valid);
      EXPECT_EQ(actual.enable, expected.enable);
      EXPECT_EQ(actual.input_error_bits, expected.input_error_bits);
      EXPECT_EQ(actual.first_bad_row, expected.first_bad_row);
      EXPECT_EQ(actual.write_num_valid_reqs, expected.write_num_valid_reqs);
      EXPECT_TRUE(actual.verify_slot_indices == expected.verify_slot_indices);
      EXPECT_TRUE(actual.verify_expected_tokens == expected.verify_expected_tokens);
      EXPECT_TRUE(actual.verify_expected_positions == expected.verify_expected_positions);
      EXPECT_TRUE(actual.verify_prev_slot_indices == expected.verify_prev_slot_indices);
      EXPECT_TRUE(actual.write_offsets == expected.write_offsets);
      EXPECT_TRUE(actual.write_seed_slot_indices == expected.write_seed_slot_indices);
      if (kinds[replay] == 2) EXPECT_EQ(expected.enable, 0) << "an overflowing batch must overflow";
      else EXPECT_EQ(expected.enable, 1) << "a light or heavy batch must fit, so that entries are checked";
      if (kinds[replay] == 3) EXPECT_NE(expected.input_error_bits, 0) << "a bad-row batch must have bad rows";
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(BothAlgorithms, CudaGraph,
                         ::testing::Combine(::testing::Values(kvcanary::EntriesAlgorithm::Portable,
                                                              kvcanary::EntriesAlgorithm::CudaPersistent),
                                            ::testing::Values(0, 1, 2, 3)));

}  // namespace
