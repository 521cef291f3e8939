// plan → verify (K and V in one call) → write (K, then V) captured as ONE CUDA graph on a user stream,
// and replayed step after step the way an engine runs it: requests decode and prefill, finish and are
// replaced (their pool row's slots reused), with the inputs refilled in place and a fixed token
// capacity (the tail padded with slot -1, which write() skips). The canary buffers and the ring are
// carried from step to step; after each replay everything is compared with the host reference run on
// the same inputs. Some steps corrupt a record first (on the device and in the reference alike), so
// the replayed verify must report exactly what the reference does.

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/kvcanary.hpp>
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
using kvcanary::reference::CanaryBuffer;
using kvcanary::reference::RingRow;
using kvcanary::reference::ViolationRing;

constexpr std::int64_t kBatch = 16, kRows = 17, kCols = 160, kMaxExtend = 8;
constexpr std::int64_t kTokens = kBatch * kMaxExtend, kSlots = 1 + kRows * kCols, kCapacity = kBatch * kCols;

// The engine's host state: which request holds each batch row, its prefix, and its tokens.
struct Engine {
  std::mt19937_64 rng;
  kvcanary::reference::Inputs in;
  std::int64_t next_request = 1;
  std::vector<std::int64_t> request_of_row;  // per pool row, 0 = free

  explicit Engine(std::uint64_t seed) : rng(seed), request_of_row(kRows, 0) {
    in = {};
    in.max_reqs = kRows;
    in.max_seq_len = kCols;
    in.req_to_token.resize(kRows * kCols);
    for (std::int64_t i = 0; i < kRows * kCols; ++i) in.req_to_token[i] = static_cast<std::int32_t>(1 + i);  // slot 0 unused
    in.pool_rows = kRows;
    in.pool_cols = kCols;
    in.req_to_verify_expected_tokens.emplace(kRows * kCols, 0);
    in.req_to_verify_expected_tokens_valid_lens.emplace(kBatch, kCols);
    in.req_pool_indices.assign(kBatch, 0);
    in.prefix_lens.assign(kBatch, 0);
    in.extend_seq_lens.assign(kBatch, 0);
  }

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }

  // The next step's batch: rows whose request finished get a new request in a free pool row (or stay padding).
  void next_batch() {
    for (std::int64_t r = 0; r < kBatch; ++r) {
      std::int64_t& rp = in.req_pool_indices[r];
      if (rp != 0) in.prefix_lens[r] += in.extend_seq_lens[r];
      if (rp != 0 && in.prefix_lens[r] + 1 > kCols) {  // finished: its pool row is freed
        request_of_row[rp] = 0;
        rp = 0;
      }
      if (rp == 0 && uniform(0, 3) != 0) {
        for (std::int64_t row = 1; row < kRows; ++row)
          if (request_of_row[row] == 0) {
            request_of_row[row] = next_request++;
            rp = row;
            in.prefix_lens[r] = 0;
            for (std::int64_t p = 0; p < kCols; ++p)  // the new request's tokens, reusing the row's slots
              (*in.req_to_verify_expected_tokens)[row * kCols + p] = static_cast<std::int32_t>(uniform(0, 50000));
            break;
          }
      }
      if (rp == 0) {
        in.prefix_lens[r] = uniform(-5, 500);  // padding rows hold garbage, never inspected
        in.extend_seq_lens[r] = uniform(-5, 500);
        continue;
      }
      const std::int64_t room = kCols - in.prefix_lens[r];
      in.extend_seq_lens[r] = std::min(room, in.prefix_lens[r] == 0 ? uniform(1, kMaxExtend) : 1);
    }
  }

  // The step's flat token arrays, in batch order, padded to kTokens with slot -1.
  kvcanary::reference::StepTokens tokens() const {
    kvcanary::reference::StepTokens t;
    for (std::int64_t r = 0; r < kBatch; ++r) {
      const std::int64_t rp = in.req_pool_indices[r];
      if (rp == 0) continue;
      for (std::int64_t j = 0; j < in.extend_seq_lens[r]; ++j) {
        const std::int64_t position = in.prefix_lens[r] + j;
        t.input_ids.push_back((*in.req_to_verify_expected_tokens)[rp * kCols + position]);
        t.positions.push_back(position);
        t.out_cache_loc.push_back(in.req_to_token[rp * kCols + position]);
      }
    }
    t.input_ids.resize(kTokens, 0);
    t.positions.resize(kTokens, 0);
    t.out_cache_loc.resize(kTokens, -1);
    t.expected_input_ids = t.input_ids;
    t.expected_positions = t.positions;
    return t;
  }
};

