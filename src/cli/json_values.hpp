#ifndef KVCANARY_CLI_JSON_VALUES_HPP
#define KVCANARY_CLI_JSON_VALUES_HPP

// Strict conversion of parsed JSON values into the integers, arrays and matrices of a case (plan cases:
// json_io.hpp; canary cases: canary_case.hpp). Every function throws RejectedInput "WHERE: problem", where
// WHERE names the key and index at fault (e.g. "canary_buffer[3][1]").

#include "cli_error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace kvcanary {
namespace cli {

// A short, one-line rendering of an offending value: its JSON text (cut) and its type.
std::string describe(const nlohmann::json& value);

[[noreturn]] void reject(const std::string& where, const std::string& problem);

// A JSON integer in [lo, hi] (floats, strings, booleans and integers outside are rejected); `type` names
// the range in the message ("int64", "int32", "byte").
std::int64_t to_integer_in(const nlohmann::json& value, const std::string& where, std::int64_t lo, std::int64_t hi,
                           const char* type);

template <class Int>
Int to_integer(const nlohmann::json& value, const std::string& where) {
  static_assert(std::is_signed<Int>::value, "SPEC types are signed");
  return static_cast<Int>(to_integer_in(value, where, std::numeric_limits<Int>::min(),
                                        std::numeric_limits<Int>::max(), sizeof(Int) == 8 ? "int64" : "int32"));
}

template <class Int>
std::vector<Int> to_vector(const nlohmann::json& value, const std::string& where) {
  if (!value.is_array()) reject(where, "expected an array of integers, got " + describe(value));
  std::vector<Int> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    out.push_back(to_integer<Int>(value[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

// A row-major matrix from an array of equal-length rows.
template <class T>
struct Matrix {
  std::vector<T> values;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// Checks that `value` is an array of rows, each an array of equal length (`cols` entries when given, and
// `row_what` says what a row is in the message), before anything is reserved; returns the row length.
std::size_t check_rows(const nlohmann::json& value, const std::string& where, std::int64_t cols = -1,
                       const char* row_what = "an array of integers");

// Each cell converted as to_integer_in(cell, where[r][c], lo, hi, type).
template <class T>
Matrix<T> to_matrix(const nlohmann::json& value, const std::string& where, std::int64_t lo, std::int64_t hi,
                    const char* type, std::int64_t cols = -1, const char* row_what = "an array of integers") {
  Matrix<T> m;
  m.cols = static_cast<std::int64_t>(check_rows(value, where, cols, row_what));
  m.rows = static_cast<std::int64_t>(value.size());
  m.values.reserve(value.size() * static_cast<std::size_t>(m.cols));  // what the text holds
  for (std::size_t r = 0; r < value.size(); ++r)
    for (std::size_t c = 0; c < value[r].size(); ++c)
      m.values.push_back(static_cast<T>(to_integer_in(
          value[r][c], where + "[" + std::to_string(r) + "][" + std::to_string(c) + "]", lo, hi, type)));
  return m;
}

const nlohmann::json* find(const nlohmann::json& object, const char* key);

// The value of a required key; `prefix` goes before the key's name in the message.
const nlohmann::json& require(const nlohmann::json& object, const char* key, const std::string& prefix = "");

// Missing and null both mean "absent" (SPEC §5): null, or the value.
const nlohmann::json* optional(const nlohmann::json& object, const char* key);

// Keys outside `known` are rejected, except those starting with '_' (comments, test expectations).
void reject_unknown_keys(const nlohmann::json& object, const std::set<std::string>& known, const std::string& prefix);

}  // namespace cli
}  // namespace kvcanary

#endif
