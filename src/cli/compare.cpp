#include "compare.hpp"

#include <kvcanary/stages/canary_types.hpp>

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

std::string indexed(const char* field, std::size_t i) { return std::string(field) + "[" + std::to_string(i) + "]"; }

template <class T>
std::string mismatch(const char* field, T library, T expected) {
  return std::string(field) + ": library " + std::to_string(library) + ", reference " + std::to_string(expected);
}

std::optional<std::string> compare_scalar(const char* field, std::int64_t expected, std::int64_t library) {
  if (expected == library) return std::nullopt;
  return mismatch(field, library, expected);
}

std::optional<std::string> compare_array(const char* field, const std::vector<std::int64_t>& expected,
                                         const std::vector<std::int64_t>& library) {
  if (expected.size() != library.size())
    return std::string(field) + " extent: library " + std::to_string(library.size()) + ", reference " +
           std::to_string(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (expected[i] != library[i])
      return mismatch(indexed(field, i).c_str(), library[i], expected[i]);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_difference(const reference::Outputs& e, const reference::Outputs& l) {
  // Scalars first: a wrong count explains the array differences that follow from it.
  for (auto difference : {compare_scalar("verify_num_valid", e.verify_num_valid, l.verify_num_valid),
                          compare_scalar("enable", e.enable, l.enable),
                          compare_scalar("write_num_valid_reqs", e.write_num_valid_reqs, l.write_num_valid_reqs),
                          compare_scalar("input_error_bits", e.input_error_bits, l.input_error_bits),
                          compare_scalar("first_bad_row", e.first_bad_row, l.first_bad_row)})
    if (difference) return difference;
  for (auto difference :
       {compare_array("verify_slot_indices", e.verify_slot_indices, l.verify_slot_indices),
        compare_array("verify_expected_tokens", e.verify_expected_tokens, l.verify_expected_tokens),
        compare_array("verify_expected_positions", e.verify_expected_positions, l.verify_expected_positions),
        compare_array("verify_prev_slot_indices", e.verify_prev_slot_indices, l.verify_prev_slot_indices),
        compare_array("write_offsets", e.write_offsets, l.write_offsets),
        compare_array("write_seed_slot_indices", e.write_seed_slot_indices, l.write_seed_slot_indices)})
    if (difference) return difference;
  // SPEC-CANARY §11.7's identity arrays (both plans hold them or neither: one set of outputs).
  if (e.verify_identities && l.verify_identities)
    if (auto difference = compare_array("verify_identities", *e.verify_identities, *l.verify_identities)) return difference;
  if (e.write_identities && l.write_identities)
    if (auto difference = compare_array("write_identities", *e.write_identities, *l.write_identities)) return difference;
  return std::nullopt;
}

std::optional<std::string> first_canary_difference(const reference::CanaryBuffer& expected_buffer,
                                                   const reference::ViolationRing& expected_ring,
                                                   const reference::CanaryBuffer& library_buffer,
                                                   const reference::ViolationRing& library_ring) {
  const reference::ViolationRing& e = expected_ring;
  const reference::ViolationRing& l = library_ring;
  // The ring's scalars first: a wrong count explains the row differences that follow from it.
  for (auto difference : {compare_scalar("ring.count", e.count, l.count),
                          compare_scalar("ring.capacity", e.capacity, l.capacity),
                          compare_scalar("slot_run_counter", e.slot_run_counter, l.slot_run_counter),
                          compare_scalar("kernel_run_counter", e.kernel_run_counter, l.kernel_run_counter),
                          compare_scalar("ring rows", static_cast<std::int64_t>(e.rows.size()),
                                           static_cast<std::int64_t>(l.rows.size())),
                          compare_scalar("canary_buffer slots", static_cast<std::int64_t>(expected_buffer.size()),
                                           static_cast<std::int64_t>(library_buffer.size()))})
    if (difference) return difference;
  static const char* const fields[] = {"token", "position", "prev_hash", "real_kv_hash"};
  for (std::size_t s = 0; s < expected_buffer.size(); ++s) {
    const reference::Record& a = expected_buffer[s];
    const reference::Record& b = library_buffer[s];
    const std::int64_t expected[] = {a.token, a.position, a.prev_hash, a.real_kv_hash};
    const std::int64_t library[] = {b.token, b.position, b.prev_hash, b.real_kv_hash};
    for (int f = 0; f < kRecordFields; ++f)
      if (expected[f] != library[f])
        return mismatch((indexed("canary_buffer", s) + "." + fields[f]).c_str(), library[f], expected[f]);
  }
  // A full ring keeps the violations that took the first seqs, and their order across threads is unspecified
  // (SPEC-CANARY §1): which rows a parallel backend kept is not the reference's to say.
  if (ring_overflowed(e)) return std::nullopt;
  for (std::size_t r = 0; r < e.rows.size(); ++r)
    for (std::size_t f = 0; f < static_cast<std::size_t>(kRingFields); ++f)
      if (e.rows[r][f] != l.rows[r][f])
        return mismatch((indexed("ring.rows", r) + "[" + std::to_string(f) + "]").c_str(), l.rows[r][f], e.rows[r][f]);
  return std::nullopt;
}

bool ring_overflowed(const reference::ViolationRing& ring) {
  return static_cast<std::uint64_t>(ring.count) > static_cast<std::uint64_t>(ring.capacity);
}

}  // namespace cli
}  // namespace kvcanary
