// Strict reading of plan cases (see json_io.hpp for the rules).

#include "json_io.hpp"

#include "cli_error.hpp"
#include "json_text.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

namespace kvcanary {
namespace cli {

namespace {

using json = nlohmann::json;

// A short, one-line rendering of an offending value: its JSON text (cut) and its type.
std::string describe(const json& value) {
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* type = value.is_number_float() ? "float" : value.type_name();
  return text + " (" + type + ")";
}

[[noreturn]] void reject(const std::string& where, const std::string& problem) {
  throw RejectedInput(where + ": " + problem);
}

template <class Int>
Int to_integer(const json& value, const std::string& where) {
  static_assert(std::is_signed<Int>::value, "SPEC types are signed");
  constexpr auto lo = std::numeric_limits<Int>::min();
  constexpr auto hi = std::numeric_limits<Int>::max();
  const char* type = sizeof(Int) == 8 ? "int64" : "int32";
  // nlohmann stores integers past int64 as unsigned and past uint64 as float: both land below.
  if (value.is_number_unsigned()) {
    const std::uint64_t u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) reject(where, std::to_string(u) + " is out of " + type + " range");
    return static_cast<Int>(u);
  }
  if (value.is_number_integer()) {
    const std::int64_t v = value.get<std::int64_t>();
    if (v < static_cast<std::int64_t>(lo) || v > static_cast<std::int64_t>(hi))
      reject(where, std::to_string(v) + " is out of " + type + " range");
    return static_cast<Int>(v);
  }
  reject(where, std::string("expected an ") + type + " integer, got " + describe(value));
}

template <class Int>
std::vector<Int> to_vector(const json& value, const std::string& where) {
  if (!value.is_array()) reject(where, "expected an array of integers, got " + describe(value));
  std::vector<Int> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    out.push_back(to_integer<Int>(value[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

// A row-major matrix from an array of equal-length rows.
struct Matrix {
  std::vector<std::int32_t> values;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

Matrix to_matrix(const json& value, const std::string& where) {
  if (!value.is_array()) reject(where, "expected an array of rows (arrays of integers), got " + describe(value));
  const auto row_name = [&](std::size_t r) { return where + "[" + std::to_string(r) + "]"; };
  // Every row's type and length first: rows x cols is reserved only once it is what the text holds.
  for (std::size_t r = 0; r < value.size(); ++r) {
    const json& row = value[r];
    if (!row.is_array()) reject(row_name(r), "expected a row (an array of integers), got " + describe(row));
    if (row.size() != value[0].size())
      reject(row_name(r), "has " + std::to_string(row.size()) + " entries but " + where + "[0] has " +
                              std::to_string(value[0].size()) + " (rows must be of equal length)");
  }
  Matrix m;
  m.rows = static_cast<std::int64_t>(value.size());
  m.cols = value.empty() ? 0 : static_cast<std::int64_t>(value[0].size());
  m.values.reserve(value.size() * static_cast<std::size_t>(m.cols));
  for (std::size_t r = 0; r < value.size(); ++r)
    for (std::size_t c = 0; c < value[r].size(); ++c)
      m.values.push_back(to_integer<std::int32_t>(value[r][c], row_name(r) + "[" + std::to_string(c) + "]"));
  return m;
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

// Missing and null both mean "absent" (SPEC §5).
const json* optional(const json& object, const char* key) {
  const json* value = find(object, key);
  return value == nullptr || value->is_null() ? nullptr : value;
}

const std::set<std::string>& case_keys() {
  static const std::set<std::string> keys = {
      "req_pool_indices", "prefix_lens", "extend_seq_lens", "req_to_token", "swa_window_size",
      "full_to_swa_index_mapping", "req_to_verify_expected_tokens", "req_to_verify_expected_tokens_valid_lens",
      "kv_token_id_vs_position_offset", "verify_capacity", "write_req_capacity"};
  return keys;
}

// `prefix` is "" for a plain case and "steps[i]." inside a multi-step file.
void reject_unknown_keys(const json& object, const std::set<std::string>& known, const std::string& prefix) {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (!key.empty() && key[0] == '_') continue;
    if (known.count(key) == 0)
      reject(prefix + key, "unknown key (keys starting with '_' are comments; see kvcanary-plan --help)");
  }
}

Case parse_case(const json& object, const std::string& prefix) {
  if (!object.is_object()) reject(prefix.empty() ? "case" : prefix.substr(0, prefix.size() - 1),
                                  "expected a JSON object, got " + describe(object));
  reject_unknown_keys(object, case_keys(), prefix);
  const auto name = [&](const char* key) { return prefix + key; };

  Case c;
  reference::Inputs& in = c.inputs;
  in.req_pool_indices = to_vector<std::int64_t>(require(object, "req_pool_indices", prefix), name("req_pool_indices"));
  in.prefix_lens = to_vector<std::int64_t>(require(object, "prefix_lens", prefix), name("prefix_lens"));
  in.extend_seq_lens = to_vector<std::int64_t>(require(object, "extend_seq_lens", prefix), name("extend_seq_lens"));
  Matrix rtt = to_matrix(require(object, "req_to_token", prefix), name("req_to_token"));
  in.req_to_token = std::move(rtt.values);
  in.max_reqs = rtt.rows;
  in.max_seq_len = rtt.cols;
  if (const json* v = optional(object, "swa_window_size"))
    in.swa_window_size = to_integer<std::int32_t>(*v, name("swa_window_size"));
  if (const json* v = optional(object, "full_to_swa_index_mapping"))
    in.full_to_swa_index_mapping = to_vector<std::int64_t>(*v, name("full_to_swa_index_mapping"));
  if (const json* v = optional(object, "req_to_verify_expected_tokens")) {
    Matrix pool = to_matrix(*v, name("req_to_verify_expected_tokens"));
    in.req_to_verify_expected_tokens = std::move(pool.values);
    in.pool_rows = pool.rows;
    in.pool_cols = pool.cols;
  }
  if (const json* v = optional(object, "req_to_verify_expected_tokens_valid_lens"))
    in.req_to_verify_expected_tokens_valid_lens =
        to_vector<std::int64_t>(*v, name("req_to_verify_expected_tokens_valid_lens"));
  if (const json* v = optional(object, "kv_token_id_vs_position_offset"))
    in.kv_token_id_vs_position_offset = to_integer<std::int32_t>(*v, name("kv_token_id_vs_position_offset"));
  c.verify_capacity = to_integer<std::int64_t>(require(object, "verify_capacity", prefix), name("verify_capacity"));
  c.write_req_capacity =
      to_integer<std::int64_t>(require(object, "write_req_capacity", prefix), name("write_req_capacity"));
  return c;
}

}  // namespace

CaseFile parse_case_file(const json& document) {
  if (!document.is_object()) reject("case", "expected a JSON object, got " + describe(document));
  CaseFile file;
  const json* steps = find(document, "steps");
  if (steps == nullptr) {
    file.steps.push_back(parse_case(document, ""));
    return file;
  }
  reject_unknown_keys(document, {"steps"}, "");
  if (!steps->is_array() || steps->empty())
    reject("steps", "expected a non-empty array of cases, got " + describe(*steps));
  file.multi_step = true;
  for (std::size_t i = 0; i < steps->size(); ++i) {
    const std::string prefix = "steps[" + std::to_string(i) + "].";
    file.steps.push_back(parse_case((*steps)[i], prefix));
    const Case& first = file.steps.front();
    const Case& step = file.steps.back();
    // The steps share one set of output buffers, hence one pair of capacities.
    if (step.verify_capacity != first.verify_capacity)
      reject(prefix + "verify_capacity", std::to_string(step.verify_capacity) + " differs from steps[0]'s " +
                                             std::to_string(first.verify_capacity) + " (steps share their outputs)");
    if (step.write_req_capacity != first.write_req_capacity)
      reject(prefix + "write_req_capacity", std::to_string(step.write_req_capacity) + " differs from steps[0]'s " +
                                                std::to_string(first.write_req_capacity) +
                                                " (steps share their outputs)");
  }
  return file;
}

CaseFile read_case_file(const std::string& path) {
  const JsonDocument document = read_json_file(path);
  try {
    return parse_case_file(document.root());
  } catch (const RejectedInput& e) {
    throw RejectedInput(path + ": " + e.what());
  }
}

}  // namespace cli
}  // namespace kvcanary
