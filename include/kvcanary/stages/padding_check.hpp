#ifndef KVCANARY_PADDING_CHECK_HPP
#define KVCANARY_PADDING_CHECK_HPP

// kvcanary::check_padding_slot(): whether the padding slot's real KV bytes are still the ones the engine
// declares (SPEC-CANARY §11.5), e.g. all zero: CUDA-graph padding rows that write NaN K/V into slot 0
// (SGLang PR #32477) change its fingerprint. Meant to run with the sweep; one work item.
//
//   check_padding_slot(space, real_kv, padding_fold_of_zeros(real_kv), ring[, kernel_kind]);
//
// * Real-KV mode NONE (or no source): kernel_run_counter += 1, nothing else. Otherwise fold(0) of §3 is
//   compared with expected_fold: a difference is one row (0, -1, -1, -1, fold(0), expected_fold, 1024);
//   slot_run_counter += 1.
// * Asynchronous, no allocation, no copy, no fence; host-side errors throw std::invalid_argument.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/impl/hash.hpp>

namespace kvcanary {

namespace Impl {

// fold(slot) of SPEC-CANARY §3 for a slot whose bytes are all zero: it depends on the mode and each
// source's read_bytes only.
inline std::int64_t fold_of_zero_bytes(RealKvMode mode, const std::int64_t* read_bytes, std::size_t sources) {
  if (mode == RealKvMode::None || sources == 0) return 0;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < sources; ++k) {
    const std::int64_t eff = mode == RealKvMode::Partial ? 16 : read_bytes[k];
    std::uint64_t acc = 0;
    for (std::int64_t o = 0; o < eff; o += 16) acc = splitmix64(splitmix64(acc));
    total = splitmix64(total ^ acc);
  }
  return as_int64(total);
}

template <class MemorySpace>
struct PaddingCheckFunctor {
  DeviceRealKv real_kv;
  std::int64_t expected_fold = 0;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t) const {
    if (!real_kv.enabled()) {
      ring.add_runs(0, 1);
      return;
    }
    const std::int64_t fold = real_kv.fold(0);
    if (fold != expected_fold) ring.push(kind, 0, -1, -1, -1, fold, expected_fold, kPaddingSlotKv);
    ring.add_runs(1, 1);
  }
};

}  // namespace Impl

// The fold of a padding slot whose bytes are all zero, for these sources and mode (host only).
template <class MemorySpace>
std::int64_t padding_fold_of_zeros(const RealKv<MemorySpace>& real_kv) {
  std::int64_t read_bytes[kMaxRealKvSources] = {};
  const std::size_t n = real_kv.sources.size() < kMaxRealKvSources ? real_kv.sources.size() : kMaxRealKvSources;
  for (std::size_t k = 0; k < n; ++k) read_bytes[k] = real_kv.sources[k].read_bytes;
  return Impl::fold_of_zero_bytes(real_kv.mode, read_bytes, n);
}

template <class ExecutionSpace, class MemorySpace>
void check_padding_slot(const ExecutionSpace& space, const RealKv<MemorySpace>& real_kv, std::int64_t expected_fold,
                        const ViolationRing<MemorySpace>& ring, KernelKind kernel_kind = KernelKind::SWEEP_K_FULL) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::check_padding_slot: the first argument must be a Kokkos execution space instance");
  constexpr const char* kWhere = "check_padding_slot";
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, kernel_kind);
  Impl::PaddingCheckFunctor<MemorySpace> functor{};
  functor.real_kv = Impl::device_real_kv(kWhere, real_kv, 1);  // the sources must hold slot 0
  functor.expected_fold = expected_fold;
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(kernel_kind);
  Kokkos::parallel_for("kvcanary::check_padding_slot[portable]",
                       Impl::light_weight(Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, 1)),
                       functor);
}

}  // namespace kvcanary

#endif
