#ifndef KVCANARY_RUNTIME_IMPL_PUMP_SNAPSHOT_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_SNAPSHOT_HPP

// The report pump's snapshot as one kernel on the engine's instance (PumpSnapshot::Kernel): the counter
// block, and each group's ring rows of the window the host asks for that lie below the group's count
// (final: the ring fills once), written straight into the pinned host copies, which the device can
// address. The host then records one event; the side-stream route takes a device copy, two event calls
// and 1 + groups asynchronous copies for the same snapshot.

#include <kvcanary/runtime/config.hpp>
#include <kvcanary/stages/canary_types.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class Memory, class HostMemory>
struct PumpSnapshotKernel {
  struct Window {
    Kokkos::View<const std::int64_t* [kRingFields], Kokkos::LayoutRight, Memory> rows;
    Kokkos::View<std::int64_t* [kRingFields], Kokkos::LayoutRight, HostMemory> host_rows;
    std::int64_t begin = 0, end = 0;  // the rows the host asks for
    std::int64_t count_index = 0;     // the group's ring count in the block
  };

  Kokkos::View<const std::int64_t*, Memory> block;
  Kokkos::View<std::int64_t*, HostMemory> host_block;
  Window windows[kGroupKinds];
  int num_windows = 0;

  std::int64_t items() const {
    std::int64_t n = static_cast<std::int64_t>(block.extent(0));
    for (int w = 0; w < num_windows; ++w) n += (windows[w].end - windows[w].begin) * kRingFields;
    return n;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t n = static_cast<std::int64_t>(block.extent(0));
    if (i < n) {
      host_block(i) = block(i);
      return;
    }
    std::int64_t j = i - n;
    for (int w = 0; w < num_windows; ++w) {
      const Window& win = windows[w];
      const std::int64_t span = (win.end - win.begin) * kRingFields;
      if (j < span) {
        const std::int64_t row = win.begin + j / kRingFields;
        // A count past int64 is a huge unsigned value: every row of the window is below it.
        if (static_cast<std::uint64_t>(row) < static_cast<std::uint64_t>(block(win.count_index)))
          win.host_rows(row, j % kRingFields) = win.rows(row, j % kRingFields);
        return;
      }
      j -= span;
    }
  }
};

template <class ExecutionSpace, class Memory, class HostMemory>
void launch_pump_snapshot(const ExecutionSpace& space, const PumpSnapshotKernel<Memory, HostMemory>& kernel) {
  Kokkos::parallel_for("kvcanary::pump[snapshot]", Kokkos::RangePolicy<ExecutionSpace>(space, 0, kernel.items()),
                       kernel);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
