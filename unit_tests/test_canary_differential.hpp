// write() and verify() against the host reference (SPEC-CANARY §4–§5): random calls on edge-heavy
// data, every algorithm, buffers at several record strides and int32 token arrays, several buffers in
// one verify call, and multi-step pipelines plan → verify → write that carry the buffer from step to
// step, clean and with injected corruption.

#include "test_canary_cases.hpp"
#include "test_canary_support.hpp"

namespace kvcanary_test {

class CanaryDifferential : public ::testing::TestWithParam<CanaryAlgorithm> {
 protected:
  using ExecSpace = KVCANARY_TEST_EXECSPACE;
  CanaryRunner<ExecSpace> runner(std::int64_t k = 0) const {
    CanaryRunner<ExecSpace> r;
    r.algorithm = GetParam();
    r.layout.stride_bytes = k % 3 == 0 ? 32 : k % 3 == 1 ? 48 : 64;  // engines pad records
    r.layout.int32_tokens = k % 4 == 3;
    return r;
  }
  // The Default algorithm carries the full count of SPEC-CANARY's "≥ 1000 cases per stage per backend".
  int cases() const { return GetParam() == CanaryAlgorithm::Default ? 1000 : 250; }

  // `count` random write calls of `shape` against the reference, stopping at the first that differs;
  // `lanes` > 0 runs the portable kernel at that team width.
  void expect_writes_match(std::uint64_t seed, const WriteShape& shape, int count, const std::string& what,
                           int lanes = 0) {
    CanaryCaseGenerator generator(seed);
    for (int k = 0; k < count; ++k) {
      const WriteCase c = generator.next_write(shape);
      SCOPED_TRACE(what + " case " + std::to_string(k));
      CanaryRunner<ExecSpace> r = runner(k);
      r.layout.write_lanes = lanes;
      r.write(c.plan, c.tokens, c.kind, c.real_kv, c.buffer, c.ring);
      if (HasFailure()) return;
    }
  }
};

TEST_P(CanaryDifferential, RandomWritesMatchReference) {
  expect_writes_match(0xC0FFEE + static_cast<int>(GetParam()), WriteShape{}, cases(), "write");
}

// Requests of up to 100 tokens: chunks of 32 with every token stored, chunk boundaries, a slot written
// twice in one chunk, seeds among the request's own targets (the GPU kernels' unit is a 32-token chunk).
TEST_P(CanaryDifferential, RandomLongWritesMatchReference) {
  expect_writes_match(0x10C0 + static_cast<int>(GetParam()), WriteShape::long_ones(), 300, "long write");
}

// Up to 600 requests of up to 40 tokens in one call.
TEST_P(CanaryDifferential, RandomManyRequestWritesMatchReference) {
  expect_writes_match(0x3A11 + static_cast<int>(GetParam()), WriteShape::many(), 40, "many-request write");
}

// The portable write() shares a request's chain among a team's lanes (32 on a GPU, 1 on the host): every
// width this backend can run gives the reference's records, chunk boundaries and duplicate slots included.
TEST_P(CanaryDifferential, RandomWritesMatchReferenceAtEveryTeamWidth) {
  const int widest = std::min(32, static_cast<int>(ExecSpace().concurrency()));
  for (const int lanes : {1, 2, 3, 5, 32}) {
    if (lanes > widest) continue;  // Serial and one-thread OpenMP run width 1 only
    const std::string width = "width " + std::to_string(lanes) + ", ";
    expect_writes_match(0xFACE + lanes + static_cast<int>(GetParam()), WriteShape{}, 200, width + "write", lanes);
    expect_writes_match(0xFA11 + lanes + static_cast<int>(GetParam()), WriteShape::long_ones(), 40, width + "long write",
                        lanes);
    if (HasFailure()) return;
  }
}

TEST_P(CanaryDifferential, RandomVerifiesMatchReference) {
  CanaryCaseGenerator generator(0xBEEF + static_cast<int>(GetParam()));
  for (int k = 0; k < cases(); ++k) {
    const VerifyCase c = generator.next_verify();
    SCOPED_TRACE("verify case " + std::to_string(k));
    runner(k).verify(c.plan, c.buffer, c.ring, c.check_expected_token, c.kind, c.real_kv);
    if (HasFailure()) return;
  }
}

// The K and V halves in one call: the same rows and counters as two calls, one per buffer.
TEST_P(CanaryDifferential, SeveralBuffersInOneVerifyMatchOneCallEach) {
  CanaryCaseGenerator generator(0xF00D + static_cast<int>(GetParam()));
  for (int k = 0; k < 200; ++k) {
    VerifyCase c = generator.next_verify();
    SCOPED_TRACE("verify case " + std::to_string(k));
    const auto slots = static_cast<std::int64_t>(c.buffer.size());
    const Buffer v = generator.buffer(slots);
    const RealKv v_kv = generator.real_kv(slots);
    const Ring ring = runner(k).verify(c.plan, {&c.buffer, &v}, {KernelKind::HEAD_K_FULL, KernelKind::HEAD_V_FULL},
                                       {&c.real_kv, &v_kv}, c.check_expected_token, c.ring);
    const std::int64_t per_call = c.plan.enable == 1 ? std::clamp<std::int64_t>(c.plan.verify_num_valid, 0,
                                                                                 static_cast<std::int64_t>(c.plan.verify_slot_indices.size()))
                                                     : 0;
    EXPECT_EQ(ring.kernel_run_counter, c.ring.kernel_run_counter + 2);
    EXPECT_EQ(ring.slot_run_counter, c.ring.slot_run_counter + 2 * per_call);
    if (HasFailure()) return;
  }
}

// An engine in miniature: requests decode and prefill over a page table of distinct slots (slot 0 is
// the padding slot, never used), with an expected-token pool; plan → verify → write every step on the
// backend and on the reference, the buffer carried from step to step. Clean steps report nothing;
// a corrupted record is reported by the next verify that reads it.
class MiniEngine {
 public:
  static constexpr std::int64_t kRows = 5, kCols = 24;

