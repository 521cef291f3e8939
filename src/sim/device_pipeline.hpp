#ifndef KVCANARY_SIM_DEVICE_PIPELINE_HPP
#define KVCANARY_SIM_DEVICE_PIPELINE_HPP

// The canary as an engine runs it: kvcanary::Canary (docs/runtime.md) over the engine model's tables,
// every input buffer allocated once and refilled in place (fixed addresses), and per step
// canary.before_forward() (every group's plan, head verify and write), the "model" writing the KV bytes,
// canary.after_forward() (the target group's tail verify and re-stamp with real-KV fingerprints), a
// periodic canary.sweep() of the prefix cache, and canary.end_step() + rearm() at the step boundary (the
// simulator reads each step's rows synchronously, to attribute them to the step's faults). On CUDA
// before_forward and after_forward are each captured once per batch-size bucket as a graph and replayed.
// Two runtime faults of the options: a step whose head replay is skipped (the health check must say the
// canary is not running) and a verify capacity too small for the batch (the runtime must warn).

#include "engine.hpp"

#include <kvcanary/kvcanary.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
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
    if (shape.identities) {  // SPEC-CANARY §11.7, only in runs that inject the cross_identity fault
      identities_ = alloc("identities", shape.max_batch);
      sweep_identities_ = alloc("sweep_identities", shape.max_cache_entries);
    }
    sweep_pool_indices_ = alloc("sweep_pool_indices", shape.max_cache_entries);
    sweep_prefix_lens_ = alloc("sweep_prefix_lens", shape.max_cache_entries);
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
    // The canary v2 stages outside the runtime (free, cross-check, padding check) count their launches here,
    // not on the runtime's per-tag counters, which its health check compares with the runtime's own launches.
    v2_kernel_runs_ = Kokkos::View<std::int64_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::sim::v2_kernel_runs"));
    v2_slot_runs_ = Kokkos::View<std::int64_t, Memory>(Kokkos::view_alloc(space_, "kvcanary::sim::v2_slot_runs"));
    real_k_.mode = real_v_.mode = options.real_kv;
    real_k_.sources = {RealKvSource<Memory>{kv_k_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};
    real_v_.sources = {RealKvSource<Memory>{kv_v_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};
    for (int g = 0; g < kGroups; ++g) {
      GroupTokenViews& t = tokens_[g];
      t.input_ids = alloc("input_ids", shape.token_capacity);
      t.positions = alloc("positions", shape.token_capacity);
      t.out_cache_loc = alloc("out_cache_loc", shape.token_capacity);
      t.expected_input_ids = alloc("expected_input_ids", shape.token_capacity);
      t.expected_positions = alloc("expected_positions", shape.token_capacity);
    }

    CanaryConfig config;
    config.report_mode = ReportMode::None;  // the simulator attributes the rows itself
    config.keep_never_written = true;       // and counts never-written rows as detections or false positives
    config.ring_capacity = options.ring_capacity;
    config.pump_rows_per_step = std::max<std::int64_t>(1, std::min<std::int64_t>(options.ring_capacity, 4096));
    config.tail_pass = true;
    config.real_kv_mode = options.real_kv;
    config.write_input_assert = true;
    config.verify_token_assert = true;
    config.sweep_interval = options.sweep_every;
    config.sweep_swa_group = false;  // the engine model's prefix cache keys the target group only
    config.health_check_every_n_steps = options.health_check_every;
    config.swa_group = shape.swa_window > 0;
    config.swa_window = shape.swa_window;
    config.draft_group = shape.draft_group;
    config.request_identities = shape.identities;
    config.dimensions.pool_slots = shape.num_slots;
    config.dimensions.max_running_requests = shape.rows;
    config.dimensions.max_context_len = shape.cols;
    config.dimensions.cuda_graph_max_bs = shape.max_batch;
    config.dimensions.max_cached_prefixes = shape.max_cache_entries;
    config.capacities.verify_capacity = options.verify_capacity > 0 ? options.verify_capacity
                                                                      : std::max(shape.verify_capacity, shape.sweep_verify_capacity);
    config.capacities.write_req_capacity = shape.max_batch;
    EngineTables<Memory> tables;
    tables.req_to_token = req_to_token_;
    tables.expected_tokens = EngineTable<Memory>(token_pool_);
    if (config.swa_group) tables.full_to_swa_index_mapping = EngineVector<Memory>(lut_);
    tables.target.real_kv_k = {RealKvSource<Memory>{kv_k_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};
    tables.target.real_kv_v = {RealKvSource<Memory>{kv_v_, shape.page_size, shape.bytes_per_token, shape.bytes_per_token}};
    canary_ = std::make_unique<Canary<Space>>(space_, config, tables);
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
    if (shape_.identities) copy(identities_, data.identities.data(), bs);
    for (int g = 0; g < kGroups; ++g) {
      if (!group_on(g)) continue;
      const GroupTokens& t = data.tokens[g];
      const std::int64_t n = shape_.token_capacity;
      copy(tokens_[g].input_ids, t.input_ids.data(), n);
      copy(tokens_[g].positions, t.positions.data(), n);
      copy(tokens_[g].out_cache_loc, t.out_cache_loc.data(), n);
      copy(tokens_[g].expected_input_ids, t.expected_input_ids.data(), n);
      copy(tokens_[g].expected_positions, t.expected_positions.data(), n);
    }
    free_slots(data);
    copy(kv_indptr_, data.kv_indptr.data(), bs + 1);
    copy(kv_indices_, data.kv_indices.data(), static_cast<std::int64_t>(data.kv_indices.size()));
    if (data.sweep) {
      const std::int64_t n = data.sweep_batch_size;
      copy(sweep_pool_indices_, data.sweep_pool_indices.data(), n);
      copy(sweep_prefix_lens_, data.sweep_prefix_lens.data(), n);
      copy(sweep_valid_lens_, data.sweep_valid_lens.data(), n);
      if (shape_.identities) copy(sweep_identities_, data.sweep_identities.data(), n);
    }
  }

  // The slots the engine freed since the last step: the free stage stamps them FREED (SPEC-CANARY §11.2)
  // in each group's K and V buffers, the step's epoch as owner epoch, before the head reads anything.
  void free_slots(const StepData& data) {
    Kokkos::deep_copy(space_, epoch_, data.step);
    for (int g = 0; g < kGroups; ++g) {
      const std::int64_t n = std::min(static_cast<std::int64_t>(data.freed[g].size()), shape_.num_slots);
      if (!group_on(g) || n == 0) continue;
      copy(freed_, data.freed[g].data(), n);
      const auto slots = Kokkos::subview(freed_, std::make_pair(std::int64_t{0}, n));
      const GroupKind kind = g == 0 ? GroupKind::Target : g == 1 ? GroupKind::Draft : GroupKind::Swa;  // the engine's order
      const bool swa = g == 2;
      FreeOptions<Memory> options;
      options.epoch = epoch_;
      options.kernel_kind = swa ? KernelKind::HEAD_K_SWA : KernelKind::HEAD_K_FULL;
      kvcanary::free(space_, slots, canary_->k_buffer(kind), v2_ring(kind), options);
      options.kernel_kind = swa ? KernelKind::HEAD_V_SWA : KernelKind::HEAD_V_FULL;
      kvcanary::free(space_, slots, canary_->v_buffer(kind), v2_ring(kind), options);
    }
  }

  // Every group's plan, head verify of K and V and write of K and V, then the cross-check of the target
  // group's backend metadata. On the fault's step the replay is skipped (a graph that lost the canary's
  // nodes), while end_step() still counts the forward.
  void head(const StepData& data) {
    if (options_.skip_canary_step >= 0 && data.step == options_.skip_canary_step) return;
    const ForwardBatch<Memory> batch = forward_batch(data.batch_size);
    run_maybe_graphed(head_graphs_, data.batch_size, [&] {
      canary_->before_forward(batch);
      cross_check(space_, target_inputs(data.batch_size), metadata(data.batch_size), v2_ring(GroupKind::Target));
    });
  }

  // The "model": the step's KV bytes of the target group's tokens, then the faults' flipped bytes.
  void model_write(const StepData& data) {
    const GroupTokenViews& t = tokens_[0];
    const Impl::ModelKvWrite<Memory> functor{t.input_ids, t.positions, t.out_cache_loc, kv_k_, kv_v_,
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
    if (options_.skip_canary_step >= 0 && data.step == options_.skip_canary_step) return;
    const ForwardBatch<Memory> batch = forward_batch(data.batch_size);
    run_maybe_graphed(tail_graphs_, data.batch_size, [&] { canary_->after_forward(batch); });
  }

  // Verify only, over the prefix cache's entries.
  void sweep(const StepData& data) {
    const auto n = static_cast<std::size_t>(data.sweep_batch_size);
    CachedPrefixes<Memory> cached;
    cached.pool_rows = Kokkos::subview(sweep_pool_indices_, std::make_pair(std::size_t(0), n));
    cached.lengths = Kokkos::subview(sweep_prefix_lens_, std::make_pair(std::size_t(0), n));
    cached.expected_tokens_valid_lens = EngineVector<Memory>(Kokkos::subview(sweep_valid_lens_, std::make_pair(std::size_t(0), n)));
    if (shape_.identities)
      cached.identities = EngineVector<Memory>(Kokkos::subview(sweep_identities_, std::make_pair(std::size_t(0), n)));
    canary_->sweep(cached);
    // The padding slot's bytes (SPEC-CANARY §11.5), with the sweep.
    check_padding_slot(space_, real_k_, padding_fold_of_zeros(real_k_), v2_ring(GroupKind::Target), KernelKind::SWEEP_K_FULL);
    check_padding_slot(space_, real_v_, padding_fold_of_zeros(real_v_), v2_ring(GroupKind::Target), KernelKind::SWEEP_V_FULL);
  }

  void fence() const { space_.fence(); }

  // The step boundary: end_step() (the pump, the health check, the warnings), then every group's rows of
  // the step read synchronously and the rings emptied (rearm()). Returns how many rings overflowed.
  std::int64_t read(std::vector<GroupRow>& rows) {
    const RuntimeReport pumped = canary_->end_step();
    const RuntimeReport report = canary_->rearm();
    for (const RuntimeReport* r : {&pumped, &report}) {
      for (std::size_t i = 0; i < r->violations.rows.size(); ++i)
        rows.push_back({sim_group(r->row_groups[i]), r->violations.rows[i]});
      keep(r->warnings, warnings_, warning_count_);
      keep(r->health_errors, health_errors_, health_error_count_);
    }
    return static_cast<std::int64_t>(std::max(pumped.overflowed_groups.size(), report.overflowed_groups.size()));
  }

  // What the runtime's own checks said over the run: counts, and the first kKeptLines lines of each.
  static constexpr std::size_t kKeptLines = 8;
  std::int64_t warning_count() const { return warning_count_; }
  std::int64_t health_error_count() const { return health_error_count_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::vector<std::string>& health_errors() const { return health_errors_; }

 private:
  struct GroupTokenViews {
    Vector<std::int64_t> input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
  };

  static void keep(const std::vector<std::string>& lines, std::vector<std::string>& kept, std::int64_t& count) {
    count += static_cast<std::int64_t>(lines.size());
    for (const auto& line : lines)
      if (kept.size() < kKeptLines) kept.push_back(line);
  }

  bool group_on(int g) const { return g == 0 || (g == 1 && shape_.draft_group) || (g == 2 && shape_.swa_window > 0); }

  static Group sim_group(GroupKind kind) {
    return kind == GroupKind::Target ? Group::Target : kind == GroupKind::Swa ? Group::Swa : Group::Draft;
  }

  template <class Device, class T>
  void copy(const Device& device, const T* host, std::int64_t n) {
    Kokkos::deep_copy(space_, Kokkos::subview(device, std::make_pair(std::int64_t(0), n)),
                      Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, static_cast<std::size_t>(n)));
  }

  // The batch of a bucket: the first bs rows of the fixed buffers, every group's full token arrays.
  ForwardBatch<Memory> forward_batch(std::int64_t bs) const {
    const auto rows = std::make_pair(std::int64_t(0), bs);
    ForwardBatch<Memory> batch;
    batch.req_pool_indices = Kokkos::subview(req_pool_indices_, rows);
    batch.prefix_lens = Kokkos::subview(prefix_lens_, rows);
    batch.extend_seq_lens = Kokkos::subview(extend_seq_lens_, rows);
    batch.expected_tokens_valid_lens = EngineVector<Memory>(Kokkos::subview(valid_lens_, rows));
    if (shape_.identities) batch.identities = EngineVector<Memory>(Kokkos::subview(identities_, rows));
    const auto tokens = [&](int g) {
      const GroupTokenViews& t = tokens_[g];
      return ForwardTokens<Memory>{t.input_ids, t.positions, t.out_cache_loc, EngineVector<Memory>(t.expected_input_ids),
                                   EngineVector<Memory>(t.expected_positions)};
    };
    batch.tokens = tokens(0);
    if (shape_.draft_group) batch.draft_tokens = tokens(1);
    if (shape_.swa_window > 0) batch.swa_tokens = tokens(2);
    return batch;
  }

  // The target group's backend metadata of a batch of bs rows (SPEC-CANARY §11.4), at fixed addresses.
  BackendMetadata<Memory, std::int64_t> metadata(std::int64_t bs) const {
    BackendMetadata<Memory, std::int64_t> m;
    m.kv_indptr = unmanaged_vector<Memory>(kv_indptr_.data(), bs + 1);
    m.kv_indices = unmanaged_vector<Memory>(kv_indices_.data(), static_cast<std::int64_t>(kv_indices_.extent(0)));
    return m;
  }

  // The target group's plan inputs of a batch of bs rows (the cross-check compares the metadata with them).
  PlanInputs<Memory> target_inputs(std::int64_t bs) const {
    PlanInputs<Memory> in;
    in.req_pool_indices = unmanaged_vector<Memory>(req_pool_indices_.data(), bs);
    in.prefix_lens = unmanaged_vector<Memory>(prefix_lens_.data(), bs);
    in.extend_seq_lens = unmanaged_vector<Memory>(extend_seq_lens_.data(), bs);
    in.req_to_token = req_to_token_;
    return in;
  }

  // A group's ring (rows and count shared with the runtime's pump) with the simulator's own counters.
  ViolationRing<Memory> v2_ring(GroupKind kind) const {
    ViolationRing<Memory> ring = canary_->ring(kind);
    ring.kernel_run_counter = v2_kernel_runs_;
    ring.slot_run_counter = v2_slot_runs_;
    return ring;
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
  Vector<std::int64_t> identities_, sweep_identities_;  // SPEC-CANARY §11.7 (shape_.identities)
  Kokkos::View<std::int64_t, Memory> epoch_, v2_kernel_runs_, v2_slot_runs_;
  RealKv<Memory> real_k_, real_v_;
  Vector<std::int64_t> sweep_pool_indices_, sweep_prefix_lens_, sweep_valid_lens_;
  Table req_to_token_, token_pool_;
  Bytes kv_k_, kv_v_;
  GroupTokenViews tokens_[kGroups];
  std::unique_ptr<Canary<Space>> canary_;
  std::vector<std::string> warnings_, health_errors_;
  std::int64_t warning_count_ = 0, health_error_count_ = 0;
  Graphs head_graphs_, tail_graphs_;
};

}  // namespace sim
}  // namespace kvcanary

#endif
