#include "compare.hpp"

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

template <class T>
std::string mismatch(const char* field, T library, T expected) {
  return std::string(field) + ": library " + std::to_string(library) + ", reference " + std::to_string(expected);
}

std::optional<std::string> compare_scalar(const char* field, std::int32_t expected, std::int32_t library) {
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
      return mismatch((std::string(field) + "[" + std::to_string(i) + "]").c_str(), library[i], expected[i]);
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
  return std::nullopt;
}

}  // namespace cli
}  // namespace kvcanary
