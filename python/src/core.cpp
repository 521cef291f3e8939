// The Kokkos layer of kvcanary._core: lifecycle, execution spaces and the three stages over unmanaged
// Views of the caller's memory. module.cpp has checked every Python-boundary rule before these run; the
// library's own checks (validate(), check_buffer(), ...) still run here and throw std::invalid_argument.

#include "core.hpp"
#include "core_kokkos.hpp"

#include <kvcanary/stages/plan.hpp>
#include <kvcanary/stages/verify.hpp>
#include <kvcanary/stages/write.hpp>

#include <Kokkos_Core.hpp>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary {
namespace python {
using namespace detail;
namespace {

std::mutex lifecycle_mutex;
bool finalized_flag = false;
bool we_initialized = false;
int init_device = -1;

template <class Mem, class Index>
StepTokens<Mem, Index> tokens_of(const WriteArgs& a) {
  const auto vec = [](const Vec<const void>& v) {
    return Kokkos::View<const Index*, Kokkos::LayoutRight, Mem>(static_cast<const Index*>(v.data),
                                                                  static_cast<std::size_t>(v.size));
  };
  StepTokens<Mem, Index> tokens;
  tokens.input_ids = vec(a.input_ids);
  tokens.positions = vec(a.positions);
  tokens.out_cache_loc = vec(a.out_cache_loc);
  if (a.has_expected) {
    tokens.expected_input_ids = vec(a.expected_input_ids);
    tokens.expected_positions = vec(a.expected_positions);
  }
  tokens.chain_position_assert = Kokkos::View<const std::int32_t, Mem>(a.chain_position_assert);
  return tokens;
}

// verify() and write() only read their plan; its View types are the plan's (non-const) ones.
template <class Mem>
Kokkos::View<std::int64_t*, Mem> plan_vec(const Vec<const std::int64_t>& v) {
  return Kokkos::View<std::int64_t*, Mem>(const_cast<std::int64_t*>(v.data), static_cast<std::size_t>(v.size));
}

CanaryAlgorithm canary_algorithm(int a) {
  return a == 1 ? CanaryAlgorithm::Portable : a == 2 ? CanaryAlgorithm::Cuda : CanaryAlgorithm::Default;
}

}  // namespace

namespace detail {

std::mutex& host_mutex() {
  static std::mutex mutex;
  return mutex;
}

namespace {
std::atomic<bool> forked_after_start{false};
// A fork waits for the host call in flight (the child must not inherit a locked host_mutex).
void before_fork() { host_mutex().lock(); }
void after_fork_in_parent() { host_mutex().unlock(); }
void after_fork_in_child() {
  host_mutex().unlock();
  if (Kokkos::is_initialized()) forked_after_start.store(true);
}
}  // namespace

bool forked_child() { return forked_after_start.load(); }

[[noreturn]] void runtime(const std::string& what) { throw std::runtime_error("kvcanary: " + what); }

#ifdef KOKKOS_ENABLE_CUDA
std::mutex instances_mutex;

std::map<std::pair<int, std::uintptr_t>, Kokkos::Cuda>& instances() {
  static std::map<std::pair<int, std::uintptr_t>, Kokkos::Cuda> cache;
  return cache;
}

bool capturing(std::uintptr_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

Kokkos::Cuda instance(int device, std::uintptr_t stream) {
  std::lock_guard<std::mutex> lock(instances_mutex);
  auto& cache = instances();
  const auto key = std::make_pair(device, stream);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  if (capturing(stream)) {
    char text[64];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(stream));
    runtime(std::string("first use of CUDA stream ") + text +
            " during CUDA-graph capture; run one call (or kvcanary.prepare()) on that stream before capturing");
  }
  return cache.emplace(key, Kokkos::Cuda(reinterpret_cast<cudaStream_t>(stream))).first->second;
}
#endif

// Lazy initialization: a CUDA call starts Kokkos on its arrays' device (explicit, never a guess from the
// environment); a host call starts it with no device.
void require_running(int device_id) {
  if (finalized_flag) runtime("called after kvcanary.finalize(); Kokkos cannot be started again in this process");
  if (!Kokkos::is_initialized()) initialize(InitOptions{device_id, -1});
}

}  // namespace detail

// ---- lifecycle ----

void initialize(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(lifecycle_mutex);
  if (finalized_flag) runtime("initialize() after finalize(); Kokkos cannot be started again in this process");
  if (Kokkos::is_initialized()) return;  // a second initialize is a no-op, never Kokkos' abort
  int device = options.device_id;
#ifdef KOKKOS_ENABLE_CUDA
  int count = 0;
  cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count <= 0) runtime("no CUDA device is visible to this process");
  if (device < 0) cuda_check(cudaGetDevice(&device), "cudaGetDevice");  // the caller's current device
  if (device >= count)
    runtime("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " visible)");
  int major = 0, minor = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  if (major * 10 + minor < build_arch())
    runtime("CUDA device " + std::to_string(device) + " has compute capability " + std::to_string(major) + "." +
            std::to_string(minor) + ", older than this build's kernels (sm_" + std::to_string(build_arch()) + ")");
  DeviceGuard guard(device);
#else
  device = -1;
#endif
#if KOKKOS_VERSION >= 30700
  auto settings = Kokkos::InitializationSettings().set_disable_warnings(true);
  if (options.num_threads > 0) settings.set_num_threads(options.num_threads);
  if (device >= 0) settings.set_device_id(device);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments arguments;
  arguments.disable_warnings = true;
  if (options.num_threads > 0) arguments.num_threads = options.num_threads;
  if (device >= 0) arguments.device_id = device;
  Kokkos::initialize(arguments);
#endif
  we_initialized = true;
  init_device = device;
  // Engines fork workers; a child inherits Kokkos' state but not OpenMP's threads or the CUDA context.
  static const bool fork_handlers =
      pthread_atfork(detail::before_fork, detail::after_fork_in_parent, detail::after_fork_in_child) == 0;
  (void)fork_handlers;
}

