#ifndef KVCANARY_RUNTIME_REPORT_TEXT_HPP
#define KVCANARY_RUNTIME_REPORT_TEXT_HPP

// The runtime's lines, host only: the original system's multi-line violation form, the periodic stats
// line and the SWA divergence line (docs/runtime.md lists every line the runtime says).

#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <string>

namespace kvcanary {

// The original system's multi-line form of one row (sglang 0.5.23 violation_reporter._format_violation):
//   <the §7 line>
//   KV cache canary violation detected (kernel_kind=<TAG>, slot_idx=<d>, position=<d>)
//   canary_kind:       <per_forward_head_k_full | sweep_k_full | ...>
//     fail_reasons: <names joined by ' ' | none>
//     actual:   ... / stored:   ...      (write rows / verify rows)
//     expected: ...
//     total_violations=<d> ring_overflow=<True|False> step_when_pumped=<d>
// Lines joined by '\n', no trailing newline. A kind outside §1 is "unknown(<k>)"; bit 64 (this project's
// OUT_OF_RANGE) is named out_of_range and higher bits bit<N>, where the original has no name for them.
std::string format_violation_multiline(const reference::RingRow& row, std::int64_t total, bool ring_overflow,
                                       std::int64_t step_when_pumped);

// "[canary] step=<d> protected_tokens=<d> sweep_passes=<d> violations=<d> launch_tags_active=<a>/12"
// (the original's stats line; protected_tokens = every slot counter of every pass).
std::string stats_line(std::int64_t step, std::int64_t protected_tokens, std::int64_t sweep_passes,
                       std::int64_t violations, int active_tags);

// kv_canary_swa_divergence={"forward_ct":n,"verify_full":n,"verify_swa":n,"swa_full_idx_divergence":n,
// "swa_out_of_window_tokens":n} (the original's SwaDivergenceLog.format()).
struct SwaDivergence {
  std::int64_t forward_ct = 0, verify_full = 0, verify_swa = 0, swa_full_idx_divergence = 0,
               swa_out_of_window_tokens = 0;
};
std::string swa_divergence_line(const SwaDivergence& divergence);

}  // namespace kvcanary

#endif