  explicit MiniEngine(std::uint64_t seed) : rng_(seed), buffer_(1 + kRows * kCols) {
    in_ = linear(kRows, kCols);
    for (auto& slot : in_.req_to_token) slot += 1;  // slots 1..kRows*kCols, page size 1
    std::vector<std::int32_t> pool(static_cast<std::size_t>(kRows * kCols));
    for (std::int64_t i = 0; i < kRows * kCols; ++i) pool[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(7 * i % 1000);
    in_.req_to_verify_expected_tokens = pool;
    in_.pool_rows = kRows;
    in_.pool_cols = kCols;
    for (std::int64_t rp = 1; rp < kRows; ++rp) prefix_[rp] = 0;
  }

  // One step: every live request extends by 1 (decode) or a chunk (prefill), until its row is full.
  template <class ExecSpace>
  void step(const CanaryRunner<ExecSpace>& runner, bool corrupt) {
    set_batch(in_, {}, {}, {});
    in_.req_to_verify_expected_tokens_valid_lens = Int64s{};
    for (std::int64_t rp = 1; rp < kRows; ++rp) {
      const std::int64_t room = kCols - prefix_[rp];
      if (room <= 0) continue;
      const std::int64_t extend = std::min<std::int64_t>(room, prefix_[rp] == 0 ? between(1, 8) : 1);
      in_.req_pool_indices.push_back(rp);
      in_.prefix_lens.push_back(prefix_[rp]);
      in_.extend_seq_lens.push_back(extend);
      in_.req_to_verify_expected_tokens_valid_lens->push_back(kCols);
    }
    const std::int64_t bs = batch_size(in_);
    Outputs plan = kvcanary::reference::make_outputs(kRows * kCols, std::max<std::int64_t>(bs, 1), -1);
    Outputs library_plan = plan;
    kvcanary::reference::plan(in_, plan);
    kvcanary::plan_host_data(typename CanaryRunner<ExecSpace>::ExecSpaceType(), in_, library_plan);
    EXPECT_TRUE(same_plan(library_plan, plan));

    const Ring verified = runner.verify(plan, buffer_, empty_ring(64));
    if (!corrupted_) EXPECT_EQ(verified.count, 0) << "a clean run reported a violation";
    if (corrupted_ && corruption_read(plan)) EXPECT_GT(verified.count, 0) << "a corrupted record went unreported";

    Tokens tokens;
    for (std::int64_t r = 0; r < bs; ++r) {
      const std::int64_t rp = in_.req_pool_indices[static_cast<std::size_t>(r)];
      for (std::int64_t j = 0; j < in_.extend_seq_lens[static_cast<std::size_t>(r)]; ++j) {
        const std::int64_t position = prefix_[rp] + j;
        tokens.input_ids.push_back((*in_.req_to_verify_expected_tokens)[static_cast<std::size_t>(rp * kCols + position)]);
        tokens.positions.push_back(position);
        tokens.out_cache_loc.push_back(in_.req_to_token[static_cast<std::size_t>(rp * kCols + position)]);
      }
      prefix_[rp] += in_.extend_seq_lens[static_cast<std::size_t>(r)];
    }
    tokens.expected_input_ids = tokens.input_ids;
    tokens.expected_positions = tokens.positions;
    const StageRun written = runner.write(plan, tokens, KernelKind::HEAD_K_FULL, RealKv{}, buffer_, empty_ring(64));
    if (!corrupted_) EXPECT_EQ(written.ring.count, 0) << "a clean write reported a violation";
    buffer_ = written.buffer;

    if (corrupt && !corrupted_) {  // an engine bug: a written record's token is overwritten
      for (std::int64_t slot = 1; slot < static_cast<std::int64_t>(buffer_.size()); ++slot)
        if (buffer_[static_cast<std::size_t>(slot)].prev_hash != 0 && between(0, 3) == 0) {
          buffer_[static_cast<std::size_t>(slot)].token += 1;
          corrupted_slot_ = slot;
          corrupted_ = true;
          break;
        }
    }
  }

  bool done() const {
    for (std::int64_t rp = 1; rp < kRows; ++rp)
      if (prefix_[rp] < kCols) return false;
    return true;
  }

 private:
  bool corruption_read(const Outputs& plan) const {
    for (std::int32_t i = 0; i < plan.verify_num_valid; ++i)
      if (plan.verify_slot_indices[static_cast<std::size_t>(i)] == corrupted_slot_) return true;
    return false;
  }
  std::int64_t between(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_); }

