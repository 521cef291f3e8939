#ifndef KVCANARY_SIM_DEVICE_PIPELINE_HPP
#define KVCANARY_SIM_DEVICE_PIPELINE_HPP

// The canary as an engine runs it, on an execution space, through kvcanary's public API only:
// every buffer allocated once, the step's inputs refilled in place (fixed addresses), and per step
// plan → head verify → write for each group, the "model" writing the KV bytes, the tail verify → write
// of the target group (real-KV fingerprints), a periodic sweep of the prefix cache, and the ring read at
// the step boundary. On CUDA the head and the tail are each captured once per batch-size bucket as a
// graph and replayed (SPEC-CANARY §6).

#include "engine.hpp"

#include <kvcanary/kvcanary.hpp>

#include <map>
#include <vector>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>
#include <type_traits>
#endif

namespace kvcanary {
namespace sim {

// The byte the "model" writes at byte `b` of a token's KV (tensor 0: K, 1: V); any fixed function will do.
KOKKOS_INLINE_FUNCTION std::uint8_t model_kv_byte(std::int64_t token, std::int64_t position, std::int64_t b, int tensor) {
  std::uint64_t x = static_cast<std::uint64_t>(token) * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(position) << 20 ^
                    static_cast<std::uint64_t>(b) << 8 ^ static_cast<std::uint64_t>(tensor);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> 56);
}

namespace Impl {

template <class MemorySpace>
struct ModelKvWrite {
  Kokkos::View<const std::int64_t*, MemorySpace> input_ids, positions, out_cache_loc;
  Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, MemorySpace> k, v;
  std::int64_t page_size, bytes_per_token, num_slots;
  KOKKOS_FUNCTION void operator()(std::int64_t i) const {
    const std::int64_t slot = out_cache_loc(i);
    if (slot < 0 || slot >= num_slots) return;
    const std::int64_t row = slot / page_size, column = (slot % page_size) * bytes_per_token;
    for (std::int64_t b = 0; b < bytes_per_token; ++b) {
      k(row, column + b) = model_kv_byte(input_ids(i), positions(i), b, 0);
      v(row, column + b) = model_kv_byte(input_ids(i), positions(i), b, 1);
    }
  }
};

template <class MemorySpace>
struct FlipByte {
  Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, MemorySpace> bytes;
  std::int64_t row, column;
  std::uint8_t mask;
  KOKKOS_FUNCTION void operator()(std::int64_t) const { bytes(row, column) ^= mask; }
};

}  // namespace Impl

template <class Space>
class DevicePipeline {
 public:
  using Memory = typename Space::memory_space;
  template <class T>
  using Vector = Kokkos::View<T*, Memory>;
  using Table = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Memory>;
  using Bytes = Kokkos::View<std::uint8_t**, Kokkos::LayoutRight, Memory>;

