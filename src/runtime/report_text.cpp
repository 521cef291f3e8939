// The runtime's lines (runtime/report_text.hpp).

#include <kvcanary/runtime/report_text.hpp>

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/report.hpp>
#include <kvcanary/impl/hash.hpp>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace kvcanary {

namespace {

std::string hex64(std::int64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, Impl::as_uint64(value));
  return text;
}

// The §7 reason names (report.hpp's, which name bits above 64 bit<N>) joined by `separator`.
std::string reasons(std::int64_t bits, char separator) {
  std::string names = fail_reason_names(bits);
  std::replace(names.begin(), names.end(), '+', separator);
  return names;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

std::string format_violation_multiline(const reference::RingRow& row, std::int64_t total, bool ring_overflow,
                                       std::int64_t step_when_pumped) {
  const std::int64_t kind = row[kRowKernelKind], bits = row[kRowFailReasonBits];
  const bool known = kind >= 0 && kind < kKernelKinds;
  const std::string tag = known ? kernel_kind_name(kind) : "unknown(" + std::to_string(kind) + ")";
  const bool sweep = known && (kind == static_cast<std::int64_t>(KernelKind::SWEEP_K_FULL) ||
                               kind == static_cast<std::int64_t>(KernelKind::SWEEP_V_FULL) ||
                               kind == static_cast<std::int64_t>(KernelKind::SWEEP_K_SWA) ||
                               kind == static_cast<std::int64_t>(KernelKind::SWEEP_V_SWA));
  const std::string canary_kind = !known ? tag : sweep ? lower(tag) : "per_forward_" + lower(tag);
  const bool is_write = (bits & (kWriteToken | kWritePosition)) != 0;
  const bool has_token_check = (bits & (kWriteToken | kVerifyToken)) != 0;
  const std::string slot = std::to_string(row[kRowSlot]), position = std::to_string(row[kRowPosition]);

  std::ostringstream out;
  out << "kv_canary violation: launch_tag=" << tag << " fail_reason=" << reasons(bits, '+') << " slot_idx=" << slot
      << " position=" << position << " stored_token=" << row[kRowStoredToken]
      << " expected_token=" << row[kRowExpectedToken] << " stored_chain_hash=" << hex64(row[kRowStoredChainHash])
      << " expected_aux=" << hex64(row[kRowExpectedAux]) << '\n';
  out << "KV cache canary violation detected (kernel_kind=" << tag << ", slot_idx=" << slot << ", position=" << position
      << ")\n";
  out << "canary_kind:       " << canary_kind << '\n';
  out << "  fail_reasons: " << reasons(bits, ' ') << '\n';
  if (is_write) {
    out << "  actual:   token_id=" << row[kRowStoredToken] << "   position=" << position
        << " prev_hash=" << hex64(row[kRowStoredChainHash]) << '\n';
    out << "  expected: token_id=" << row[kRowExpectedToken] << "   position=" << row[kRowExpectedAux] << '\n';
  } else {
    out << "  stored:   token_id=" << row[kRowStoredToken] << "   position=" << position
        << " prev_hash=" << hex64(row[kRowStoredChainHash]) << '\n';
    if (has_token_check)
      out << "  expected: token_id=" << row[kRowExpectedToken] << " prev_hash=" << hex64(row[kRowExpectedAux]) << '\n';
    else
      out << "  expected: prev_hash=" << hex64(row[kRowExpectedAux]) << '\n';
  }
  out << "  total_violations=" << total << " ring_overflow=" << (ring_overflow ? "True" : "False")
      << " step_when_pumped=" << step_when_pumped;
  return out.str();
}

std::string stats_line(std::int64_t step, std::int64_t protected_tokens, std::int64_t sweep_passes,
                       std::int64_t violations, int active_tags) {
  std::ostringstream out;
  out << "[canary] step=" << step << " protected_tokens=" << protected_tokens << " sweep_passes=" << sweep_passes
      << " violations=" << violations << " launch_tags_active=" << active_tags << '/' << kKernelKinds;
  return out.str();
}

std::string swa_divergence_line(const SwaDivergence& d) {
  std::ostringstream out;
  out << "kv_canary_swa_divergence={\"forward_ct\":" << d.forward_ct << ",\"verify_full\":" << d.verify_full
      << ",\"verify_swa\":" << d.verify_swa << ",\"swa_full_idx_divergence\":" << d.swa_full_idx_divergence
      << ",\"swa_out_of_window_tokens\":" << d.swa_out_of_window_tokens << '}';
  return out.str();
}

}  // namespace kvcanary
