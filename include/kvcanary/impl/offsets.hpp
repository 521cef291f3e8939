#ifndef KVCANARY_IMPL_OFFSETS_HPP
#define KVCANARY_IMPL_OFFSETS_HPP

// The offsets stage: one parallel_scan over [0, write_req_capacity] that writes, in its final pass,
//   rows r < bs : verify_offsets[r], write_offsets[r], write_seed_slot_indices[r]
//   row bs      : the totals (verify_offsets[bs], write_offsets[bs]) and every scalar of the plan
//   rows > bs   : write_offsets[r] = 0 (SPEC §4: the whole write_offsets array is rewritten)
// The scanned value also carries the OR of the error bits and the smallest bad row, so the status
// needs neither atomics nor a zeroing launch, and no total ever leaves the device.

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/row_rules.hpp>

#include <cstdint>
#include <limits>

namespace kvcanary {
namespace Impl {

struct OffsetsScanValue {
  std::int64_t verify_total;
  std::uint64_t write_total;  // < 2^62 (bit 8 bounds every good row); unsigned all the same: no input can make UB
  std::int32_t error_bits;
  std::int32_t first_bad_row;  // kNoBadRow when none
};

constexpr std::int32_t kNoBadRow = std::numeric_limits<std::int32_t>::max();

// first_bad_row of SPEC §3: -1 when no row was bad.
KOKKOS_INLINE_FUNCTION std::int32_t bad_row_or_none(std::int32_t first_bad_row) {
  return first_bad_row == kNoBadRow ? -1 : first_bad_row;
}

// The verify pass's four int32 scalars a plan writes (VerifyPlan's, then PlanStatus's).
struct VerifyScalars {
  std::int32_t enable, num_valid, input_error_bits, first_bad_row;
};

// Row bs of the offsets: the totals and every scalar of the plan (SPEC §4). Returns the verify scalars.
template <class MemorySpace>
KOKKOS_INLINE_FUNCTION VerifyScalars write_totals(const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size,
                                                  std::int64_t verify_total, std::uint64_t write_total,
                                                  std::int32_t error_bits, std::int32_t first_bad_row) {
  const std::int64_t capacity = out.verify_capacity();
  const bool overflow = verify_total > capacity;
  const VerifyScalars scalars{overflow ? 0 : 1, static_cast<std::int32_t>(overflow ? capacity : verify_total),
                              error_bits, first_bad_row};
  out.verify_offsets(batch_size) = verify_total;
  out.write_offsets(batch_size) = static_cast<std::int64_t>(write_total);
  out.verify_num_valid() = scalars.num_valid;
  out.enable() = scalars.enable;
  out.write_num_valid_reqs() = static_cast<std::int32_t>(batch_size);
  out.input_error_bits() = error_bits;
  out.first_bad_row() = first_bad_row;
  return scalars;
}

template <class MemorySpace>
struct OffsetsScanFunctor {
  using value_type = OffsetsScanValue;

  DeviceInputs<MemorySpace> in;
  DeviceOutputs<MemorySpace> out;
  std::int64_t batch_size;

  KOKKOS_INLINE_FUNCTION void init(value_type& v) const { v = {0, 0u, 0, kNoBadRow}; }

  // Kokkos 3.x joins through volatile references, 4.x and later through plain ones: one body for both
  // (each signature a whole function, so that formatters see balanced braces).
  template <class Dst, class Src>
  KOKKOS_INLINE_FUNCTION static void add_into(Dst& dst, const Src& src) {
    dst.verify_total += src.verify_total;
    dst.write_total += src.write_total;
    dst.error_bits |= src.error_bits;
    if (src.first_bad_row < dst.first_bad_row) dst.first_bad_row = src.first_bad_row;
  }

#if KOKKOS_VERSION < 40000
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const {
    add_into(dst, src);
  }
#else
  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const {
    add_into(dst, src);
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t r, value_type& acc, const bool final) const {
    if (r < batch_size) {
      const RowGeometry g = in.row_geometry(r);
      if (final) {
        out.verify_offsets(r) = acc.verify_total;
        out.write_offsets(r) = static_cast<std::int64_t>(acc.write_total);
        out.write_seed_slot_indices(r) = in.seed_slot(g);
      }
      acc.verify_total += g.verify_len;
      acc.write_total += static_cast<std::uint64_t>(g.write_len);
      if (g.error_bits != 0) {
        acc.error_bits |= g.error_bits;
        if (r < acc.first_bad_row) acc.first_bad_row = static_cast<std::int32_t>(r);
      }
    } else if (final) {
      if (r == batch_size)
        finish(acc);
      else
        out.write_offsets(r) = 0;
    }
  }

  KOKKOS_INLINE_FUNCTION void finish(const value_type& totals) const {
    write_totals(out, batch_size, totals.verify_total, totals.write_total, totals.error_bits,
                 bad_row_or_none(totals.first_bad_row));
  }
};

template <class ExecutionSpace, class MemorySpace>
void launch_offsets(const ExecutionSpace& space, const DeviceInputs<MemorySpace>& in,
                    const DeviceOutputs<MemorySpace>& out, std::int64_t batch_size) {
  using Functor = OffsetsScanFunctor<MemorySpace>;
  static_assert(sizeof(Functor) < kMaxKernelArgumentBytes, "kvcanary: kernel arguments must stay small");
  const std::int64_t end = out.write_req_capacity() + 1;  // >= batch_size + 1, checked on the host
  Kokkos::parallel_scan(
      "kvcanary::plan::offsets",
      light_weight(Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, end)),
      Functor{in, out, batch_size});
}

}  // namespace Impl
}  // namespace kvcanary

#endif
