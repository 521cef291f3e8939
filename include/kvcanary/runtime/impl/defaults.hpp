#ifndef KVCANARY_RUNTIME_IMPL_DEFAULTS_HPP
#define KVCANARY_RUNTIME_IMPL_DEFAULTS_HPP

// What a configuration's Default choice is on a backend: the layout the H200 measured fastest on CUDA
// (docs/PERFORMANCE.md, "The step on the H200"), the plain one where nothing was measured.

#include <kvcanary/runtime/config.hpp>

#include <Kokkos_Core.hpp>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
struct DefaultKvRecords {
  static constexpr KvRecords value = KvRecords::Separate;
};

#ifdef KOKKOS_ENABLE_CUDA
// decode bs 256: 313 µs a step against 350 (a slot's two random gathers in one 64-byte segment); within 5%
// either way on the other workloads.
template <>
struct DefaultKvRecords<Kokkos::Cuda> {
  static constexpr KvRecords value = KvRecords::Interleaved;
};
#endif

template <class ExecutionSpace>
constexpr KvRecords resolve(KvRecords records) {
  return records == KvRecords::Default ? DefaultKvRecords<ExecutionSpace>::value : records;
}

// HeadVerify::Default: FromInputs for a batch of at most `from_inputs_max_rows` rows, FromPlan above.
template <class ExecutionSpace>
struct DefaultHeadVerify {
  static constexpr std::int64_t from_inputs_max_rows = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
// The step with FromInputs against FromPlan (H200, f4166df): decode bs 1 9.13 against 10.45 µs, bs 8 11.38
// against 11.76; bs 64 40.78 against 31.83 and every larger batch slower too.
template <>
struct DefaultHeadVerify<Kokkos::Cuda> {
  static constexpr std::int64_t from_inputs_max_rows = 8;
};
#endif

template <class ExecutionSpace>
constexpr HeadVerify resolve(HeadVerify route, std::int64_t batch_rows) {
  if (route != HeadVerify::Default) return route;
  return batch_rows <= DefaultHeadVerify<ExecutionSpace>::from_inputs_max_rows ? HeadVerify::FromInputs
                                                                               : HeadVerify::FromPlan;
}

}  // namespace Impl
}  // namespace kvcanary

#endif
