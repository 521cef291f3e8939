#ifndef KVCANARY_CLI_JSON_IO_HPP
#define KVCANARY_CLI_JSON_IO_HPP

// Case files in (SPEC §5); plan_writer.hpp prints the plans.
//
// A case is a JSON object with the input names of SPEC §2 plus verify_capacity and write_req_capacity.
// Checks are strict, so that a typo cannot silently change a plan:
// * required: req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, verify_capacity,
//   write_req_capacity (capacities are inputs of the call, SPEC §2, so they have no default);
// * optional (missing or null = absent): full_to_swa_index_mapping, req_to_verify_expected_tokens,
//   req_to_verify_expected_tokens_valid_lens; swa_window_size and kv_token_id_vs_position_offset
//   (missing or null = 0);
// * values must be JSON integers in the range of their SPEC type (int64, or int32 for req_to_token,
//   the pool, swa_window_size and kv_token_id_vs_position_offset); floats, strings, booleans and
//   out-of-range integers are rejected;
// * a matrix is an array of rows, each an array of integers, all rows of one length;
// * any other key is rejected, except keys starting with '_' (comments, test expectations).
//
// A case file is one case, or {"steps": [case, ...]}: the steps run in order on one set of outputs
// (so what a step leaves alone stays from the step before; SPEC §6 "shrinking batch"), and must share
// their capacities.

#include <kvcanary/tools/reference_plan.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace kvcanary {
namespace cli {

struct Case {
  reference::Inputs inputs;
  std::int64_t verify_capacity = 0;
  std::int64_t write_req_capacity = 0;
};

struct CaseFile {
  std::vector<Case> steps;  // one entry for a plain case
  bool multi_step = false;  // the file used {"steps": [...]}
};

// One plan case (an object); `prefix` goes before key names in messages ("steps[1]."). Keys of
// `also_allowed` are let through unread (a `step` case holds a plan case and the canary keys).
Case parse_plan_case(const nlohmann::json& object, const std::string& prefix,
                     const std::set<std::string>& also_allowed = {});

// Reads and parses a file ("-" is stdin; the text's own checks are json_text.hpp's). Throws RejectedInput with
// one line naming the file and the problem.
CaseFile read_case_file(const std::string& path);

// Parses a document already read. Throws RejectedInput naming the key (and index) at fault.
CaseFile parse_case_file(const nlohmann::json& document);

}  // namespace cli
}  // namespace kvcanary

#endif
