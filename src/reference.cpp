// The serial host reference of SPEC §4: one loop over the rows, in the SPEC's own words.

#include <kvcanary/tools/reference_plan.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace kvcanary {
namespace reference {

Outputs make_outputs(std::int64_t verify_capacity, std::int64_t write_req_capacity, std::int64_t fill) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(verify_capacity, 0));
  const auto w = static_cast<std::size_t>(std::max<std::int64_t>(write_req_capacity, 0));
  Outputs o;
  o.verify_slot_indices.assign(n, fill);
  o.verify_expected_tokens.assign(n, fill);
  o.verify_expected_positions.assign(n, fill);
  o.verify_prev_slot_indices.assign(n, fill);
  o.write_offsets.assign(w + 1, fill);
  o.write_seed_slot_indices.assign(w, fill);
  const auto scalar = static_cast<std::int32_t>(fill);
  o.verify_num_valid = o.enable = o.write_num_valid_reqs = o.input_error_bits = o.first_bad_row = scalar;
  return o;
}

Outputs verify_plan_of(const std::vector<std::array<std::int64_t, 4>>& entries) {
  Outputs plan = make_outputs(static_cast<std::int64_t>(entries.size()), 0, 0);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    plan.verify_slot_indices[i] = entries[i][0];
    plan.verify_expected_positions[i] = entries[i][1];
    plan.verify_prev_slot_indices[i] = entries[i][2];
    plan.verify_expected_tokens[i] = entries[i][3];
  }
  plan.verify_num_valid = static_cast<std::int32_t>(entries.size());
  plan.enable = 1;
  return plan;
}

PlanShapes shapes_of(const Inputs& in, const Outputs& out) {
  const auto size = [](const auto& v) { return static_cast<std::int64_t>(v.size()); };
  PlanShapes s;
  s.req_pool_indices = size(in.req_pool_indices);
  s.prefix_lens = size(in.prefix_lens);
  s.extend_seq_lens = size(in.extend_seq_lens);
  s.req_to_token_rows = in.max_reqs;
  s.req_to_token_cols = in.max_seq_len;
  s.swa_window_size = in.swa_window_size;
  s.has_lut = in.full_to_swa_index_mapping.has_value();
  if (s.has_lut) s.lut_len = size(*in.full_to_swa_index_mapping);
  s.has_pool = in.req_to_verify_expected_tokens.has_value();
  s.has_valid_lens = in.req_to_verify_expected_tokens_valid_lens.has_value();
  if (s.has_valid_lens) s.valid_lens = size(*in.req_to_verify_expected_tokens_valid_lens);
  s.verify_extents[0] = size(out.verify_slot_indices);
  s.verify_extents[1] = size(out.verify_expected_tokens);
  s.verify_extents[2] = size(out.verify_expected_positions);
  s.verify_extents[3] = size(out.verify_prev_slot_indices);
  s.write_req_capacity = size(out.write_seed_slot_indices);
  s.write_offsets = size(out.write_offsets);
  Impl::set_identity_shapes(s, in.req_identities, out.verify_identities, out.write_identities, size);
  return s;
}

// The flat matrices must hold what their declared shapes say (a host-side fault of the caller).
void check_flat_sizes(const Inputs& in) {
  if (!Impl::holds(in.req_to_token.size(), in.max_reqs, in.max_seq_len))
    Impl::throw_invalid("req_to_token holds ", in.req_to_token.size(), " values, not ", in.max_reqs, " x ",
                        in.max_seq_len);
  if (in.req_to_verify_expected_tokens &&
      !Impl::holds(in.req_to_verify_expected_tokens->size(), in.pool_rows, in.pool_cols))
    Impl::throw_invalid("req_to_verify_expected_tokens holds ", in.req_to_verify_expected_tokens->size(),
                        " values, not ", in.pool_rows, " x ", in.pool_cols);
}