  DevicePipeline(const Space& space, const EngineShape& shape, const SimulationOptions& options)
      : space_(space), shape_(shape), options_(options) {
    const auto alloc = [&](const char* label, std::int64_t n) {
      return Vector<std::int64_t>(Kokkos::view_alloc(space_, std::string("kvcanary::sim::") + label), static_cast<std::size_t>(n));
    };
    req_pool_indices_ = alloc("req_pool_indices", shape.max_batch);
    prefix_lens_ = alloc("prefix_lens", shape.max_batch);
    extend_seq_lens_ = alloc("extend_seq_lens", shape.max_batch);
    valid_lens_ = alloc("valid_lens", shape.max_batch);
    sweep_pool_indices_ = alloc("sweep_pool_indices", shape.max_cache_entries);
    sweep_prefix_lens_ = alloc("sweep_prefix_lens", shape.max_cache_entries);
    sweep_extend_seq_lens_ = alloc("sweep_extend_seq_lens", shape.max_cache_entries);
    sweep_valid_lens_ = alloc("sweep_valid_lens", shape.max_cache_entries);
    lut_ = alloc("full_to_swa_index_mapping", shape.num_slots);
    req_to_token_ = Table(Kokkos::view_alloc(space_, "kvcanary::sim::req_to_token"), shape.rows, shape.cols);
    token_pool_ = Table(Kokkos::view_alloc(space_, "kvcanary::sim::expected_tokens"), shape.rows, shape.cols);
    const std::int64_t row_bytes = shape.page_size * shape.bytes_per_token;
    kv_k_ = Bytes(Kokkos::view_alloc(space_, "kvcanary::sim::kv_k"), shape.num_pages, row_bytes);
    kv_v_ = Bytes(Kokkos::view_alloc(space_, "kvcanary::sim::kv_v"), shape.num_pages, row_bytes);
    freed_ = alloc("freed_slots", shape.num_slots);
    kv_indptr_ = alloc("kv_indptr", shape.max_batch + 1);
    kv_indices_ = alloc("kv_indices", shape.max_batch * shape.cols);
    epoch_ = Kokkos::View<std::int64_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::sim::free_epoch"));
    chain_assert_ = Kokkos::View<std::int32_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::sim::chain_position_assert"));
    Kokkos::deep_copy(space_, chain_assert_, 1);

    RealKv<Memory> real_k, real_v;
    real_k.mode = real_v.mode = options.real_kv;
    real_k.sources = {RealKvSource<Memory>{kv_k_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};
    real_v.sources = {RealKvSource<Memory>{kv_v_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};

    for (int g = 0; g < kGroups; ++g) {
      const bool on = g == 0 || (g == 1 && shape.draft_group) || (g == 2 && shape.swa_window > 0);
      if (!on) continue;
      GroupState& s = groups_[g];
      s.on = true;
      s.verify = allocate_verify_plan(space_, shape.verify_capacity);
      s.write = allocate_write_plan(space_, shape.max_batch);
      s.status = allocate_plan_status(space_);
      s.workspace = allocate_plan_workspace(space_, shape.max_batch);
      s.k = allocate_canary_buffer(space_, shape.num_slots, "kvcanary::sim::k_canary");
      s.v = allocate_canary_buffer(space_, shape.num_slots, "kvcanary::sim::v_canary");
      s.ring = allocate_violation_ring(space_, options.ring_capacity);
      s.input_ids = alloc("input_ids", shape.token_capacity);
      s.positions = alloc("positions", shape.token_capacity);
      s.out_cache_loc = alloc("out_cache_loc", shape.token_capacity);
      s.expected_input_ids = alloc("expected_input_ids", shape.token_capacity);
      s.expected_positions = alloc("expected_positions", shape.token_capacity);
      s.tokens = StepTokens<Memory>{s.input_ids, s.positions, s.out_cache_loc, s.expected_input_ids, s.expected_positions,
                                    chain_assert_};
      const bool swa = g == 2;
      const RealKv<Memory> none{};
      const auto& rk = g == 0 ? real_k : none;
      const auto& rv = g == 0 ? real_v : none;
      s.head_targets = {{s.k, swa ? KernelKind::HEAD_K_SWA : KernelKind::HEAD_K_FULL, rk},
                        {s.v, swa ? KernelKind::HEAD_V_SWA : KernelKind::HEAD_V_FULL, rv}};
      s.head_write_k.kernel_kind = s.head_targets[0].kernel_kind;
      s.head_write_v.kernel_kind = s.head_targets[1].kernel_kind;
      s.head_write_k.real_kv = rk;
      s.head_write_v.real_kv = rv;
      if (g == 0) {
        s.tail_targets = {{s.k, KernelKind::TAIL_K_FULL, rk}, {s.v, KernelKind::TAIL_V_FULL, rv}};
        s.sweep_targets = {{s.k, KernelKind::SWEEP_K_FULL, rk}, {s.v, KernelKind::SWEEP_V_FULL, rv}};
        s.tail_write_k = s.head_write_k;
        s.tail_write_v = s.head_write_v;
        s.tail_write_k.kernel_kind = KernelKind::TAIL_K_FULL;
        s.tail_write_v.kernel_kind = KernelKind::TAIL_V_FULL;
      }
    }
    sweep_verify_ = allocate_verify_plan(space_, shape.sweep_verify_capacity);
    sweep_write_ = allocate_write_plan(space_, shape.max_cache_entries);
    sweep_status_ = allocate_plan_status(space_);
    sweep_workspace_ = allocate_plan_workspace(space_, shape.max_cache_entries);
    space_.fence();
  }

  DevicePipeline(const DevicePipeline&) = delete;
  DevicePipeline& operator=(const DevicePipeline&) = delete;

  ~DevicePipeline() {
#ifdef KOKKOS_ENABLE_CUDA
    for (auto* graphs : {&head_graphs_, &tail_graphs_})
      for (auto& [bs, exec] : *graphs) cudaGraphExecDestroy(exec);
#endif
  }

  // The engine refills its inputs in place: only what changed, at the addresses the graphs captured.
  void upload(const Engine& engine, const StepData& data) {
    const std::int64_t cols = shape_.cols;
    for (const auto row : data.dirty_rows) {
      copy(Kokkos::subview(req_to_token_, row, Kokkos::ALL), engine.req_to_token().data() + row * cols, cols);
      copy(Kokkos::subview(token_pool_, row, Kokkos::ALL), engine.token_pool().data() + row * cols, cols);
    }
    if (data.lut_dirty && shape_.swa_window > 0) copy(lut_, engine.swa_lut().data(), shape_.num_slots);
    const std::int64_t bs = data.batch_size;
    copy(req_pool_indices_, data.req_pool_indices.data(), bs);
    copy(prefix_lens_, data.prefix_lens.data(), bs);
    copy(extend_seq_lens_, data.extend_seq_lens.data(), bs);
    copy(valid_lens_, data.valid_lens.data(), bs);
    for (int g = 0; g < kGroups; ++g) {
      if (!groups_[g].on) continue;
      const GroupTokens& t = data.tokens[g];
      const std::int64_t n = shape_.token_capacity;
      copy(groups_[g].input_ids, t.input_ids.data(), n);
      copy(groups_[g].positions, t.positions.data(), n);
      copy(groups_[g].out_cache_loc, t.out_cache_loc.data(), n);
      copy(groups_[g].expected_input_ids, t.expected_input_ids.data(), n);
      copy(groups_[g].expected_positions, t.expected_positions.data(), n);
    }
    free_slots(data);
    copy(kv_indptr_, data.kv_indptr.data(), bs + 1);
    copy(kv_indices_, data.kv_indices.data(), static_cast<std::int64_t>(data.kv_indices.size()));
    if (data.sweep) {
      const std::int64_t n = data.sweep_batch_size;
      copy(sweep_pool_indices_, data.sweep_pool_indices.data(), n);
      copy(sweep_prefix_lens_, data.sweep_prefix_lens.data(), n);
      copy(sweep_extend_seq_lens_, data.sweep_extend_seq_lens.data(), n);
      copy(sweep_valid_lens_, data.sweep_valid_lens.data(), n);
    }
  }

  // The slots the engine freed since the last step: the free stage stamps them FREED (SPEC-CANARY §11.2)
  // in each group's K and V buffers, the step's epoch as owner epoch, before the head reads anything.
  void free_slots(const StepData& data) {
    Kokkos::deep_copy(space_, epoch_, data.step);
    for (int g = 0; g < kGroups; ++g) {
      GroupState& s = groups_[g];
      const std::int64_t n = std::min(static_cast<std::int64_t>(data.freed[g].size()), shape_.num_slots);
      if (!s.on || n == 0) continue;
      copy(freed_, data.freed[g].data(), n);
      const auto slots = Kokkos::subview(freed_, std::make_pair(std::int64_t{0}, n));
      FreeOptions<Memory> options;
      options.epoch = epoch_;
      options.kernel_kind = s.head_targets[0].kernel_kind;
      kvcanary::free(space_, slots, s.k, s.ring, options);
      options.kernel_kind = s.head_targets[1].kernel_kind;
      kvcanary::free(space_, slots, s.v, s.ring, options);
    }
  }

  // plan → verify (K and V) → write K → write V, for every group.
  void head(const StepData& data) {
    run_maybe_graphed(head_graphs_, data.batch_size, [&] {
      for (int g = 0; g < kGroups; ++g) {
        if (!groups_[g].on) continue;
        GroupState& s = groups_[g];
        plan(space_, inputs(static_cast<Group>(g), data.batch_size), s.verify, s.write, s.status, s.workspace);
        verify(space_, s.verify, s.head_targets, s.ring);
        if (g == 0) cross_check(space_, inputs(Group::Target, data.batch_size), metadata(data.batch_size), s.ring);
        write(space_, s.write, s.tokens, s.k, s.ring, s.head_write_k);
        write(space_, s.write, s.tokens, s.v, s.ring, s.head_write_v);
      }
    });
  }

  // The "model": the step's KV bytes of the target group's tokens, then the faults' flipped bytes.
  void model_write(const StepData& data) {
    const GroupState& s = groups_[0];
    const Impl::ModelKvWrite<Memory> functor{s.input_ids, s.positions, s.out_cache_loc, kv_k_, kv_v_,
                                             shape_.page_size, shape_.bytes_per_token, shape_.num_slots};
    Kokkos::parallel_for("kvcanary::sim::model_kv_write",
                         Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(space_, 0, shape_.token_capacity), functor);
    for (const ByteFlip& flip : data.flips) {
      const Impl::FlipByte<Memory> f{flip.tensor == 0 ? kv_k_ : kv_v_, flip.slot / shape_.page_size,
                                     (flip.slot % shape_.page_size) * shape_.bytes_per_token + flip.byte, flip.mask};
      Kokkos::parallel_for("kvcanary::sim::fault_flip_byte", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(space_, 0, 1), f);
    }
  }

  // The target group after the model: verify the prefixes against the real KV, re-stamp the step's tokens.
  void tail(const StepData& data) {
    run_maybe_graphed(tail_graphs_, data.batch_size, [&] {
      GroupState& s = groups_[0];
      verify(space_, s.verify, s.tail_targets, s.ring);
      write(space_, s.write, s.tokens, s.k, s.ring, s.tail_write_k);
      write(space_, s.write, s.tokens, s.v, s.ring, s.tail_write_v);
    });
  }

  // Verify only, over the prefix cache's entries (no write: extend 0).
  void sweep(const StepData& data) {
    PlanInputs<Memory> in;
    const std::int64_t n = data.sweep_batch_size;
    in.req_pool_indices = unmanaged_vector<Memory>(sweep_pool_indices_.data(), n);
    in.prefix_lens = unmanaged_vector<Memory>(sweep_prefix_lens_.data(), n);
    in.extend_seq_lens = unmanaged_vector<Memory>(sweep_extend_seq_lens_.data(), n);
    in.req_to_token = req_to_token_;
    in.req_to_verify_expected_tokens = typename PlanInputs<Memory>::template Matrix<std::int32_t>(token_pool_);
    in.req_to_verify_expected_tokens_valid_lens = unmanaged_vector<Memory>(sweep_valid_lens_.data(), n);
    plan(space_, in, sweep_verify_, sweep_write_, sweep_status_, sweep_workspace_);
    verify(space_, sweep_verify_, groups_[0].sweep_targets, groups_[0].ring);
    for (const VerifyTarget<Memory>& t : groups_[0].sweep_targets)  // the padding slot's bytes (SPEC-CANARY §11.5)
      check_padding_slot(space_, t.real_kv, padding_fold_of_zeros(t.real_kv), groups_[0].ring, t.kernel_kind);
  }

  void fence() const { space_.fence(); }

  // The step boundary: each group's new rows (all of them, never-written ones included), the ring
  // emptied for the next step. Returns how many rings overflowed.
  std::int64_t read(std::vector<GroupRow>& rows) {
    std::int64_t overflows = 0;
    for (int g = 0; g < kGroups; ++g) {
      GroupState& s = groups_[g];
      if (!s.on) continue;
      std::int64_t count = 0;
      Kokkos::deep_copy(space_, Kokkos::View<std::int64_t, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(&count),
                        s.ring.count);
      space_.fence();
      if (count == 0) continue;
      const ViolationReport report = s.reader.read(space_, s.ring);
      if (report.overflowed) ++overflows;
      for (const auto& row : report.rows) rows.push_back({static_cast<Group>(g), row});
      Kokkos::deep_copy(space_, s.ring.count, std::int64_t(0));
      space_.fence();
      s.reader.restart();
    }
    return overflows;
  }

 private:
  struct GroupState {
    bool on = false;
    VerifyPlan<Memory> verify;
    WritePlan<Memory> write;
    PlanStatus<Memory> status;
    PlanWorkspace<Memory> workspace;
    CanaryBuffer<Memory> k, v;
    ViolationRing<Memory> ring;
    Vector<std::int64_t> input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
    StepTokens<Memory> tokens;
    std::vector<VerifyTarget<Memory>> head_targets, tail_targets, sweep_targets;
    WriteOptions<Memory> head_write_k, head_write_v, tail_write_k, tail_write_v;
    ViolationReader reader{ReportOptions{ReportMode::None, /*keep_never_written=*/true, {}}};
  };

  template <class T>
  void copy(const Kokkos::View<T*, Memory>& device, const T* host, std::int64_t n) {
    Kokkos::deep_copy(space_, Kokkos::subview(device, std::make_pair(std::int64_t(0), n)),
                      Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, static_cast<std::size_t>(n)));
  }
  template <class Device, class T>
  void copy(const Device& device, const T* host, std::int64_t n) {
    Kokkos::deep_copy(space_, device,
                      Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, static_cast<std::size_t>(n)));
  }

