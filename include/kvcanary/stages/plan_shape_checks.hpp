#ifndef KVCANARY_SHAPE_CHECKS_HPP
#define KVCANARY_SHAPE_CHECKS_HPP

// The host-side errors of SPEC §4, on shapes alone (never on device data). The library's validate()
// and the host reference both describe their arguments as PlanShapes and call check_plan_shapes(),
// so both reject exactly the same calls with exactly the same messages.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kvcanary {

struct PlanShapes {
  std::int64_t req_pool_indices = 0;  // bs
  std::int64_t prefix_lens = 0;
  std::int64_t extend_seq_lens = 0;
  std::int64_t req_to_token_rows = 0;
  std::int64_t req_to_token_cols = 0;
  std::int64_t swa_window_size = 0;
  bool has_lut = false;
  std::int64_t lut_len = 0;
  bool has_pool = false;
  bool has_valid_lens = false;
  std::int64_t valid_lens = 0;
  // extents of verify_slot_indices, verify_expected_tokens, verify_expected_positions,
  // verify_prev_slot_indices; the first is verify_capacity
  std::int64_t verify_extents[4] = {0, 0, 0, 0};
  std::int64_t write_req_capacity = 0;                                     // extent of write_seed_slot_indices
  std::int64_t write_offsets = 1;                                          // extent of write_offsets
  std::int64_t max_batch_size = std::numeric_limits<std::int64_t>::max();  // of the workspace
  // SPEC-CANARY §11.7: req_identities (an input) and the plan's verify_identities / write_identities.
  bool has_identities = false, has_verify_identities = false, has_write_identities = false;
  std::int64_t identities = 0, verify_identities = 0, write_identities = 0;
};

namespace Impl {

// std::invalid_argument("kvcanary::<function>: <parts...>").
template <class... Parts>
[[noreturn]] void throw_invalid_in(const char* function, const Parts&... parts) {
  std::ostringstream message;
  message << "kvcanary::" << function << ": ";
  (message << ... << parts);
  throw std::invalid_argument(message.str());
}

template <class... Parts>
[[noreturn]] void throw_invalid(const Parts&... parts) {
  throw_invalid_in("plan", parts...);
}

// The extent an allocation helper makes of its `argument`, which must be >= 0.
inline std::size_t allocation_size(const char* function, const char* argument, std::int64_t value) {
  if (value < 0) throw_invalid_in(function, argument, " is ", value, ", must be >= 0");
  return static_cast<std::size_t>(value);
}

// Whether a flat array of `size` values is exactly rows x cols, without forming a product that overflows.
inline bool holds(std::size_t size, std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0) return false;
  if (rows == 0 || cols == 0) return size == 0;
  const auto n = static_cast<std::uint64_t>(size);
  return n % static_cast<std::uint64_t>(cols) == 0 &&
         n / static_cast<std::uint64_t>(cols) == static_cast<std::uint64_t>(rows);
}

// The identity fields of PlanShapes (SPEC-CANARY §11.7) from req_identities and the plans' two arrays, each
// a std::optional of an array whose length `size` gives (Views on the device, vectors in the reference).
template <class Identities, class VerifyIdentities, class WriteIdentities, class Size>
void set_identity_shapes(PlanShapes& s, const Identities& identities, const VerifyIdentities& verify_identities,
                         const WriteIdentities& write_identities, const Size& size) {
  s.has_identities = identities.has_value();
  s.has_verify_identities = verify_identities.has_value();
  s.has_write_identities = write_identities.has_value();
  if (s.has_identities) s.identities = size(*identities);
  if (s.has_verify_identities) s.verify_identities = size(*verify_identities);
  if (s.has_write_identities) s.write_identities = size(*write_identities);
}

}  // namespace Impl