void plan(const Inputs& in, Outputs& out) {
  check_plan_shapes(shapes_of(in, out));
  check_flat_sizes(in);

  const std::int64_t bs = static_cast<std::int64_t>(in.req_pool_indices.size());
  const std::int64_t verify_capacity = static_cast<std::int64_t>(out.verify_slot_indices.size());
  const std::int64_t write_req_capacity = static_cast<std::int64_t>(out.write_seed_slot_indices.size());
  const bool has_pool = in.req_to_verify_expected_tokens.has_value();
  const std::vector<std::int64_t>* lut =
      in.full_to_swa_index_mapping ? &*in.full_to_swa_index_mapping : nullptr;

  // T: identity without a LUT; negative passes through; >= lut_len clamps to lut_len - 1.
  const auto T = [&](std::int32_t value) -> std::int64_t {
    if (lut == nullptr || value < 0) return value;
    const std::int64_t lut_len = static_cast<std::int64_t>(lut->size());
    return (*lut)[static_cast<std::size_t>(std::min<std::int64_t>(value, lut_len - 1))];
  };
  const auto rtt = [&](std::int64_t rp, std::int64_t pos) {
    return in.req_to_token[static_cast<std::size_t>(rp * in.max_seq_len + pos)];
  };

  struct Row {
    bool good_active = false;
    std::int64_t window_start = 0, verify_len = 0, write_len = 0;
  };
  std::vector<Row> rows(static_cast<std::size_t>(bs));
  std::int32_t error_bits = 0;
  std::int32_t first_bad_row = -1;
  for (std::int64_t r = 0; r < bs; ++r) {
    const std::int64_t rp = in.req_pool_indices[r];
    if (rp == 0) continue;  // padding: nothing else of the row is read
    std::int32_t bits = 0;
    if (rp < 0 || rp >= in.max_reqs) bits |= 1;
    if (in.prefix_lens[r] > in.max_seq_len) bits |= 2;
    if (has_pool && (rp < 0 || rp >= in.pool_rows ||
                     (*in.req_to_verify_expected_tokens_valid_lens)[r] > in.pool_cols))
      bits |= 4;
    if (in.extend_seq_lens[r] > std::numeric_limits<std::int32_t>::max()) bits |= 8;
    if (bits != 0) {
      error_bits |= bits;
      if (first_bad_row < 0) first_bad_row = static_cast<std::int32_t>(r);
      continue;
    }
    Row& row = rows[r];
    row.good_active = true;
    // prefix <= max_seq_len here but may be any negative value: every difference below is taken only
    // when its result is positive, so none can overflow.
    const std::int64_t prefix = in.prefix_lens[r];
    const std::int64_t window = in.swa_window_size;
    row.window_start = window > 0 && prefix > window ? prefix - window : 0;
    row.verify_len = prefix > row.window_start ? prefix - row.window_start : 0;
    row.write_len = std::max<std::int64_t>(0, in.extend_seq_lens[r]);
  }

  std::int64_t total = 0;
  for (const Row& row : rows) total += row.verify_len;
  const bool overflow = total > verify_capacity;
  out.verify_num_valid = static_cast<std::int32_t>(overflow ? verify_capacity : total);
  out.enable = overflow ? 0 : 1;

  if (!overflow) {
    std::int64_t i = 0;
    for (std::int64_t r = 0; r < bs; ++r) {
      const Row& row = rows[r];
      const std::int64_t rp = in.req_pool_indices[r];
      for (std::int64_t j = 0; j < row.verify_len; ++j, ++i) {
        const std::int64_t pos = row.window_start + j;
        out.verify_expected_positions[i] = pos;
        out.verify_slot_indices[i] = T(rtt(rp, pos));
        out.verify_prev_slot_indices[i] = pos > 0 ? T(rtt(rp, pos - 1)) : -1;
        std::int64_t token = -1;
        if (has_pool) {
          const std::int64_t s = pos + in.kv_token_id_vs_position_offset;
          const std::int64_t valid_len = (*in.req_to_verify_expected_tokens_valid_lens)[r];
          if (s >= 0 && s < valid_len)
            token = (*in.req_to_verify_expected_tokens)[static_cast<std::size_t>(rp * in.pool_cols + s)];
        }
        out.verify_expected_tokens[i] = token;
        if (in.req_identities) (*out.verify_identities)[i] = (*in.req_identities)[r];  // SPEC-CANARY §11.7
      }
    }
  }

  // write_offsets: exclusive prefix sum over [0, bs), the total at [bs], zeros after. A good row
  // writes at most 2^31 - 1 tokens (bit 8) and bs < 2^31, so the sum stays below 2^62.
  std::int64_t running = 0;
  for (std::int64_t r = 0; r < bs; ++r) {
    out.write_offsets[r] = running;
    running += rows[r].write_len;
  }
  out.write_offsets[bs] = running;
  for (std::int64_t r = bs + 1; r <= write_req_capacity; ++r) out.write_offsets[r] = 0;

  for (std::int64_t r = 0; r < bs; ++r) {
    const Row& row = rows[r];
    const std::int64_t prefix = in.prefix_lens[r];
    const bool seeded = row.good_active && prefix > 0 && in.extend_seq_lens[r] > 0;
    out.write_seed_slot_indices[r] = seeded ? T(rtt(in.req_pool_indices[r], prefix - 1)) : -1;
    if (in.req_identities) (*out.write_identities)[r] = (*in.req_identities)[r];  // SPEC-CANARY §11.7
  }
  out.write_num_valid_reqs = static_cast<std::int32_t>(bs);
  out.input_error_bits = error_bits;
  out.first_bad_row = first_bad_row;
}

}  // namespace reference
}  // namespace kvcanary
