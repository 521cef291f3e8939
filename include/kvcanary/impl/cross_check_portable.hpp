#ifndef KVCANARY_IMPL_CROSS_CHECK_PORTABLE_HPP
#define KVCANARY_IMPL_CROSS_CHECK_PORTABLE_HPP

// The cross-check of SPEC-CANARY §11.4 as one Kokkos team kernel: a team per batch row, its threads over
// the row's entries, one atomic per team for slot_run_counter.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/canary_device.hpp>
#include <kvcanary/impl/cross_check_rules.hpp>
#include <kvcanary/impl/row_rules.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace, class Index>
struct CrossCheckFunctor {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  DeviceInputs<MemorySpace> in;  // the plan's inputs: req_pool_indices, prefix/extend lengths, req_to_token, LUT
  bool csr = true;
  Kokkos::View<const Index*, MemorySpace, Unmanaged> kv_indptr, kv_indices, seq_lens;
  Kokkos::View<const Index**, Kokkos::LayoutStride, MemorySpace, Unmanaged> block_table;
  std::int64_t page_size = 1;
  std::int64_t batch_rows = 0;
  DeviceRing<MemorySpace> ring;
  std::int64_t kind = 0;

  // What the backend's metadata says of batch row r: its entries [first, first + n) (dense: first 0,
  // n clamped to max_blocks) and the length it claims (CSR: n; dense: seq_lens[r]). Reads only.
  struct RowSpan {
    std::int64_t first = 0, n = 0, claimed = 0, a = 0, b = 0;
    bool out_of_range = false;
  };
  KOKKOS_INLINE_FUNCTION RowSpan span(std::int64_t r) const {
    RowSpan s;
    if (csr) {
      s.a = kv_indptr(r);
      s.b = kv_indptr(r + 1);
      s.out_of_range = s.a < 0 || s.a > s.b || s.b > static_cast<std::int64_t>(kv_indices.extent(0));
      s.first = s.a;
      s.n = s.out_of_range ? 0 : s.b - s.a;
      s.claimed = s.n;
      return s;
    }
    s.claimed = seq_lens(r);
    s.a = pages_for(s.claimed, page_size);  // the blocks seq_lens asks for
    s.b = static_cast<std::int64_t>(block_table.extent(1));
    s.out_of_range = s.a > s.b;
    s.n = s.out_of_range ? s.b : s.a;
    return s;
  }

  // The row-level rows of SPEC-CANARY §11.4 (out of range, length); false when the row is skipped.
  KOKKOS_INLINE_FUNCTION bool row_rows(std::int64_t r, std::int64_t rp, std::int64_t length, std::int64_t expected,
                                       const RowSpan& s) const {
    if (s.out_of_range) {
      if (csr) ring.push(kind, -1, -1, r, rp, s.a, s.b, kOutOfRange);
      else ring.push(kind, -1, s.claimed, r, rp, s.a, s.b, kOutOfRange);
      if (csr) return false;
    }
    if (csr ? s.n != expected : s.claimed != length)
      ring.push(kind, -1, length, r, rp, csr ? s.n : s.claimed, csr ? expected : length, kMetadataMismatch);
    return true;
  }

  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t r = team.league_rank();
    std::int64_t compared = 0;
    if (r < batch_rows) {
      const RowFields f = in.row_fields(r);
      if (cross_check_row(f.pool_row, f.prefix, in.max_reqs, in.max_seq_len)) {
        const std::int64_t rp = f.pool_row;
        const std::int64_t length = cross_check_length(f.prefix, f.extend, in.max_seq_len);
        const std::int64_t expected = pages_for(length, page_size);
        const RowSpan sp = span(r);
        Kokkos::single(Kokkos::PerTeam(team), [&]() { row_rows(r, rp, length, expected, sp); });
        if (!(csr && sp.out_of_range)) {
          compared = sp.n < expected ? sp.n : expected;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, std::int64_t(0), compared), [&](const std::int64_t j) {
            const std::int64_t position = j * page_size;
            const std::int64_t slot = in.slot_at(rp, position);
            const std::int64_t want = page_of(slot, page_size);
            const std::int64_t have = csr ? static_cast<std::int64_t>(kv_indices(sp.first + j))
                                          : static_cast<std::int64_t>(block_table(r, j));
            if (have != want) ring.push(kind, slot, position, r, rp, have, want, kMetadataMismatch);
          });
        }
      }
    }
    Kokkos::single(Kokkos::PerTeam(team), [&]() { ring.add_runs(compared, r == 0 ? 1 : 0); });
  }
};

template <class ExecutionSpace, class MemorySpace, class Index>
void launch_cross_check_portable(const ExecutionSpace& space, const CrossCheckFunctor<MemorySpace, Index>& functor) {
  static_assert(sizeof(functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  const std::int64_t league = functor.batch_rows > 0 ? functor.batch_rows : 1;
  Kokkos::parallel_for(
      "kvcanary::cross_check[portable]",
      light_weight(Kokkos::TeamPolicy<ExecutionSpace>(space, static_cast<int>(league), TeamShape<ExecutionSpace>::team_size())),
      functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
