#ifndef KVCANARY_IMPL_ROW_RULES_HPP
#define KVCANARY_IMPL_ROW_RULES_HPP

// The per-row and per-entry rules of SPEC §4, written once and called from every kernel
// (the offsets scan, the portable entries path and the CUDA persistent path).
// DeviceInputs holds unmanaged Views: kernels copy handles without reference counting.

#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
using DeviceVector =
    Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class MemorySpace>
using DeviceMatrix =
    Kokkos::View<const std::int32_t**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// The per-row inputs of one batch row.
struct RowFields {
  std::int64_t pool_row, prefix, extend, valid_len;
};

// What one batch row contributes. A padding or bad row contributes nothing (SPEC §4).
struct RowGeometry {
  std::int32_t error_bits = 0;
  std::int64_t pool_row = 0;  // req_pool_indices[r], valid only when verify_len > 0 or seed_position >= 0
  std::int64_t verify_len = 0;
  std::int64_t write_len = 0;
  std::int64_t seed_position = -1;  // position of the chain seed token, -1 when the seed is -1
};

template <class MemorySpace>
struct DeviceInputs {
  DeviceVector<MemorySpace> req_pool_indices, prefix_lens, extend_seq_lens, lut, valid_lens;
  DeviceMatrix<MemorySpace> req_to_token, pool;
  std::int64_t max_reqs = 0, max_seq_len = 0, lut_len = 0, pool_rows = 0, pool_cols = 0;
  int swa_window_size = 0;
  int token_offset = 0;
  bool has_lut = false, has_pool = false;

  DeviceInputs() = default;
  explicit DeviceInputs(const PlanInputs<MemorySpace>& in)
      : req_pool_indices(in.req_pool_indices.data(), in.req_pool_indices.extent(0)),
        prefix_lens(in.prefix_lens.data(), in.prefix_lens.extent(0)),
        extend_seq_lens(in.extend_seq_lens.data(), in.extend_seq_lens.extent(0)),
        req_to_token(row_major(in.req_to_token)),
        max_reqs(static_cast<std::int64_t>(in.req_to_token.extent(0))),
        max_seq_len(static_cast<std::int64_t>(in.req_to_token.extent(1))),
        swa_window_size(in.swa_window_size),
        token_offset(in.kv_token_id_vs_position_offset),
        has_lut(in.full_to_swa_index_mapping.has_value()),
        has_pool(in.req_to_verify_expected_tokens.has_value()) {
    if (has_lut) {
      const auto& v = *in.full_to_swa_index_mapping;
      lut = DeviceVector<MemorySpace>(v.data(), v.extent(0));
      lut_len = static_cast<std::int64_t>(v.extent(0));
    }
    if (has_pool) {
      const auto& p = *in.req_to_verify_expected_tokens;
      const auto& v = *in.req_to_verify_expected_tokens_valid_lens;
      pool = row_major(p);
      valid_lens = DeviceVector<MemorySpace>(v.data(), v.extent(0));
      pool_rows = static_cast<std::int64_t>(p.extent(0));
      pool_cols = static_cast<std::int64_t>(p.extent(1));
    }
  }

  // A matrix that validate() accepted (column stride 1, rows not overlapping), seen as LayoutRight
  // rows x row_stride: element (r, c) is at data + r * row_stride + c, as in the caller's View. Only
  // columns below the real extent (max_seq_len, pool_cols) are ever read, so a padded row's tail is not.
  static DeviceMatrix<MemorySpace> row_major(const typename PlanInputs<MemorySpace>::template Matrix<std::int32_t>& m) {
    const std::size_t row_stride = m.extent(0) > 1 ? m.stride(0) : m.extent(1);
    return DeviceMatrix<MemorySpace>(m.data(), m.extent(0), row_stride);
  }

  // T of SPEC §4: negative passes through, past the end clamps to the last entry, else the LUT's value.
  KOKKOS_INLINE_FUNCTION std::int64_t translate(std::int32_t slot) const {
    if (!has_lut || slot < 0) return slot;
    return lut(slot < lut_len ? slot : lut_len - 1);
  }

  KOKKOS_INLINE_FUNCTION std::int64_t slot_at(std::int64_t pool_row, std::int64_t position) const {
    return translate(req_to_token(pool_row, position));
  }

  // The four per-row inputs, read together (independent loads). For a padding row the last three are
  // read (they are in bounds) but never used: padding rows are not inspected.
  KOKKOS_INLINE_FUNCTION RowFields row_fields(std::int64_t r) const {
    return {req_pool_indices(r), prefix_lens(r), extend_seq_lens(r), has_pool ? valid_lens(r) : 0};
  }