// One record's token set on the device (a scalar deep_copy into a strided subview is not portable).
struct SetToken {
  Kokkos::View<std::int64_t**, Kokkos::LayoutStride, Memory> records;
  std::int64_t slot, token;
  KOKKOS_INLINE_FUNCTION void operator()(int) const { records(slot, kvcanary::kToken) = token; }
};

template <class T>
void refill(const Space& space, const Kokkos::View<T*, Memory>& view, const std::vector<T>& values) {
  kvcanary::Impl::copy_into(space, view, values);
}

class CanaryGraph : public ::testing::TestWithParam<kvcanary::EntriesAlgorithm> {};

TEST_P(CanaryGraph, PlanVerifyWriteReplayStepAfterStep) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const Space space(stream);
    Engine engine(20261203 + static_cast<int>(GetParam()));
    engine.next_batch();

    // Device inputs with the captured shapes; refilled in place before every replay.
    Kokkos::View<std::int64_t*, Memory> rpi("rpi", kBatch), prefix("prefix", kBatch), extend("extend", kBatch),
        valid("valid", kBatch), ids("ids", kTokens), positions("positions", kTokens), slots("slots", kTokens),
        expected_ids("expected_ids", kTokens), expected_positions("expected_positions", kTokens);
    Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Memory> rtt("rtt", kRows, kCols), pool("pool", kRows, kCols);
    Kokkos::View<std::int32_t, Memory> chain_assert("chain_assert");
    Kokkos::deep_copy(space, chain_assert, 1);
    kvcanary::PlanInputs<Memory> inputs;
    inputs.req_pool_indices = rpi;
    inputs.prefix_lens = prefix;
    inputs.extend_seq_lens = extend;
    inputs.req_to_token = rtt;
    inputs.req_to_verify_expected_tokens = pool;
    inputs.req_to_verify_expected_tokens_valid_lens = valid;
    kvcanary::StepTokens<Memory> tokens{ids, positions, slots, expected_ids, expected_positions, chain_assert};

    const auto refill_all = [&](const kvcanary::reference::Inputs& in, const kvcanary::reference::StepTokens& t) {
      refill(space, rpi, in.req_pool_indices);
      refill(space, prefix, in.prefix_lens);
      refill(space, extend, in.extend_seq_lens);
      refill(space, valid, *in.req_to_verify_expected_tokens_valid_lens);
      Kokkos::deep_copy(space, rtt, Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace>(
                                        in.req_to_token.data(), kRows, kCols));
      Kokkos::deep_copy(space, pool, Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace>(
                                         in.req_to_verify_expected_tokens->data(), kRows, kCols));
      refill(space, ids, t.input_ids);
      refill(space, positions, t.positions);
      refill(space, slots, t.out_cache_loc);
      refill(space, expected_ids, *t.expected_input_ids);
      refill(space, expected_positions, *t.expected_positions);
      space.fence();  // plain device copies run eagerly: in place before the graph's launch
    };

    const auto verify_plan = kvcanary::allocate_verify_plan(space, kCapacity);
    const auto write_plan = kvcanary::allocate_write_plan(space, kBatch);
    const auto status = kvcanary::allocate_plan_status(space);
    const auto workspace = kvcanary::allocate_plan_workspace(space, kBatch);
    const auto k_buffer = kvcanary::allocate_canary_buffer(space, kSlots, "test::k_canary");
    const auto v_buffer = kvcanary::allocate_canary_buffer(space, kSlots, "test::v_canary");
    const auto ring = kvcanary::allocate_violation_ring(space, 4096);
    const kvcanary::PlanOptions plan_options{GetParam()};
    const std::vector<kvcanary::VerifyTarget<Memory>> targets{{k_buffer, kvcanary::KernelKind::HEAD_K_FULL},
                                                              {v_buffer, kvcanary::KernelKind::HEAD_V_FULL}};
    kvcanary::WriteOptions<Memory> write_k, write_v;
    write_k.kernel_kind = kvcanary::KernelKind::HEAD_K_FULL;
    write_v.kernel_kind = kvcanary::KernelKind::HEAD_V_FULL;
    const auto step = [&] {
      kvcanary::plan(space, inputs, verify_plan, write_plan, status, workspace, plan_options);
      kvcanary::verify(space, verify_plan, targets, ring);
      kvcanary::write(space, write_plan, tokens, k_buffer, ring, write_k);
      kvcanary::write(space, write_plan, tokens, v_buffer, ring, write_v);
    };

    // The host reference's state, carried along.
    CanaryBuffer k_host(kSlots), v_host(kSlots);
    ViolationRing ring_host;
    ring_host.capacity = 4096;
    const auto reference_step = [&](const kvcanary::reference::Inputs& in, const kvcanary::reference::StepTokens& t) {
      auto plan = kvcanary::reference::make_outputs(kCapacity, kBatch, 0);
      kvcanary::reference::plan(in, plan);
      kvcanary::reference::verify(plan, k_host, kvcanary::KernelKind::HEAD_K_FULL, {}, true, ring_host);
      kvcanary::reference::verify(plan, v_host, kvcanary::KernelKind::HEAD_V_FULL, {}, true, ring_host);
      kvcanary::reference::write(plan, t, kvcanary::KernelKind::HEAD_K_FULL, {}, k_host, ring_host);
      kvcanary::reference::write(plan, t, kvcanary::KernelKind::HEAD_V_FULL, {}, v_host, ring_host);
    };

    // Step 0 eagerly (first launches and scratch growth must not happen during capture), then capture.
    auto host_tokens = engine.tokens();
    refill_all(engine.in, host_tokens);
    step();
    reference_step(engine.in, host_tokens);
    space.fence();

    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    step();
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    std::size_t node_count = 0;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &node_count));
    std::vector<cudaGraphNode_t> nodes(node_count);
    CHECK_CUDA(cudaGraphGetNodes(graph, nodes.data(), &node_count));
    for (auto node : nodes) {
      cudaGraphNodeType type;
      CHECK_CUDA(cudaGraphNodeGetType(node, &type));
      EXPECT_EQ(type, cudaGraphNodeTypeKernel) << "only kernels in a step: no copy, memset, allocation or host node";
    }
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    int corruptions = 0;
    std::int64_t reported_before = 0;
    for (int replay = 1; replay <= 60; ++replay) {
      SCOPED_TRACE("step " + std::to_string(replay));
      engine.next_batch();
      host_tokens = engine.tokens();
      refill_all(engine.in, host_tokens);
      // Now and then an engine bug: a record of a live prefix in the K buffer gets another token; this
      // step's verify reads it.
      if (replay % 9 == 0) {
        for (std::int64_t r = 0; r < kBatch; ++r) {
          const std::int64_t rp = engine.in.req_pool_indices[r];
          if (rp == 0 || engine.in.prefix_lens[r] <= 0) continue;
          const std::int64_t s = engine.in.req_to_token[rp * kCols + engine.uniform(0, engine.in.prefix_lens[r] - 1)];
          k_host[s].token += 1;
          Kokkos::parallel_for("test::corrupt", Kokkos::RangePolicy<Space>(space, 0, 1),
                               SetToken{k_buffer.records, s, k_host[s].token});
          space.fence();
          ++corruptions;
          break;
        }
      }
      reference_step(engine.in, host_tokens);
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));

      const auto k_device = kvcanary::download_canary_buffer(space, k_buffer);
      const auto v_device = kvcanary::download_canary_buffer(space, v_buffer);
      const auto ring_device = kvcanary::download_violation_ring(space, ring);
      EXPECT_TRUE(k_device == k_host) << "K buffer differs from the reference";
      EXPECT_TRUE(v_device == v_host) << "V buffer differs from the reference";
      EXPECT_EQ(ring_device.count, ring_host.count);
      EXPECT_EQ(ring_device.slot_run_counter, ring_host.slot_run_counter);
      EXPECT_EQ(ring_device.kernel_run_counter, ring_host.kernel_run_counter);
      std::vector<RingRow> a = ring_device.rows, b = ring_host.rows;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      EXPECT_TRUE(a == b) << "ring rows differ (as multisets)";
      if (corruptions == 0) EXPECT_EQ(ring_host.count, 0) << "a clean run reported a violation";
      if (HasFailure()) break;
      reported_before = ring_host.count;
    }
    EXPECT_GT(corruptions, 0);
    EXPECT_GT(reported_before, 0) << "the corruptions were never read back";
    std::printf("[ graph    ] %zu kernel nodes a step, %d corruptions, %lld violations\n", node_count, corruptions,
                static_cast<long long>(reported_before));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(PlanAlgorithms, CanaryGraph,
                         ::testing::Values(kvcanary::EntriesAlgorithm::Portable, kvcanary::EntriesAlgorithm::CudaPersistent));

}  // namespace
