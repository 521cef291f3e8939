#ifndef KVCANARY_CLI_CANARY_CASE_HPP
#define KVCANARY_CLI_CANARY_CASE_HPP

// Canary cases in (SPEC-CANARY §9): `verify`, `write` and `step` read one JSON object each, as strictly as
// plan cases (json_io.hpp): required keys, int64 values (hashes included) in range, equal-length rows,
// no unknown key except those starting with '_', and the CLI's limits (limits.hpp) checked before the
// memory they bound is allocated.
//
// `check` tells a case's kind by its keys (load_case): "verify_plan" -> verify, "write_plan" -> write,
// "canary_buffer" without either -> step, none of them -> plan (a plan case or {"steps": [...]}).
// A case with both verify_plan and write_plan is rejected.

#include "command_line.hpp"
#include "json_io.hpp"

#include <kvcanary/tools/reference_canary.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace kvcanary {
namespace cli {

struct CanaryCase {
  CaseKind kind = CaseKind::Verify;
  reference::CanaryBuffer buffer;
  // verify: the verify fields of verify_plan; write: the write fields of write_plan, the seeds padded with
  // -1 to write_req_capacity (entries past write_num_valid_reqs are never read). step: unused.
  reference::Outputs plan;
  Case plan_case;                 // step
  reference::StepTokens tokens;   // write, step
  bool check_expected_token = true;
  VerifyChecks checks = VerifyChecks::v1();  // check_slot_zero / check_freed (SPEC-CANARY §11), off by default
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;
  std::int64_t ring_capacity = 1024;
  reference::RealKv real_kv;
};

// The kind of a parsed document, by its keys (see above).
CaseKind case_kind_of(const nlohmann::json& document);

// Parses a document as a case of `kind` (not Plan) and checks what the stages' host-side checks would
// reject (real-KV sources, token array lengths, plan shapes), so that a bad case is refused before
// Kokkos starts. Throws RejectedInput naming the key at fault.
CanaryCase parse_canary_case(const nlohmann::json& document, CaseKind kind);

// A case file read, its kind known, and the parsed document freed.
struct LoadedCase {
  CaseKind kind = CaseKind::Plan;
  CaseFile plan_file;  // kind Plan
  CanaryCase canary;   // otherwise
};

// Reads `path` ("-" is stdin) as a case of `kind`, or of the kind its keys say when `kind` is empty.
// Throws RejectedInput with one line naming the file.
LoadedCase load_case(const std::string& path, std::optional<CaseKind> kind);

const char* case_kind_name(CaseKind kind);

}  // namespace cli
}  // namespace kvcanary

#endif
