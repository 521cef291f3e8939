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

}  // namespace Impl
}  // namespace kvcanary

#endif
