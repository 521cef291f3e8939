#ifndef KVCANARY_IMPL_ENTRIES_PORTABLE_HPP
#define KVCANARY_IMPL_ENTRIES_PORTABLE_HPP

// The portable entries stage: a TeamPolicy whose teams walk tiles of the flat verify array
// (team t takes tiles t, t + league, ...), so a few long rows and thousands of short ones load the
// machine alike. Inside a tile the team walks the rows it overlaps, one row segment at a time. The
// league is sized from a host-known bound on the total (the capacity, or the batch's rows of max_seq_len
// when fewer: DeviceInputs::verify_total_bound()); the real total and `enable` are read on the device,
// so the host never waits for the offsets.

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/entry_search.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace, class MemorySpace>
struct EntriesTeamFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecutionSpace>::member_type;

  DeviceInputs<MemorySpace> in;
  DeviceOutputs<MemorySpace> out;
  std::int64_t batch_size;
  std::int64_t tile_entries;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    if (out.enable() == 0) return;  // overflow: the verify arrays stay untouched
    const std::int64_t total = out.verify_offsets(batch_size);
    const std::int64_t stride = static_cast<std::int64_t>(team.league_size()) * tile_entries;
    for (std::int64_t begin = team.league_rank() * tile_entries; begin < total; begin += stride) {
      const std::int64_t end = begin + tile_entries < total ? begin + tile_entries : total;
      // Walk the rows that overlap the tile; the team's threads share each row's segment, whose row
      // inputs are read once. Empty rows give empty segments.
      std::int64_t row = owner_row(out.verify_offsets, 0, batch_size - 1, begin);
      for (std::int64_t segment = begin; segment < end; ++row) {
        const std::int64_t row_end = out.verify_offsets(row + 1);
        const std::int64_t segment_end = row_end < end ? row_end : end;
        const RowFields fields = in.row_fields(row);
        const std::int64_t row_begin = out.verify_offsets(row);
        if (team.team_size() == 1) {  // host backends: one thread walks the segment in order
          expand_row_run(in, out, fields, row_begin, segment, segment_end);
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, segment, segment_end), [&](const std::int64_t i) {
            store_entry(out, i, entry_values(in, fields, i - row_begin));
          });
        }
        segment = segment_end;
      }
    }
  }
};

template <class ExecutionSpace, class MemorySpace>
void launch_entries_portable(const ExecutionSpace& space, const DeviceInputs<MemorySpace>& in,
                             const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
  using Shape = TeamShape<ExecutionSpace>;
  using Functor = EntriesTeamFunctor<ExecutionSpace, MemorySpace>;
  static_assert(sizeof(Functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  const std::int64_t tile = Shape::tile_entries();
  const std::int64_t tiles = (in.verify_total_bound(batch_size, out.verify_capacity()) + tile - 1) / tile;
  const std::int64_t max_league = Shape::max_league_size(space);
  // At least one team, so that one call is always the same launches (and the same graph nodes).
  const std::int64_t league = tiles < 1 ? 1 : (tiles < max_league ? tiles : max_league);
  Kokkos::parallel_for(
      "kvcanary::plan::entries[team]",
      light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league), Shape::team_size())),
      Functor{in, out, batch_size, tile});
}

}  // namespace Impl
}  // namespace kvcanary

#endif
