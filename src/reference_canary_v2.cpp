// The serial host reference of SPEC-CANARY §11 (canary v2, part 1): the free stage, the cross-check of
// the backend's metadata and the padding-slot check, in the SPEC's own words. The verify checks of
// §11.2-§11.3 live in reference::verify (reference_canary.cpp).
//
// Host-side rules (std::invalid_argument, nothing touched): a ring that breaks §1 (reference_ring.hpp),
// a kernel_kind outside the 12 launch tags; free: none else (any int64 is a slot or padding);
// cross_check: cross_check_types.hpp's rules plus flat sizes (req_to_token holds max_reqs x max_seq_len
// values, block_table bs x max_blocks); padding check: real-KV sources that break §3 for one slot.

#include <kvcanary/stages/canary_shape_checks.hpp>
#include <kvcanary/impl/cross_check_rules.hpp>
#include <kvcanary/impl/hash.hpp>
#include <kvcanary/stages/padding_check.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include "reference_ring.hpp"

#include <algorithm>

namespace kvcanary {
namespace reference {

using detail::check_ring;
using detail::record_violation;
using detail::size_of;
using detail::wrapping_add;

void free(const std::vector<std::int64_t>& slots, std::int64_t epoch, KernelKind kernel_kind, CanaryBuffer& buffer,
          ViolationRing& ring) {
  constexpr const char* function = "free";
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  const std::int64_t num_slots = static_cast<std::int64_t>(buffer.size());
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  std::int64_t stamped = 0;
  for (const std::int64_t slot : slots) {
    if (slot < 0) continue;  // padding
    if (slot >= num_slots) {
      record_violation(ring, kernel_kind, slot, -1, -1, -1, -1, epoch, kOutOfRange);
      continue;
    }
    Record& record = buffer[static_cast<std::size_t>(slot)];
    record = Record{kFreedToken, record.position, record.prev_hash, epoch};
    ++stamped;
  }
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, stamped);
}

void cross_check(const Inputs& inputs, const BackendMetadata& metadata, KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "cross_check";
  const std::int64_t bs = size_of(inputs.req_pool_indices);
  const bool csr = metadata.form == MetadataForm::Csr;
  CrossCheckShapes s;
  s.batch_rows = bs;
  s.prefix_lens = size_of(inputs.prefix_lens);
  s.extend_seq_lens = size_of(inputs.extend_seq_lens);
  s.req_to_token_rows = inputs.max_reqs;
  s.req_to_token_cols = inputs.max_seq_len;
  s.has_lut = inputs.full_to_swa_index_mapping.has_value();
  if (s.has_lut) s.lut_len = size_of(*inputs.full_to_swa_index_mapping);
  s.form = metadata.form;
  s.page_size = metadata.page_size;
  s.kv_indptr = size_of(metadata.kv_indptr);
  s.seq_lens = size_of(metadata.seq_lens);
  s.block_table_rows = bs;  // the flat table's size is checked below
  Impl::check_cross_check_shapes(s);
  if (!Impl::holds(inputs.req_to_token.size(), inputs.max_reqs, inputs.max_seq_len))
    Impl::throw_invalid_in(function, "req_to_token holds ", inputs.req_to_token.size(), " values, not ", inputs.max_reqs,
                           " x ", inputs.max_seq_len);
  if (!csr) Impl::check_flat_block_table(metadata.block_table.size(), bs, metadata.max_blocks);
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);

  const auto at = [](const auto& values, std::int64_t i) { return values[static_cast<std::size_t>(i)]; };
  // T of SPEC §4.
  const auto translate = [&](std::int64_t slot) {
    if (!inputs.full_to_swa_index_mapping || slot < 0) return slot;
    const auto& lut = *inputs.full_to_swa_index_mapping;
    return at(lut, std::min<std::int64_t>(slot, size_of(lut) - 1));
  };
  const auto row = [&](std::int64_t slot, std::int64_t position, std::int64_t r, std::int64_t rp, std::int64_t have,
                       std::int64_t want, std::int64_t bits) {
    record_violation(ring, kernel_kind, slot, position, r, rp, have, want, bits);
  };

  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  const std::int64_t ps = metadata.page_size;
  std::int64_t compared = 0;
  for (std::int64_t r = 0; r < bs; ++r) {
    const std::int64_t rp = at(inputs.req_pool_indices, r);
    const std::int64_t prefix = at(inputs.prefix_lens, r);
    if (!Impl::cross_check_row(rp, prefix, inputs.max_reqs, inputs.max_seq_len)) continue;
    const std::int64_t length = Impl::cross_check_length(prefix, at(inputs.extend_seq_lens, r), inputs.max_seq_len);
    const std::int64_t m = Impl::pages_for(length, ps);
    std::int64_t first = 0, n = 0;
    if (csr) {
      const std::int64_t a = at(metadata.kv_indptr, r), b = at(metadata.kv_indptr, r + 1);
      if (a < 0 || a > b || b > size_of(metadata.kv_indices)) {
        row(-1, -1, r, rp, a, b, kOutOfRange);
        continue;
      }
      first = a;
      n = b - a;
      if (n != m) row(-1, length, r, rp, n, m, kMetadataMismatch);
    } else {
      const std::int64_t seq_len = at(metadata.seq_lens, r);
      n = Impl::pages_for(seq_len, ps);
      if (n > metadata.max_blocks) {
        row(-1, seq_len, r, rp, n, metadata.max_blocks, kOutOfRange);
        n = metadata.max_blocks;
      }
      if (seq_len != length) row(-1, length, r, rp, seq_len, length, kMetadataMismatch);
    }
    for (std::int64_t j = 0; j < std::min(n, m); ++j) {
      const std::int64_t position = j * ps;
      const std::int64_t slot = translate(at(inputs.req_to_token, rp * inputs.max_seq_len + position));
      const std::int64_t want = Impl::page_of(slot, ps);
      const std::int64_t have = csr ? at(metadata.kv_indices, first + j) : at(metadata.block_table, r * metadata.max_blocks + j);
      if (have != want) row(slot, position, r, rp, have, want, kMetadataMismatch);
    }
    compared += std::min(n, m);
  }
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, compared);
}

std::int64_t padding_fold_of_zeros(const RealKv& real_kv) {
  std::vector<std::int64_t> read_bytes;
  for (const RealKvSource& source : real_kv.sources) read_bytes.push_back(source.read_bytes);
  return Impl::fold_of_zero_bytes(real_kv.mode, read_bytes.data(), read_bytes.size());
}

void check_padding_slot(const RealKv& real_kv, std::int64_t expected_fold, KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "check_padding_slot";
  check_real_kv(real_kv, 1, function);
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  if (real_kv.mode == RealKvMode::None || real_kv.sources.empty()) return;
  const std::int64_t actual = fold(real_kv, 0);
  if (actual != expected_fold) record_violation(ring, kernel_kind, 0, -1, -1, -1, actual, expected_fold, kPaddingSlotKv);
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, 1);
}

}  // namespace reference
}  // namespace kvcanary
