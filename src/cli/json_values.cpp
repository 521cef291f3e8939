#include "json_values.hpp"

namespace kvcanary {
namespace cli {

using json = nlohmann::json;

std::string describe(const json& value) {
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* type = value.is_number_float() ? "float" : value.type_name();
  return text + " (" + type + ")";
}

void reject(const std::string& where, const std::string& problem) { throw RejectedInput(where + ": " + problem); }

std::int64_t to_integer_in(const json& value, const std::string& where, std::int64_t lo, std::int64_t hi,
                           const char* type) {
  // nlohmann stores integers past int64 as unsigned and past uint64 as float: both land below.
  if (value.is_number_unsigned()) {
    const std::uint64_t u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) reject(where, std::to_string(u) + " is out of " + type + " range");
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) {
    const std::int64_t v = value.get<std::int64_t>();
    if (v < lo || v > hi) reject(where, std::to_string(v) + " is out of " + type + " range");
    return v;
  }
  reject(where, std::string("expected an ") + type + " integer, got " + describe(value));
}

std::size_t check_rows(const json& value, const std::string& where, std::int64_t cols, const char* row_what) {
  if (!value.is_array()) reject(where, std::string("expected an array of rows (") + row_what + "), got " + describe(value));
  const auto row_name = [&](std::size_t r) { return where + "[" + std::to_string(r) + "]"; };
  const std::size_t expected = cols >= 0 ? static_cast<std::size_t>(cols) : value.empty() ? 0 : value[0].size();
  for (std::size_t r = 0; r < value.size(); ++r) {
    const json& row = value[r];
    if (!row.is_array()) reject(row_name(r), std::string("expected a row (") + row_what + "), got " + describe(row));
    if (row.size() == expected) continue;
    if (cols >= 0)
      reject(row_name(r), "has " + std::to_string(row.size()) + " entries, must have " + std::to_string(cols) + " (" +
                              row_what + ")");
    reject(row_name(r), "has " + std::to_string(row.size()) + " entries but " + where + "[0] has " +
                            std::to_string(expected) + " (rows must be of equal length)");
  }
  return expected;
}

const json* find(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const json& require(const json& object, const char* key, const std::string& prefix) {
  const json* value = find(object, key);
  if (value == nullptr) reject(prefix + key, "required key is missing");
  return *value;
}

const json* optional(const json& object, const char* key) {
  const json* value = find(object, key);
  return value == nullptr || value->is_null() ? nullptr : value;
}

void reject_unknown_keys(const json& object, const std::set<std::string>& known, const std::string& prefix) {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (!key.empty() && key[0] == '_') continue;
    if (known.count(key) == 0)
      reject(prefix + key, "unknown key (keys starting with '_' are comments; see kvcanary --help)");
  }
}

}  // namespace cli
}  // namespace kvcanary