bool is_initialized() { return Kokkos::is_initialized() && !finalized_flag; }
bool is_finalized() { return finalized_flag; }

void finalize() {
  std::lock_guard<std::mutex> lock(lifecycle_mutex);
  if (finalized_flag) return;
  // Their Views and CUDA streams go before Kokkos does (in a forked child: host state only, CanaryHandle::release).
  release_canaries();
  finalized_flag = true;
  const bool child = forked_child();  // the parent's Kokkos: finalizing it here would wait on threads that are gone
#ifdef KOKKOS_ENABLE_CUDA
  {
    std::lock_guard<std::mutex> instances_lock(instances_mutex);
    if (child)  // no CUDA call in the child: the instances are never destroyed
      (void)new std::map<std::pair<int, std::uintptr_t>, Kokkos::Cuda>(std::move(instances()));
    else
      instances().clear();  // before Kokkos goes: an instance outliving finalize aborts
  }
#endif
  if (!child && we_initialized && Kokkos::is_initialized()) Kokkos::finalize();
}

std::vector<std::string> backends() {
  std::vector<std::string> names;
#ifdef KOKKOS_ENABLE_SERIAL
  names.emplace_back("serial");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  names.emplace_back("openmp");
#endif
#ifdef KOKKOS_ENABLE_CUDA
  names.emplace_back("cuda");
#endif
  return names;
}

bool built_with_cuda() {
#ifdef KOKKOS_ENABLE_CUDA
  return true;
#else
  return false;
#endif
}

