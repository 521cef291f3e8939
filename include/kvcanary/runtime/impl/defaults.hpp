#ifndef KVCANARY_RUNTIME_IMPL_DEFAULTS_HPP
#define KVCANARY_RUNTIME_IMPL_DEFAULTS_HPP

// What a configuration's Default choices are on a backend: what the H200 measured fastest on CUDA
// (docs/PERFORMANCE.md, "The step on the H200"), the plain one where nothing was measured.

#include <kvcanary/runtime/config.hpp>

#include <Kokkos_Core.hpp>

namespace kvcanary {
namespace Impl {

// One backend trait for every Default: the host backends' (nothing measured: the plain choices), then CUDA's.
template <class ExecutionSpace>
struct RuntimeDefaults {
  static constexpr KvRecords kv_records = KvRecords::Separate;
  // PumpSnapshot::Default. The host backends: the copies (the other routes' device work runs in line there).
  static constexpr PumpSnapshot pump_snapshot = PumpSnapshot::SideStreamCopies;
  // HeadVerify::Default: small_batch_head_verify for a batch of at most small_batch_max_rows rows, head_verify above
  // and for every sweep (cached prefixes: long rows, for which the small-batch route was not measured faster).
  static constexpr std::int64_t small_batch_max_rows = 0;
  static constexpr HeadVerify small_batch_head_verify = HeadVerify::FromPlan;
  static constexpr HeadVerify head_verify = HeadVerify::FromPlan;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct RuntimeDefaults<Kokkos::Cuda> {
  // decode bs 256: 313 µs a step against 350 (a slot's two random gathers in one 64-byte segment); within 5%
  // either way on the other workloads.
  static constexpr KvRecords kv_records = KvRecords::Interleaved;
  // The snapshot in the next forward's head plan: on H100s at f6ace88 +0.9 to +1.2 / +0.6 to +0.8 / -0.2 us a step at
  // decode bs 1 / 64 / 256 against +6.6 / +2.7 / +3.0 for the side-stream copies (docs/PERFORMANCE.md).
  static constexpr PumpSnapshot pump_snapshot = PumpSnapshot::WithNextPlan;
  // The step by route (H100, 0ab9556, interleaved records; docs/PERFORMANCE.md): FromInputs (checked in the plan's
  // kernels, one launch) 9.88 / 11.73 µs at decode bs 1 / 8 against FromInputsAfterPlan's 10.94 / 11.96;
  // FromInputsAfterPlan 26.2 / 268 / 59.5 µs at bs 64 / 256 / 4096 against FromPlan's 33.1 / 341 / 73.9.
  static constexpr std::int64_t small_batch_max_rows = 8;
  static constexpr HeadVerify small_batch_head_verify = HeadVerify::FromInputs;
  static constexpr HeadVerify head_verify = HeadVerify::FromInputsAfterPlan;
};
#endif

template <class ExecutionSpace>
constexpr KvRecords resolve(KvRecords records) {
  return records == KvRecords::Default ? RuntimeDefaults<ExecutionSpace>::kv_records : records;
}

template <class ExecutionSpace>
constexpr PumpSnapshot resolve(PumpSnapshot route) {
  return route == PumpSnapshot::Default ? RuntimeDefaults<ExecutionSpace>::pump_snapshot : route;
}

// The sweep's route (Canary::sweep()).
template <class ExecutionSpace>
constexpr HeadVerify resolve_sweep(HeadVerify route) {
  return route == HeadVerify::Default ? RuntimeDefaults<ExecutionSpace>::head_verify : route;
}

template <class ExecutionSpace>
constexpr HeadVerify resolve(HeadVerify route, std::int64_t batch_rows) {
  using Defaults = RuntimeDefaults<ExecutionSpace>;
  if (route != HeadVerify::Default) return route;
  return batch_rows <= Defaults::small_batch_max_rows ? Defaults::small_batch_head_verify : Defaults::head_verify;
}

}  // namespace Impl
}  // namespace kvcanary

#endif