  // The target group's backend metadata of a batch of bs rows (SPEC-CANARY §11.4), at fixed addresses.
  BackendMetadata<Memory, std::int64_t> metadata(std::int64_t bs) const {
    BackendMetadata<Memory, std::int64_t> m;
    m.kv_indptr = unmanaged_vector<Memory>(kv_indptr_.data(), bs + 1);
    m.kv_indices = unmanaged_vector<Memory>(kv_indices_.data(), static_cast<std::int64_t>(kv_indices_.extent(0)));
    return m;
  }

  PlanInputs<Memory> inputs(Group group, std::int64_t bs) const {
    PlanInputs<Memory> in;
    in.req_pool_indices = unmanaged_vector<Memory>(req_pool_indices_.data(), bs);
    in.prefix_lens = unmanaged_vector<Memory>(prefix_lens_.data(), bs);
    in.extend_seq_lens = unmanaged_vector<Memory>(extend_seq_lens_.data(), bs);
    in.req_to_token = req_to_token_;
    in.req_to_verify_expected_tokens = typename PlanInputs<Memory>::template Matrix<std::int32_t>(token_pool_);
    in.req_to_verify_expected_tokens_valid_lens = unmanaged_vector<Memory>(valid_lens_.data(), bs);
    if (group == Group::Draft) in.kv_token_id_vs_position_offset = 1;
    if (group == Group::Swa) {
      in.swa_window_size = shape_.swa_window;
      in.full_to_swa_index_mapping = unmanaged_vector<Memory>(lut_.data(), shape_.num_slots);
    }
    return in;
  }

#ifdef KOKKOS_ENABLE_CUDA
  using Graphs = std::map<std::int64_t, cudaGraphExec_t>;
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("kvcanary simulate: ") + what + ": " + cudaGetErrorString(e));
  }
