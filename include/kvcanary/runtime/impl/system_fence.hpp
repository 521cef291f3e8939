#ifndef KVCANARY_RUNTIME_IMPL_SYSTEM_FENCE_HPP
#define KVCANARY_RUNTIME_IMPL_SYSTEM_FENCE_HPP

// A memory fence that orders a kernel's stores as the HOST sees them, for the in-graph pump's mailbox
// (PumpSnapshot::InGraph, runtime/impl/pump_in_graph.hpp): the slot's data must be visible to the host
// before its sequence word is. On CUDA that takes __threadfence_system() (a __threadfence() orders only
// what other device threads see); the host backends share the host's memory model, where
// Kokkos::memory_fence() is a full fence.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
struct SystemFence {
  KOKKOS_INLINE_FUNCTION static void apply() { Kokkos::memory_fence(); }
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct SystemFence<Kokkos::Cuda> {
  KOKKOS_INLINE_FUNCTION static void apply() {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#else
    Kokkos::memory_fence();
#endif
  }
};
#endif

// How many forwards the newest snapshot may trail the forwards end_step() was told of, at a health
// check, before the check calls it a forward that ran without the canary: none where the passes ran before
// end_step() returned (the host backends); on CUDA the device may still be a few forwards behind the host
// (an engine that queues the next step before it waits), which flush() (after a fence) checks exactly.
template <class ExecutionSpace>
struct PumpLagSlack {
  static constexpr std::int64_t value = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct PumpLagSlack<Kokkos::Cuda> {
  static constexpr std::int64_t value = 16;
};
#endif

}  // namespace Impl
}  // namespace kvcanary

#endif
