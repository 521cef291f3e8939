#ifndef KVCANARY_FREE_HPP
#define KVCANARY_FREE_HPP

// kvcanary::free(): stamp a FREED record into the slots an engine returns to its allocator
// (SPEC-CANARY §11.2), so that a verify that reads one fires at once (bit 128) instead of after
// another request rewrites it.
//
//   free(space, slots, buffer, ring[, options]);   // slots: a rank-1 View of int64 or int32
//
// * A FREED record keeps the slot's position and prev_hash, holds kFreedToken as its token and the owner
//   epoch (options.epoch, a device scalar; 0 when absent) as its real_kv_hash. A write over it is the
//   normal reuse.
// * Negative slots are padding (skipped); a slot >= num_slots gives an OUT_OF_RANGE row.
// * kernel_run_counter += 1 per call; slot_run_counter += the slots stamped.
// * Asynchronous on `space`, with no allocation, no host-device copy and no fence (capturable in a CUDA
//   graph). Host-side errors throw std::invalid_argument before any launch.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/free_portable.hpp>

#include <optional>
#include <type_traits>

namespace kvcanary {

template <class MemorySpace>
struct FreeOptions {
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;  // the tag of OUT_OF_RANGE rows
  // The owner epoch stamped into each FREED record (e.g. the engine's step); a device value, so that a
  // captured graph stamps the current one. Absent: 0.
  std::optional<Kokkos::View<const std::int64_t, MemorySpace>> epoch;
};

template <class ExecutionSpace, class SlotsView, class MemorySpace>
void free(const ExecutionSpace& space, const SlotsView& slots, const CanaryBuffer<MemorySpace>& buffer,
          const ViolationRing<MemorySpace>& ring, const FreeOptions<MemorySpace>& options = FreeOptions<MemorySpace>{}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kvcanary::free: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_view<SlotsView>::value && SlotsView::rank == 1,
                "kvcanary::free: slots must be a rank-1 Kokkos::View");
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  static_assert(std::is_same<Index, std::int64_t>::value || std::is_same<Index, std::int32_t>::value,
                "kvcanary::free: slots hold int64 or int32");
  static_assert(std::is_same<typename SlotsView::memory_space, MemorySpace>::value,
                "kvcanary::free: slots must live in the canary buffer's memory space");
  static_assert(Kokkos::SpaceAccessibility<ExecutionSpace, MemorySpace>::accessible,
                "kvcanary::free: the canary's memory space must be accessible from the execution space");
  constexpr const char* kWhere = "free";
  if (slots.extent(0) > 0 && slots.data() == nullptr) Impl::throw_invalid_in(kWhere, "slots has ", slots.extent(0), " entries but no memory");
  if (options.epoch && options.epoch->data() == nullptr) Impl::throw_invalid_in(kWhere, "options.epoch is not allocated");
  Impl::check_buffer(kWhere, buffer);
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, options.kernel_kind);

  Impl::FreeFunctor<MemorySpace, Index> functor{};
  functor.slots = slots;
  if (options.epoch) functor.epoch = *options.epoch;
  functor.buffer = Impl::DeviceBuffer<MemorySpace>(buffer);
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  Kokkos::Profiling::pushRegion("kvcanary::free");
  Impl::launch_free_portable(space, functor);
  Kokkos::Profiling::popRegion();
}

}  // namespace kvcanary

#endif