  std::mt19937_64 rng_;
  Inputs in_;
  Buffer buffer_;
  std::int64_t prefix_[kRows] = {};
  bool corrupted_ = false;
  std::int64_t corrupted_slot_ = -1;
};

TEST_P(CanaryDifferential, PipelinesCarryTheBufferFromStepToStep) {
  for (int run = 0; run < 12; ++run) {
    SCOPED_TRACE("pipeline " + std::to_string(run));
    MiniEngine engine(1000 + static_cast<std::uint64_t>(run));
    const auto r = runner(run);
    for (int step = 0; step < 40 && !engine.done(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      engine.step(r, /*corrupt=*/run % 2 == 1 && step == 3 + run % 5);
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Canary, CanaryDifferential,
                         ::testing::Values(CanaryAlgorithm::Default, CanaryAlgorithm::Portable, CanaryAlgorithm::Cuda),
                         [](const ::testing::TestParamInfo<CanaryAlgorithm>& info) {
                           switch (info.param) {
                             case CanaryAlgorithm::Default: return std::string("Default");
                             case CanaryAlgorithm::Portable: return std::string("Portable");
                             case CanaryAlgorithm::Cuda: return std::string("Cuda");
                           }
                           return std::string("Unknown");
                         });

}  // namespace kvcanary_test
