// Strict reading of verify, write and step cases (see canary_case.hpp for the rules).

#include "canary_case.hpp"

#include "cli_error.hpp"
#include "json_text.hpp"
#include "json_values.hpp"
#include "limits.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace kvcanary {
namespace cli {

namespace {

using json = nlohmann::json;
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

const std::set<std::string> kVerifyKeys = {"canary_buffer", "verify_plan", "check_expected_token", "kernel_kind",
                                           "ring_capacity", "real_kv", "check_slot_zero", "check_freed"};
const std::set<std::string> kWriteKeys = {"canary_buffer", "write_plan", "input_ids", "positions", "out_cache_loc",
                                          "expected_input_ids", "expected_positions", "chain_position_assert",
                                          "kernel_kind", "ring_capacity", "real_kv"};
// With the plan keys (json_io.cpp).
const std::set<std::string> kStepKeys = {"canary_buffer", "input_ids", "positions", "out_cache_loc",
                                         "expected_input_ids", "expected_positions", "chain_position_assert",
                                         "kernel_kind", "ring_capacity", "real_kv", "check_expected_token",
                                         "check_slot_zero", "check_freed"};

// An array's length against a limit, before its values are converted.
void check_length(const json& value, const char* where, std::int64_t limit, const char* what) {
  if (value.is_array() && static_cast<std::int64_t>(value.size()) > limit)
    reject(where, "has " + std::to_string(value.size()) + " " + what + ", above kvcanary's limit of " +
                      std::to_string(limit));
}

reference::CanaryBuffer to_canary_buffer(const json& value) {
  constexpr const char* where = "canary_buffer";
  check_length(value, where, kMaxCanarySlots, "slots");
  check_rows(value, where, kRecordFields, "a record [token, position, prev_hash, real_kv_hash]");
  reference::CanaryBuffer buffer;
  buffer.reserve(value.size());
  for (std::size_t s = 0; s < value.size(); ++s) {
    const auto field = [&](int f) {
      return to_integer<std::int64_t>(value[s][static_cast<std::size_t>(f)],
                                      std::string(where) + "[" + std::to_string(s) + "][" + std::to_string(f) + "]");
    };
    buffer.push_back({field(kToken), field(kPosition), field(kPrevHash), field(kRealKvHash)});
  }
  return buffer;
}

std::vector<std::int64_t> to_tokens(const json& object, const char* key, bool required) {
  const json* value = required ? &require(object, key) : optional(object, key);
  if (value == nullptr) return {};
  check_length(*value, key, kMaxTokens, "entries");
  return to_vector<std::int64_t>(*value, key);
}

const json& require_object(const json& object, const char* key) {
  const json& value = require(object, key);
  if (!value.is_object()) reject(key, "expected an object, got " + describe(value));
  return value;
}

void parse_verify_plan(const json& object, reference::Outputs& plan) {
  const json& v = require_object(object, "verify_plan");
  const std::string prefix = "verify_plan.";
  reject_unknown_keys(v, {"verify_num_valid", "enable", "verify_slot_indices", "verify_expected_tokens",
                          "verify_expected_positions", "verify_prev_slot_indices", "verify_identities"}, prefix);
  plan.verify_num_valid = to_integer<std::int32_t>(require(v, "verify_num_valid", prefix), prefix + "verify_num_valid");
  plan.enable = to_integer<std::int32_t>(require(v, "enable", prefix), prefix + "enable");
  const auto array = [&](const char* key, std::vector<std::int64_t>& out) {
    out = to_vector<std::int64_t>(require(v, key, prefix), prefix + key);
    if (out.size() != plan.verify_slot_indices.size())
      reject(prefix + key, "has " + std::to_string(out.size()) + " entries but verify_slot_indices has " +
                               std::to_string(plan.verify_slot_indices.size()) +
                               " (the four arrays' length is the capacity)");
  };
  array("verify_slot_indices", plan.verify_slot_indices);
  array("verify_expected_tokens", plan.verify_expected_tokens);
  array("verify_expected_positions", plan.verify_expected_positions);
  array("verify_prev_slot_indices", plan.verify_prev_slot_indices);
  if (optional(v, "verify_identities") != nullptr) array("verify_identities", plan.verify_identities.emplace());  // §11.7
}

void parse_write_plan(const json& object, reference::Outputs& plan) {
  const json& w = require_object(object, "write_plan");
  const std::string prefix = "write_plan.";
  reject_unknown_keys(w, {"write_offsets", "write_seed_slot_indices", "write_num_valid_reqs", "write_identities"},
                      prefix);
  const json& offsets = require(w, "write_offsets", prefix);
  // write_offsets holds write_req_capacity + 1 entries; the limit is the plan's (limits.hpp).
  check_length(offsets, "write_plan.write_offsets", kMaxWriteReqCapacity + 1, "entries");
  plan.write_offsets = to_vector<std::int64_t>(offsets, prefix + "write_offsets");
  if (plan.write_offsets.empty())
    reject(prefix + "write_offsets", "is empty, must hold write_req_capacity + 1 entries");
  const auto capacity = static_cast<std::int64_t>(plan.write_offsets.size()) - 1;
  plan.write_num_valid_reqs =
      to_integer<std::int32_t>(require(w, "write_num_valid_reqs", prefix), prefix + "write_num_valid_reqs");
  plan.write_seed_slot_indices =
      to_vector<std::int64_t>(require(w, "write_seed_slot_indices", prefix), prefix + "write_seed_slot_indices");
  const auto seeds = static_cast<std::int64_t>(plan.write_seed_slot_indices.size());
  const std::int64_t needed = std::clamp<std::int64_t>(plan.write_num_valid_reqs, 0, capacity);
  if (seeds > capacity)
    reject(prefix + "write_seed_slot_indices", "has " + std::to_string(seeds) + " entries, more than write_req_capacity " +
                                                   std::to_string(capacity) + " (write_offsets has capacity + 1)");
  if (seeds < needed)
    reject(prefix + "write_seed_slot_indices",
           "has " + std::to_string(seeds) + " entries, fewer than min(write_num_valid_reqs, write_req_capacity) = " +
               std::to_string(needed));
  plan.write_seed_slot_indices.resize(static_cast<std::size_t>(capacity), -1);  // never read
  if (const json* ids = optional(w, "write_identities")) {  // SPEC-CANARY §11.7: as the seeds, 0 past them
    std::vector<std::int64_t>& identities =
        plan.write_identities.emplace(to_vector<std::int64_t>(*ids, prefix + "write_identities"));
    const auto n = static_cast<std::int64_t>(identities.size());
    if (n > capacity || n < needed)
      reject(prefix + "write_identities", "has " + std::to_string(n) + " entries, must hold min(write_num_valid_reqs, "
                                          "write_req_capacity) = " + std::to_string(needed) + " to write_req_capacity = " +
                                          std::to_string(capacity));
    identities.resize(static_cast<std::size_t>(capacity), 0);
  }
}

void parse_tokens(const json& object, reference::StepTokens& tokens) {
  tokens.input_ids = to_tokens(object, "input_ids", true);
  tokens.positions = to_tokens(object, "positions", true);
  tokens.out_cache_loc = to_tokens(object, "out_cache_loc", true);
  const std::size_t n = tokens.input_ids.size();
  const auto same_length = [&](const char* key, std::size_t size) {
    if (size != n)
      reject(key, "has " + std::to_string(size) + " entries but input_ids has " + std::to_string(n) +
                      " (the token arrays are of one length)");
  };
  same_length("positions", tokens.positions.size());
  same_length("out_cache_loc", tokens.out_cache_loc.size());
  const bool has_ids = optional(object, "expected_input_ids") != nullptr;
  const bool has_positions = optional(object, "expected_positions") != nullptr;
  if (has_ids != has_positions)
    reject(has_ids ? "expected_input_ids" : "expected_positions",
           std::string("is given without ") + (has_ids ? "expected_positions" : "expected_input_ids") +
               " (the input assert takes both or neither)");
  if (has_ids) {
    tokens.expected_input_ids = to_tokens(object, "expected_input_ids", false);
    tokens.expected_positions = to_tokens(object, "expected_positions", false);
    same_length("expected_input_ids", tokens.expected_input_ids->size());
    same_length("expected_positions", tokens.expected_positions->size());
  }
  if (const json* v = optional(object, "chain_position_assert"))
    tokens.chain_position_assert = to_integer<std::int32_t>(*v, "chain_position_assert");
}

reference::RealKvSource to_source(const json& value, const std::string& where) {
  if (!value.is_object()) reject(where, "expected an object {page_size, bytes_per_token, read_bytes, rows}, got " +
                                            describe(value));
  const std::string prefix = where + ".";
  reject_unknown_keys(value, {"page_size", "bytes_per_token", "read_bytes", "rows"}, prefix);
  reference::RealKvSource source;
  source.page_size = to_integer<std::int64_t>(require(value, "page_size", prefix), prefix + "page_size");
  source.bytes_per_token = to_integer<std::int64_t>(require(value, "bytes_per_token", prefix), prefix + "bytes_per_token");
  source.read_bytes = to_integer<std::int64_t>(require(value, "read_bytes", prefix), prefix + "read_bytes");
  Matrix<std::uint8_t> rows =
      to_matrix<std::uint8_t>(require(value, "rows", prefix), prefix + "rows", 0, 255, "byte", -1, "an array of bytes");
  source.bytes = std::move(rows.values);
  source.pages = rows.rows;
  source.row_bytes = rows.cols;
  return source;
}

reference::RealKv to_real_kv(const json& value) {
  if (!value.is_object()) reject("real_kv", "expected an object {mode, sources}, got " + describe(value));
  reject_unknown_keys(value, {"mode", "sources"}, "real_kv.");
  reference::RealKv real_kv;
  const json& mode = require(value, "mode", "real_kv.");
  if (mode == "none") real_kv.mode = RealKvMode::None;
  else if (mode == "partial") real_kv.mode = RealKvMode::Partial;
  else if (mode == "all") real_kv.mode = RealKvMode::All;
  else reject("real_kv.mode", "expected \"none\", \"partial\" or \"all\", got " + describe(mode));
  if (const json* sources = optional(value, "sources")) {
    if (!sources->is_array()) reject("real_kv.sources", "expected an array of sources, got " + describe(*sources));
    if (sources->size() > static_cast<std::size_t>(kMaxRealKvSources))
      reject("real_kv.sources", "has " + std::to_string(sources->size()) + " sources, at most " +
                                    std::to_string(kMaxRealKvSources) + " are allowed");
    for (std::size_t k = 0; k < sources->size(); ++k)
      real_kv.sources.push_back(to_source((*sources)[k], "real_kv.sources[" + std::to_string(k) + "]"));
  }
  return real_kv;
}

void parse_common(const json& object, CanaryCase& c) {
  c.buffer = to_canary_buffer(require(object, "canary_buffer"));
  if (const json* v = optional(object, "kernel_kind")) {
    if (!v->is_string()) reject("kernel_kind", "expected a launch tag name such as \"HEAD_K_FULL\", got " + describe(*v));
    const auto kind = kernel_kind_from_name(v->get_ref<const std::string&>());
    if (!kind) {
      std::string names;
      for (int k = 0; k < kKernelKinds; ++k) names += std::string(k ? ", " : "") + kernel_kind_name(k);
      reject("kernel_kind", "unknown launch tag " + describe(*v) + " (expected one of " + names + ")");
    }
    c.kernel_kind = *kind;
  }
  if (const json* v = optional(object, "ring_capacity")) {
    c.ring_capacity = to_integer<std::int64_t>(*v, "ring_capacity");
    if (c.ring_capacity < 0) reject("ring_capacity", std::to_string(c.ring_capacity) + " is negative, must be >= 0");
    if (c.ring_capacity > kMaxRingCapacity)
      reject("ring_capacity", std::to_string(c.ring_capacity) + " is above kvcanary's limit of " +
                                  std::to_string(kMaxRingCapacity));
  }
  if (const json* v = optional(object, "real_kv")) c.real_kv = to_real_kv(*v);
  const auto flag = [&](const char* key, bool& value) {
    if (const json* v = optional(object, key)) {
      if (!v->is_boolean()) reject(key, "expected true or false, got " + describe(*v));
      value = v->get<bool>();
    }
  };
  flag("check_expected_token", c.check_expected_token);
  flag("check_slot_zero", c.checks.slot_zero);  // SPEC-CANARY §11.3; absent: off (the §9 contract)
  flag("check_freed", c.checks.freed);          // §11.2
}

}  // namespace

const char* case_kind_name(CaseKind kind) {
  switch (kind) {
    case CaseKind::Verify: return "verify";
    case CaseKind::Write: return "write";
    case CaseKind::Step: return "step";
    default: return "plan";
  }
}

CaseKind case_kind_of(const json& document) {
  if (!document.is_object()) return CaseKind::Plan;  // parse_case_file rejects it
  const bool verify = find(document, "verify_plan") != nullptr;
  const bool write = find(document, "write_plan") != nullptr;
  if (verify && write)
    reject("case", "holds both verify_plan and write_plan (a verify case holds verify_plan, a write case write_plan)");
  if (verify) return CaseKind::Verify;
  if (write) return CaseKind::Write;
  return find(document, "canary_buffer") != nullptr ? CaseKind::Step : CaseKind::Plan;
}

CanaryCase parse_canary_case(const json& document, CaseKind kind) {
  if (!document.is_object()) reject("case", "expected a JSON object, got " + describe(document));
  CanaryCase c;
  c.kind = kind;
  if (kind == CaseKind::Verify) {
    reject_unknown_keys(document, kVerifyKeys, "");
    parse_verify_plan(document, c.plan);
  } else if (kind == CaseKind::Write) {
    reject_unknown_keys(document, kWriteKeys, "");
    parse_write_plan(document, c.plan);
    parse_tokens(document, c.tokens);
  } else {
    c.plan_case = parse_plan_case(document, "", kStepKeys);
    parse_tokens(document, c.tokens);
  }
  parse_common(document, c);
  try {
    reference::check_real_kv(c.real_kv, static_cast<std::int64_t>(c.buffer.size()), case_kind_name(kind));
  } catch (const std::invalid_argument& e) {
    throw RejectedInput(e.what());
  }
  return c;
}

LoadedCase load_case(const std::string& path, std::optional<CaseKind> kind) {
  LoadedCase loaded;
  const JsonDocument document = read_json_file(path);
  try {
    loaded.kind = kind ? *kind : case_kind_of(document.root());
    if (loaded.kind == CaseKind::Plan)
      loaded.plan_file = parse_case_file(document.root());
    else
      loaded.canary = parse_canary_case(document.root(), loaded.kind);
  } catch (const RejectedInput& e) {
    throw RejectedInput(path + ": " + e.what());
  }
  return loaded;
}

}  // namespace cli
}  // namespace kvcanary