  // A bound on the verify total the host knows from shapes alone (the totals are on the device): a good row
  // verifies at most min(prefix, window) entries with prefix <= max_seq_len, a bad or padding row none (SPEC
  // §3), so `batch_size` rows of max_seq_len, or of the window when it is shorter. At most `cap` (the capacity:
  // past it the plan overflows and nothing is verified); no overflow for any extents.
  std::int64_t verify_total_bound(std::int64_t batch_size, std::int64_t cap) const {
    const std::int64_t row =
        swa_window_size > 0 && swa_window_size < max_seq_len ? std::int64_t(swa_window_size) : max_seq_len;
    if (batch_size <= 0 || row <= 0 || cap <= 0) return 0;
    return batch_size > cap / row ? cap : (batch_size * row < cap ? batch_size * row : cap);
  }

  // First position of the verify window: max(0, prefix - window) for a sliding-window group, else 0.
  KOKKOS_INLINE_FUNCTION std::int64_t window_start(std::int64_t prefix) const {
    return (swa_window_size > 0 && prefix > swa_window_size) ? prefix - swa_window_size : 0;
  }

  // Branch-free on purpose: every field is used whatever the row, so compilers issue all of a row's
  // loads together instead of sinking them behind the padding test (one memory round trip, not two).
  KOKKOS_INLINE_FUNCTION RowGeometry row_geometry(const RowFields& f) const {
    const std::int64_t rp = f.pool_row;
    const bool active = rp != 0;  // padding rows are not inspected: everything below is masked by it
    const bool bad_index = (rp < 0) | (rp >= max_reqs);
    const bool bad_pool = has_pool & ((rp < 0) | (rp >= pool_rows) | (f.valid_len > pool_cols));
    const std::int32_t bits = (bad_index ? kBadPoolIndex : 0) | (f.prefix > max_seq_len ? kBadPrefixLen : 0) |
                              (bad_pool ? kBadPoolRow : 0) | (f.extend > kMaxExtendLen ? kBadExtendLen : 0);
    // Good rows only from here on: prefix <= max_seq_len, so every position is inside req_to_token's row.
    const bool good = active & (bits == 0);
    const std::int64_t start = window_start(f.prefix);
    RowGeometry g;
    g.error_bits = active ? bits : 0;
    g.pool_row = good ? rp : 0;
    g.verify_len = (good & (f.prefix > start)) ? f.prefix - start : 0;
    g.write_len = (good & (f.extend > 0)) ? f.extend : 0;
    g.seed_position = (good & (f.prefix > 0) & (f.extend > 0)) ? f.prefix - 1 : -1;
    return g;
  }

  KOKKOS_INLINE_FUNCTION RowGeometry row_geometry(std::int64_t r) const { return row_geometry(row_fields(r)); }

  // The seed token's raw slot (before translation), -1 when the row has no seed. Kernels that want
  // the load in flight early issue it with this and translate later; translate passes -1 through.
  KOKKOS_INLINE_FUNCTION std::int32_t seed_raw(const RowGeometry& g) const {
    return g.seed_position >= 0 ? req_to_token(g.pool_row, g.seed_position) : std::int32_t(-1);
  }

  // write_seed_slot_indices[r] of SPEC §4.
  KOKKOS_INLINE_FUNCTION std::int64_t seed_slot(const RowGeometry& g) const { return translate(seed_raw(g)); }

  // Row `pool_row` of the expected-token pool, nullptr without a pool. For a good row pool_row < pool_rows.
  KOKKOS_INLINE_FUNCTION const std::int32_t* pool_row_data(std::int64_t pool_row) const {
    return has_pool ? pool.data() + pool_row * static_cast<std::int64_t>(pool.stride(0)) : nullptr;
  }

  // verify_expected_tokens of SPEC §4 for a good row (so valid_len <= pool_cols), from its pool row's
  // data (pool_row_data; nullptr without a pool): kernels take the row's pointer once per row.
  KOKKOS_INLINE_FUNCTION std::int64_t expected_token(const std::int32_t* pool_row, std::int64_t valid_len,
                                                     std::int64_t position) const {
    const std::int64_t s = position + token_offset;
    return (pool_row != nullptr && s >= 0 && s < valid_len) ? static_cast<std::int64_t>(pool_row[s]) : -1;
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif
