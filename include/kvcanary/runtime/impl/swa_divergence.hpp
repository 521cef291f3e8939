#ifndef KVCANARY_RUNTIME_IMPL_SWA_DIVERGENCE_HPP
#define KVCANARY_RUNTIME_IMPL_SWA_DIVERGENCE_HPP

// The SWA divergence counts of a batch (the original's swa_divergence.py): over the live page-table
// entries (pool row of each batch row, positions below prefix + extend), how many full slots the LUT maps
// to another, non-zero SWA slot, and how many it maps to 0 (out of the window). Reduced into device
// scalars: asynchronous, no fence. Bad rows and slots (outside the tables) are skipped, never read.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace, class MemorySpace>
struct SwaDivergenceCount {
  using value_type = std::int64_t;
  using Member = typename Kokkos::TeamPolicy<ExecutionSpace>::member_type;
  using Vector = Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>;
  using Table = Kokkos::View<const std::int32_t**, Kokkos::LayoutStride, MemorySpace>;
  Vector req_pool_indices, prefix_lens, extend_seq_lens, lut;
  Table req_to_token;
  bool out_of_window = false;  // count LUT == 0 instead of LUT != slot

  KOKKOS_FUNCTION void operator()(const Member& team, std::int64_t& total) const {
    const std::int64_t r = team.league_rank();
    const std::int64_t row = req_pool_indices(r);
    const auto rows = static_cast<std::int64_t>(req_to_token.extent(0));
    const auto cols = static_cast<std::int64_t>(req_to_token.extent(1));
    if (row < 0 || row >= rows) return;
    std::int64_t len = prefix_lens(r) + extend_seq_lens(r);
    if (prefix_lens(r) < 0 || extend_seq_lens(r) < 0) return;
    if (len > cols || len < 0) len = cols;
    std::int64_t sum = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, len),
        [&](std::int64_t p, std::int64_t& part) {
          const std::int64_t slot = req_to_token(row, p);
          if (slot < 0 || slot >= static_cast<std::int64_t>(lut.extent(0))) return;
          const std::int64_t swa = lut(slot);
          part += out_of_window ? (swa == 0) : (swa != slot && swa != 0);
        },
        sum);
    Kokkos::single(Kokkos::PerTeam(team), [&] { total += sum; });
  }
};

template <class ExecutionSpace, class MemorySpace, class Result>
void launch_swa_divergence(const ExecutionSpace& space,
                           const Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>& req_pool_indices,
                           const Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>& prefix_lens,
                           const Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>& extend_seq_lens,
                           const Kokkos::View<const std::int32_t**, Kokkos::LayoutStride, MemorySpace>& req_to_token,
                           const Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>& lut,
                           const Result& divergence, const Result& out_of_window) {
  const auto bs = static_cast<std::int64_t>(req_pool_indices.extent(0));
  SwaDivergenceCount<ExecutionSpace, MemorySpace> functor{req_pool_indices, prefix_lens, extend_seq_lens, lut, req_to_token, false};
  const Kokkos::TeamPolicy<ExecutionSpace> policy(space, static_cast<int>(bs), Kokkos::AUTO);
  Kokkos::parallel_reduce("kvcanary::Canary::swa_divergence", policy, functor, divergence);
  functor.out_of_window = true;
  Kokkos::parallel_reduce("kvcanary::Canary::swa_out_of_window", policy, functor, out_of_window);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