// Throws std::invalid_argument naming the argument and the values; returns normally when the call is valid.
inline void check_plan_shapes(const PlanShapes& s) {
  using Impl::throw_invalid;
  const std::int64_t bs = s.req_pool_indices;
  if (s.prefix_lens != bs) throw_invalid("prefix_lens has ", s.prefix_lens, " entries but req_pool_indices has ", bs);
  if (s.extend_seq_lens != bs)
    throw_invalid("extend_seq_lens has ", s.extend_seq_lens, " entries but req_pool_indices has ", bs);
  if (s.has_pool && !s.has_valid_lens)
    throw_invalid("req_to_verify_expected_tokens_valid_lens is missing but req_to_verify_expected_tokens is given");
  if (s.has_pool && s.valid_lens != bs)
    throw_invalid("req_to_verify_expected_tokens_valid_lens has ", s.valid_lens, " entries but req_pool_indices has ",
                  bs);
  if (s.swa_window_size < 0) throw_invalid("swa_window_size is ", s.swa_window_size, ", must be >= 0");
  if (s.swa_window_size > 0 && !s.has_lut)
    throw_invalid("swa_window_size is ", s.swa_window_size,
                  " but full_to_swa_index_mapping is missing (a sliding-window group needs a LUT)");
  if (s.has_lut && s.lut_len == 0) throw_invalid("full_to_swa_index_mapping is empty (0 entries)");
  if (s.req_to_token_rows == 0 || s.req_to_token_cols == 0)
    throw_invalid("req_to_token is ", s.req_to_token_rows, " x ", s.req_to_token_cols,
                  ", must have at least one row and one column");
  for (int k = 1; k < 4; ++k) {
    static const char* const names[4] = {"verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                                         "verify_prev_slot_indices"};
    if (s.verify_extents[k] != s.verify_extents[0])
      throw_invalid(names[k], " has ", s.verify_extents[k], " entries but ", names[0], " has ", s.verify_extents[0],
                    " (the four verify arrays must have one extent)");
  }
  if (s.verify_extents[0] < 0) throw_invalid("verify_capacity is ", s.verify_extents[0], ", must be >= 0");
  // verify_num_valid is an int32 (SPEC §3), so a capacity past its range could not be reported.
  if (s.verify_extents[0] > std::numeric_limits<std::int32_t>::max())
    throw_invalid("verify_capacity is ", s.verify_extents[0], ", must fit in int32 (verify_num_valid is int32)");
  if (s.write_req_capacity < 0) throw_invalid("write_req_capacity is ", s.write_req_capacity, ", must be >= 0");
  if (s.write_req_capacity < bs)
    throw_invalid("write_req_capacity is ", s.write_req_capacity, " but the batch has ", bs, " rows");
  // Compared as write_offsets - 1 (an extent, >= 0): write_req_capacity + 1 could overflow.
  if (s.write_offsets - 1 != s.write_req_capacity)
    throw_invalid("write_offsets has ", s.write_offsets, " entries, must be write_req_capacity + 1 = ",
                  static_cast<std::uint64_t>(s.write_req_capacity) + 1u);
  // write_num_valid_reqs and first_bad_row are int32 (SPEC §3).
  if (bs > std::numeric_limits<std::int32_t>::max())
    throw_invalid("the batch has ", bs, " rows, must fit in int32 (write_num_valid_reqs is int32)");
  if (bs > s.max_batch_size)
    throw_invalid("the batch has ", bs, " rows but the workspace was allocated for ", s.max_batch_size);
  // A good row verifies at most max_seq_len entries, so bs x max_seq_len bounds the verify total,
  // which the kernels and the reference sum in int64.
  if (bs > 0 && s.req_to_token_cols > std::numeric_limits<std::int64_t>::max() / bs)
    throw_invalid("the batch has ", bs, " rows and req_to_token ", s.req_to_token_cols,
                  " columns: the verify total could overflow int64");
  // SPEC-CANARY §11.7: identities flow from req_identities into both plans, or not at all.
  if (s.has_identities && s.identities != bs)
    throw_invalid("req_identities has ", s.identities, " entries but req_pool_indices has ", bs);
  if (s.has_identities != s.has_verify_identities || s.has_identities != s.has_write_identities)
    throw_invalid(s.has_identities ? "req_identities is given but the plans hold no "
                                   : "req_identities is missing but the plans hold ",
                  s.has_verify_identities != s.has_identities ? "verify_identities" : "write_identities",
                  " (a plan allocated with identities takes them every step, and only such a plan does)");
  if (s.has_verify_identities && s.verify_identities != s.verify_extents[0])
    throw_invalid("verify_identities has ", s.verify_identities, " entries but verify_slot_indices has ",
                  s.verify_extents[0]);
  if (s.has_write_identities && s.write_identities != s.write_req_capacity)
    throw_invalid("write_identities has ", s.write_identities, " entries but write_seed_slot_indices has ",
                  s.write_req_capacity);
}

}  // namespace kvcanary

#endif
