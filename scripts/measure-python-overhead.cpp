// The C++ side of scripts/measure-python-overhead.py: the same tiny calls on Kokkos::Serial (one decode
// token of one request over a 2-token prefix; plan, verify and write of one buffer; kvcanary::Canary's
// step), timed the same way: medians over rounds of back-to-back calls. Prints one JSON object,
// {"<call>": microseconds per call}. Built and run by the .py script (it gives the compiler its flags).

#include <kvcanary/runtime/canary.hpp>
#include <kvcanary/stages/plan.hpp>
#include <kvcanary/stages/verify.hpp>
#include <kvcanary/stages/write.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Space = Kokkos::Serial;
using Mem = Kokkos::HostSpace;
using Vec = Kokkos::View<std::int64_t*, Kokkos::LayoutRight, Mem>;
using Table = Kokkos::View<std::int32_t**, Kokkos::LayoutStride, Mem>;

constexpr std::int64_t kSlots = 16, kRows = 2, kCols = 8;

Vec vec(std::initializer_list<std::int64_t> values, const char* label) {
  Vec v(std::string(label), values.size());
  std::size_t i = 0;
  for (const auto x : values) v(i++) = x;
  return v;
}

// Median over `rounds` of the mean time per call of `calls` calls, in microseconds.
template <class F>
double median_us(int rounds, int calls, F&& f) {
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const std::chrono::duration<double, std::micro> t = std::chrono::steady_clock::now() - start;
    per_call.push_back(t.count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 31;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 300;
  Kokkos::initialize(argc, argv);
  {
    Space space;
    Table table("req_to_token", Kokkos::LayoutStride(kRows, kCols, kCols, 1));
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) table(r, c) = static_cast<std::int32_t>(r * kCols + c);
    using namespace kvcanary;
    auto vp = allocate_verify_plan(space, 3 * kSlots);
    auto wp = allocate_write_plan(space, kRows);
    auto status = allocate_plan_status(space);
    auto workspace = allocate_plan_workspace(space, kRows);
    auto k = allocate_canary_buffer(space, kSlots, "k");
    auto ring = allocate_violation_ring(space, 64);
    Kokkos::View<std::int32_t, Mem> flag("chain_position_assert");
    flag() = 1;

    const auto inputs = [&](Vec prefix, Vec extend) {
      PlanInputs<Mem> in;
      in.req_pool_indices = vec({1}, "req_pool_indices");
      in.prefix_lens = prefix;
      in.extend_seq_lens = extend;
      in.req_to_token = table;
      return in;
    };
    const auto tokens = [&](Vec ids, Vec pos, Vec loc) {
      StepTokens<Mem> t;
      t.input_ids = ids;
      t.positions = pos;
      t.out_cache_loc = loc;
      t.chain_position_assert = flag;
      return t;
    };
    const std::vector<VerifyTarget<Mem>> verify_targets{{k, KernelKind::HEAD_K_FULL, {}}};
    const std::vector<WriteTarget<Mem>> write_targets{{k, KernelKind::HEAD_K_FULL, {}}};
    // The prefill of request 1 (2 tokens), then the timed decode step.
    plan(space, inputs(vec({0}, "p"), vec({2}, "e")), vp, wp, status, workspace, PlanOptions{});
    write(space, wp, tokens(vec({7, 8}, "i"), vec({0, 1}, "q"), vec({8, 9}, "l")), write_targets, ring,
          WriteCallOptions{});
    const PlanInputs<Mem> decode = inputs(vec({2}, "p"), vec({1}, "e"));
    const StepTokens<Mem> step = tokens(vec({9}, "i"), vec({2}, "q"), vec({10}, "l"));

    std::printf("{\n");
    std::printf("  \"plan\": %.3f,\n", median_us(rounds, calls, [&] { plan(space, decode, vp, wp, status, workspace, PlanOptions{}); }));
    std::printf("  \"verify\": %.3f,\n",
                median_us(rounds, calls, [&] { verify(space, vp, verify_targets, ring, VerifyOptions{}); }));
    std::printf("  \"write\": %.3f,\n", median_us(rounds, calls, [&] { write(space, wp, step, write_targets, ring, WriteCallOptions{}); }));

    CanaryConfig config;
    config.report_mode = ReportMode::Raise;
    config.health_check_every_n_steps = 0;  // the timed loops run passes and end_step()s apart
    config.dimensions.pool_slots = kSlots;
    config.dimensions.max_running_requests = kRows;
    config.dimensions.max_context_len = kCols;
    EngineTables<Mem> engine;
    engine.req_to_token = table;
    Canary<Space> canary(space, config, engine);
    ForwardBatch<Mem> prefill, batch;
    prefill.req_pool_indices = batch.req_pool_indices = vec({1}, "req_pool_indices");
    prefill.prefix_lens = vec({0}, "p");
    prefill.extend_seq_lens = vec({2}, "e");
    prefill.tokens = ForwardTokens<Mem>{vec({7, 8}, "i"), vec({0, 1}, "q"), vec({8, 9}, "l"), {}, {}};
    batch.prefix_lens = vec({2}, "p");
    batch.extend_seq_lens = vec({1}, "e");
    batch.tokens = ForwardTokens<Mem>{vec({9}, "i"), vec({2}, "q"), vec({10}, "l"), {}, {}};
    canary.before_forward(prefill);
    canary.end_step();
    std::printf("  \"canary.before_forward\": %.3f,\n",
                median_us(rounds, calls, [&] { canary.before_forward(batch); }));
    std::printf("  \"canary.after_forward\": %.3f,\n", median_us(rounds, calls, [&] { canary.after_forward(batch); }));
    std::printf("  \"canary.end_step\": %.3f,\n", median_us(rounds, calls, [&] { canary.end_step(0); }));
    std::printf("  \"canary.step\": %.3f\n", median_us(rounds, calls, [&] {
                  canary.before_forward(batch);
                  canary.after_forward(batch);
                  canary.end_step();
                }));
    std::printf("}\n");
    canary.flush();  // raises on a violation: the timed steps were clean
  }
  Kokkos::finalize();
  return 0;
}
