// Strict reading of plan cases (see json_io.hpp for the rules).

#include "json_io.hpp"

#include "cli_error.hpp"
#include "json_text.hpp"
#include "json_values.hpp"

#include <limits>
#include <set>

namespace kvcanary {
namespace cli {

namespace {

using json = nlohmann::json;

Matrix<std::int32_t> to_int32_matrix(const json& value, const std::string& where) {
  return to_matrix<std::int32_t>(value, where, std::numeric_limits<std::int32_t>::min(),
                                 std::numeric_limits<std::int32_t>::max(), "int32");
}

const std::set<std::string>& case_keys() {
  static const std::set<std::string> keys = {
      "req_pool_indices", "prefix_lens", "extend_seq_lens", "req_to_token", "swa_window_size",
      "full_to_swa_index_mapping", "req_to_verify_expected_tokens", "req_to_verify_expected_tokens_valid_lens",
      "kv_token_id_vs_position_offset", "verify_capacity", "write_req_capacity", "req_identities"};
  return keys;
}

}  // namespace

Case parse_plan_case(const json& object, const std::string& prefix, const std::set<std::string>& also_allowed) {
  if (!object.is_object()) reject(prefix.empty() ? "case" : prefix.substr(0, prefix.size() - 1),
                                  "expected a JSON object, got " + describe(object));
  std::set<std::string> known = case_keys();
  known.insert(also_allowed.begin(), also_allowed.end());
  reject_unknown_keys(object, known, prefix);
  const auto name = [&](const char* key) { return prefix + key; };

  Case c;
  reference::Inputs& in = c.inputs;
  in.req_pool_indices = to_vector<std::int64_t>(require(object, "req_pool_indices", prefix), name("req_pool_indices"));
  in.prefix_lens = to_vector<std::int64_t>(require(object, "prefix_lens", prefix), name("prefix_lens"));
  in.extend_seq_lens = to_vector<std::int64_t>(require(object, "extend_seq_lens", prefix), name("extend_seq_lens"));
  Matrix<std::int32_t> rtt = to_int32_matrix(require(object, "req_to_token", prefix), name("req_to_token"));
  in.req_to_token = std::move(rtt.values);
  in.max_reqs = rtt.rows;
  in.max_seq_len = rtt.cols;
  if (const json* v = optional(object, "swa_window_size"))
    in.swa_window_size = to_integer<std::int32_t>(*v, name("swa_window_size"));
  if (const json* v = optional(object, "full_to_swa_index_mapping"))
    in.full_to_swa_index_mapping = to_vector<std::int64_t>(*v, name("full_to_swa_index_mapping"));
  if (const json* v = optional(object, "req_to_verify_expected_tokens")) {
    Matrix<std::int32_t> pool = to_int32_matrix(*v, name("req_to_verify_expected_tokens"));
    in.req_to_verify_expected_tokens = std::move(pool.values);
    in.pool_rows = pool.rows;
    in.pool_cols = pool.cols;
  }
  if (const json* v = optional(object, "req_to_verify_expected_tokens_valid_lens"))
    in.req_to_verify_expected_tokens_valid_lens =
        to_vector<std::int64_t>(*v, name("req_to_verify_expected_tokens_valid_lens"));
  if (const json* v = optional(object, "req_identities"))  // SPEC-CANARY §11.7
    in.req_identities = to_vector<std::int64_t>(*v, name("req_identities"));
  if (const json* v = optional(object, "kv_token_id_vs_position_offset"))
    in.kv_token_id_vs_position_offset = to_integer<std::int32_t>(*v, name("kv_token_id_vs_position_offset"));
  c.verify_capacity = to_integer<std::int64_t>(require(object, "verify_capacity", prefix), name("verify_capacity"));
  c.write_req_capacity =
      to_integer<std::int64_t>(require(object, "write_req_capacity", prefix), name("write_req_capacity"));
  return c;
}

CaseFile parse_case_file(const json& document) {
  if (!document.is_object()) reject("case", "expected a JSON object, got " + describe(document));
  CaseFile file;
  const json* steps = find(document, "steps");
  if (steps == nullptr) {
    file.steps.push_back(parse_plan_case(document, ""));
    return file;
  }
  reject_unknown_keys(document, {"steps"}, "");
  if (!steps->is_array() || steps->empty())
    reject("steps", "expected a non-empty array of cases, got " + describe(*steps));
  file.multi_step = true;
  for (std::size_t i = 0; i < steps->size(); ++i) {
    const std::string prefix = "steps[" + std::to_string(i) + "].";
    file.steps.push_back(parse_plan_case((*steps)[i], prefix));
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