#else
  using Graphs = std::map<std::int64_t, int>;
#endif

  // On CUDA: the first step of a bucket runs eagerly (first launches set up outside any capture), and is
  // captured as a graph that later steps of the bucket replay. Elsewhere: the calls themselves.
  template <class Calls>
  void run_maybe_graphed(Graphs& graphs, std::int64_t bucket, const Calls& calls) {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Space, Kokkos::Cuda>::value) {
      if (options_.use_graphs) {
        const auto it = graphs.find(bucket);
        if (it != graphs.end()) {
          check(cudaGraphLaunch(it->second, space_.cuda_stream()), "cudaGraphLaunch");
          return;
        }
        calls();
        cudaGraph_t graph;
        check(cudaStreamBeginCapture(space_.cuda_stream(), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
        calls();
        check(cudaStreamEndCapture(space_.cuda_stream(), &graph), "cudaStreamEndCapture");
        cudaGraphExec_t exec;
        check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
        check(cudaGraphDestroy(graph), "cudaGraphDestroy");
        graphs.emplace(bucket, exec);
        return;
      }
    }
#endif
    (void)graphs;
    (void)bucket;
    calls();
  }

  Space space_;
  EngineShape shape_;
  SimulationOptions options_;
  Vector<std::int64_t> req_pool_indices_, prefix_lens_, extend_seq_lens_, valid_lens_, lut_, freed_, kv_indptr_, kv_indices_;
  Kokkos::View<std::int64_t, Memory> epoch_;
  Vector<std::int64_t> sweep_pool_indices_, sweep_prefix_lens_, sweep_extend_seq_lens_, sweep_valid_lens_;
  Table req_to_token_, token_pool_;
  Bytes kv_k_, kv_v_;
  Kokkos::View<std::int32_t, Memory> chain_assert_;
  GroupState groups_[kGroups];
  VerifyPlan<Memory> sweep_verify_;
  WritePlan<Memory> sweep_write_;
  PlanStatus<Memory> sweep_status_;
  PlanWorkspace<Memory> sweep_workspace_;
  Graphs head_graphs_, tail_graphs_;
};

}  // namespace sim
}  // namespace kvcanary

#endif
