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
  // HeadVerify::Default: FromInputs for a batch of at most this many rows, FromPlan above.
  static constexpr std::int64_t head_verify_from_inputs_max_rows = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct RuntimeDefaults<Kokkos::Cuda> {
  // decode bs 256: 313 µs a step against 350 (a slot's two random gathers in one 64-byte segment); within 5%
  // either way on the other workloads.
  static constexpr KvRecords kv_records = KvRecords::Interleaved;
  // The step with FromInputs against FromPlan (H200, f4166df): decode bs 1 9.13 against 10.45 µs, bs 8 11.38
  // against 11.76; bs 64 40.78 against 31.83 and every larger batch slower too.
  static constexpr std::int64_t head_verify_from_inputs_max_rows = 8;
};
#endif

template <class ExecutionSpace>
constexpr KvRecords resolve(KvRecords records) {
  return records == KvRecords::Default ? RuntimeDefaults<ExecutionSpace>::kv_records : records;
}

template <class ExecutionSpace>
constexpr HeadVerify resolve(HeadVerify route, std::int64_t batch_rows) {
  if (route != HeadVerify::Default) return route;
  return batch_rows <= RuntimeDefaults<ExecutionSpace>::head_verify_from_inputs_max_rows ? HeadVerify::FromInputs
                                                                                         : HeadVerify::FromPlan;
}

}  // namespace Impl
}  // namespace kvcanary

#endif
