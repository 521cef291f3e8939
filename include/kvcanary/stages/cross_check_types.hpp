#ifndef KVCANARY_CROSS_CHECK_TYPES_HPP
#define KVCANARY_CROSS_CHECK_TYPES_HPP

// The attention backend's own page metadata (SPEC-CANARY §11.4) and the host-side rules of a
// cross-check call, shared by cross_check() and reference::cross_check() so both reject the same calls
// with the same messages. Shapes only: no device data is read.

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <cstddef>
#include <cstdint>

namespace kvcanary {

// CSR: kv_indptr [bs + 1] and kv_indices [nnz] (FlashInfer). Dense: block_table [bs, max_blocks] and
// seq_lens [bs] (FlashAttention, vLLM). page_size 1: entries are slots; > 1: page ids (slot / page_size).
enum class MetadataForm { Csr, Dense };

struct CrossCheckShapes {
  std::int64_t batch_rows = 0, prefix_lens = 0, extend_seq_lens = 0;
  std::int64_t req_to_token_rows = 0, req_to_token_cols = 0;
  bool has_lut = false;
  std::int64_t lut_len = 0;
  MetadataForm form = MetadataForm::Csr;
  std::int64_t page_size = 1;
  std::int64_t kv_indptr = 0;                                 // CSR
  std::int64_t block_table_rows = 0, seq_lens = 0;            // dense
};

namespace Impl {

inline void check_cross_check_shapes(const CrossCheckShapes& s) {
  constexpr const char* kWhere = "cross_check";
  const std::int64_t bs = s.batch_rows;
  if (s.prefix_lens != bs || s.extend_seq_lens != bs)
    throw_invalid_in(kWhere, "prefix_lens and extend_seq_lens have ", s.prefix_lens, " and ", s.extend_seq_lens,
                     " entries but req_pool_indices has ", bs);
  if (s.req_to_token_rows < 1 || s.req_to_token_cols < 1)
    throw_invalid_in(kWhere, "req_to_token is ", s.req_to_token_rows, " x ", s.req_to_token_cols,
                     ", must have at least one row and one column");
  if (s.has_lut && s.lut_len < 1) throw_invalid_in(kWhere, "full_to_swa_index_mapping is empty (0 entries)");
  if (s.page_size < 1) throw_invalid_in(kWhere, "page_size is ", s.page_size, ", must be >= 1");
  if (s.form == MetadataForm::Csr && s.kv_indptr != bs + 1)
    throw_invalid_in(kWhere, "kv_indptr has ", s.kv_indptr, " entries, must be batch rows + 1 = ", bs + 1);
  if (s.form == MetadataForm::Dense && (s.block_table_rows != bs || s.seq_lens != bs))
    throw_invalid_in(kWhere, "block_table has ", s.block_table_rows, " rows and seq_lens ", s.seq_lens,
                     " entries, must both be the batch's ", bs);
}

// A dense block table held as a flat row-major vector (the reference, the host bridges).
inline void check_flat_block_table(std::size_t values, std::int64_t batch_rows, std::int64_t max_blocks) {
  if (max_blocks < 0 || !holds(values, batch_rows, max_blocks))
    throw_invalid_in("cross_check", "block_table holds ", values, " values, not ", batch_rows, " x ", max_blocks);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