std::string kokkos_version() {
  const int v = KOKKOS_VERSION;
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

int initialized_device() { return init_device; }

bool stream_is_capturing(std::uintptr_t stream, int device_id) {
#ifdef KOKKOS_ENABLE_CUDA
  DeviceGuard guard(device_id);
  return capturing(stream);
#else
  (void)stream;
  (void)device_id;
  return false;
#endif
}

void prepare_stream(int device_id, std::uintptr_t stream) {
#ifdef KOKKOS_ENABLE_CUDA
  require_running(device_id);
  if (device_id != init_device)
    throw std::invalid_argument("kvcanary: prepare() on CUDA device " + std::to_string(device_id) +
                                " but kvcanary runs on device " + std::to_string(init_device));
  DeviceGuard guard(device_id);
  (void)instance(device_id, stream);
#else
  (void)device_id;
  (void)stream;
#endif
}

// ---- stages ----

void plan(const Place& place, const PlanArgs& a) {
  on_place(place, [&](const auto& space, auto memory_space) {
    using Mem = decltype(memory_space);
    PlanInputs<Mem> inputs;
    inputs.req_pool_indices = in_vec<Mem>(a.req_pool_indices);
    inputs.prefix_lens = in_vec<Mem>(a.prefix_lens);
    inputs.extend_seq_lens = in_vec<Mem>(a.extend_seq_lens);
    inputs.req_to_token = in_mat<Mem>(a.req_to_token);
    inputs.swa_window_size = a.swa_window_size;
    if (a.has_lut) inputs.full_to_swa_index_mapping = in_vec<Mem>(a.lut);
    if (a.has_pool) inputs.req_to_verify_expected_tokens = in_mat<Mem>(a.pool);
    if (a.has_valid_lens) inputs.req_to_verify_expected_tokens_valid_lens = in_vec<Mem>(a.valid_lens);
    inputs.kv_token_id_vs_position_offset = a.kv_token_id_vs_position_offset;
    if (a.has_identities) inputs.req_identities = in_vec<Mem>(a.identities);

    VerifyPlan<Mem> verify_plan;
    verify_plan.verify_slot_indices = out_vec<Mem>(a.verify_slot_indices);
    verify_plan.verify_expected_tokens = out_vec<Mem>(a.verify_expected_tokens);
    verify_plan.verify_expected_positions = out_vec<Mem>(a.verify_expected_positions);
    verify_plan.verify_prev_slot_indices = out_vec<Mem>(a.verify_prev_slot_indices);
    verify_plan.verify_num_valid = Kokkos::View<std::int32_t, Mem>(a.verify_num_valid);
    verify_plan.enable = Kokkos::View<std::int32_t, Mem>(a.enable);
    if (a.has_verify_identities) verify_plan.verify_identities = out_vec<Mem>(a.verify_identities);
    WritePlan<Mem> write_plan;
    write_plan.write_offsets = out_vec<Mem>(a.write_offsets);
    write_plan.write_seed_slot_indices = out_vec<Mem>(a.write_seed_slot_indices);
    write_plan.write_num_valid_reqs = Kokkos::View<std::int32_t, Mem>(a.write_num_valid_reqs);
    if (a.has_write_identities) write_plan.write_identities = out_vec<Mem>(a.write_identities);
    PlanStatus<Mem> status;
    status.input_error_bits = Kokkos::View<std::int32_t, Mem>(a.input_error_bits);
    status.first_bad_row = Kokkos::View<std::int32_t, Mem>(a.first_bad_row);
    PlanWorkspace<Mem> workspace;
    workspace.verify_offsets = out_vec<Mem>(a.workspace);
    PlanOptions options;
    options.algorithm = a.algorithm == 1   ? EntriesAlgorithm::Portable
                        : a.algorithm == 2 ? EntriesAlgorithm::CudaPersistent
                                           : EntriesAlgorithm::Default;
    kvcanary::plan(space, inputs, verify_plan, write_plan, status, workspace, options);
  });
}

void verify(const Place& place, const VerifyArgs& a) {
  on_place(place, [&](const auto& space, auto memory_space) {
    using Mem = decltype(memory_space);
    VerifyPlan<Mem> plan;
    plan.verify_slot_indices = plan_vec<Mem>(a.plan.slot_indices);
    plan.verify_expected_tokens = plan_vec<Mem>(a.plan.expected_tokens);
    plan.verify_expected_positions = plan_vec<Mem>(a.plan.expected_positions);
    plan.verify_prev_slot_indices = plan_vec<Mem>(a.plan.prev_slot_indices);
    plan.verify_num_valid = Kokkos::View<std::int32_t, Mem>(const_cast<std::int32_t*>(a.plan.num_valid));
    plan.enable = Kokkos::View<std::int32_t, Mem>(const_cast<std::int32_t*>(a.plan.enable));
    if (a.plan.has_identities) plan.verify_identities = plan_vec<Mem>(a.plan.identities);
    std::vector<VerifyTarget<Mem>> targets;
    for (const TargetArgs& t : a.targets)
      targets.push_back(VerifyTarget<Mem>{buffer_of<Mem>(t.buffer), static_cast<KernelKind>(t.kernel_kind),
                                          real_kv_of<Mem>(t.real_kv)});
    VerifyOptions options;
    options.check_expected_token = a.check_expected_token;
    options.checks = VerifyChecks{a.check_slot_zero, a.check_freed};
    options.algorithm = canary_algorithm(a.algorithm);
    kvcanary::verify(space, plan, targets, ring_of<Mem>(a.ring), options);
  });
}

void write(const Place& place, const WriteArgs& a) {
  on_place(place, [&](const auto& space, auto memory_space) {
    using Mem = decltype(memory_space);
    WritePlan<Mem> plan;
    plan.write_offsets = plan_vec<Mem>(a.write_offsets);
    plan.write_seed_slot_indices = plan_vec<Mem>(a.write_seed_slot_indices);
    plan.write_num_valid_reqs = Kokkos::View<std::int32_t, Mem>(const_cast<std::int32_t*>(a.write_num_valid_reqs));
    if (a.has_identities) plan.write_identities = plan_vec<Mem>(a.write_identities);
    std::vector<WriteTarget<Mem>> targets;
    for (const TargetArgs& t : a.targets)
      targets.push_back(WriteTarget<Mem>{buffer_of<Mem>(t.buffer), static_cast<KernelKind>(t.kernel_kind),
                                         real_kv_of<Mem>(t.real_kv)});
    WriteCallOptions options;
    options.algorithm = canary_algorithm(a.algorithm);
    if (a.index_int32)
      kvcanary::write(space, plan, tokens_of<Mem, std::int32_t>(a), targets, ring_of<Mem>(a.ring), options);
    else
      kvcanary::write(space, plan, tokens_of<Mem, std::int64_t>(a), targets, ring_of<Mem>(a.ring), options);
  });
}

RingSnapshot read_ring(const Place& place, const RingArgs& r) {
  RingSnapshot snapshot;
  snapshot.capacity = r.capacity;
  snapshot.rows.assign(static_cast<std::size_t>(r.capacity) * 8, 0);
  on_place(place, [&](const auto& space, auto memory_space) {
    using Mem = decltype(memory_space);
    using Host = Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const auto copy = [&](std::int64_t* to, const std::int64_t* from, std::size_t n) {
      Kokkos::deep_copy(space, Host(to, n), Kokkos::View<const std::int64_t*, Mem>(from, n));
    };
    if (r.capacity > 0) copy(snapshot.rows.data(), r.rows, snapshot.rows.size());
    copy(&snapshot.count, r.count, 1);
    copy(&snapshot.slot_run_counter, r.slot_run_counter, 1);
    copy(&snapshot.kernel_run_counter, r.kernel_run_counter, 1);
    space.fence();
  });
  return snapshot;
}

}  // namespace python
}  // namespace kvcanary
