// The simulator's report: a human table and JSON (sim_types.hpp).

#include "sim_types.hpp"

#include <kvcanary/stages/report.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace kvcanary {
namespace sim {

namespace {

const char* mode_name(RealKvMode mode) {
  return mode == RealKvMode::None ? "none" : mode == RealKvMode::Partial ? "partial" : "all";
}

std::string latency(const ClassSummary& c) {
  if (c.latency_min < 0) return "-";
  return std::to_string(c.latency_min) + " / " + std::to_string(c.latency_median) + " / " + std::to_string(c.latency_max);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

StepTimes step_times(std::vector<float> canary, double step_us_sum) {
  StepTimes t;
  t.steps = static_cast<std::int64_t>(canary.size());
  if (canary.empty()) return t;
  double sum = 0;
  for (const float c : canary) sum += c;
  t.canary_us = sum / static_cast<double>(canary.size());
  t.step_us = step_us_sum / static_cast<double>(canary.size());
  const std::size_t mid = canary.size() / 2;
  std::nth_element(canary.begin(), canary.begin() + static_cast<std::ptrdiff_t>(mid), canary.end());
  t.canary_us_median = canary[mid];
  if (canary.size() % 2 == 0)  // the mean of the two middle values: the lower one is the largest below mid
    t.canary_us_median =
        (t.canary_us_median + *std::max_element(canary.begin(), canary.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  return t;
}

std::string json_times(const StepTimes& t) {
  return "{\"steps\": " + std::to_string(t.steps) + ", \"canary_us\": " + fixed(t.canary_us, 3) +
         ", \"canary_us_median\": " + fixed(t.canary_us_median, 3) + ", \"step_us\": " + fixed(t.step_us, 3) + "}";
}

std::string table_times(const StepTimes& t) {
  if (t.steps == 0) return "-";
  return std::to_string(t.steps) + ": " + fixed(t.canary_us_median, 1) + " / " + fixed(t.canary_us, 1);
}

}  // namespace

std::vector<BatchTiming> batch_timings(const std::vector<StepSample>& samples) {
  struct Split {
    std::vector<float> canary[3];  // all, decode only, with prefill
    double step_us[3] = {0, 0, 0};
  };
  std::map<std::int64_t, Split> by_size;
  for (const StepSample& s : samples) {
    Split& split = by_size[s.batch_size];
    for (const int k : {0, s.prefill ? 2 : 1}) {
      split.canary[k].push_back(s.canary_us);
      split.step_us[k] += s.step_us;
    }
  }
  std::vector<BatchTiming> out;
  for (auto& [size, split] : by_size) {
    BatchTiming b;
    b.batch_size = size;
    b.all = step_times(std::move(split.canary[0]), split.step_us[0]);
    b.decode_only = step_times(std::move(split.canary[1]), split.step_us[1]);
    b.with_prefill = step_times(std::move(split.canary[2]), split.step_us[2]);
    out.push_back(b);
  }
  return out;
}

std::string format_table(const SimulationReport& r) {
  std::ostringstream out;
  const SimulationOptions& o = r.options;
  out << "kvcanary simulate: " << r.steps_run << " steps on " << r.backend << ", seed " << o.seed << ", page size "
      << o.page_size << ", max batch " << o.max_batch << (o.full_batch ? " (kept full)" : "")
      << (o.output_tokens > 0 ? ", output " + std::to_string(o.output_tokens) + " tokens" : std::string())
      << ", real-KV " << mode_name(o.real_kv) << ", SWA "
      << (o.swa_window > 0 ? std::to_string(o.swa_window) : std::string("off")) << ", spec decode "
      << (o.spec_decode ? "on" : "off") << "\n";
  out << "requests finished " << r.requests_finished << ", aborted on detection " << r.requests_aborted << ", tokens written "
      << r.tokens_written << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-21s %8s %11s %11s %10s %8s %6s  %-16s %s\n", "fault class", "injected", "not covered",
                "unexercised", "detectable", "detected", "missed", "latency min/med/max", "reasons seen");
  out << line;
  for (int k = 0; k < kFaultClasses; ++k) {
    const ClassSummary& c = r.classes[k];
    const bool asked = std::find(o.faults.begin(), o.faults.end(), static_cast<FaultClass>(k)) != o.faults.end();
    if (!asked && c.injected == 0) continue;
    std::snprintf(line, sizeof line, "%-21s %8lld %11lld %11lld %10lld %8lld %6lld  %-19s %s\n",
                  fault_class_name(static_cast<FaultClass>(k)), static_cast<long long>(c.injected),
                  static_cast<long long>(c.not_covered), static_cast<long long>(c.unexercised),
                  static_cast<long long>(c.detectable), static_cast<long long>(c.detected), static_cast<long long>(c.missed),
                  latency(c).c_str(), c.reason_bits ? fail_reason_names(c.reason_bits).c_str() : "-");
    out << line;
  }
  out << "\nring rows " << r.rows << " (never-written records " << r.never_written_rows << "), false positives "
      << r.false_positives << ", ring overflows " << r.ring_overflows << "\n";
  for (const auto& l : r.false_positive_lines) out << "  false positive: " << l << "\n";
  const double share = r.step_us_per_step > 0 ? 100.0 * r.canary_us_per_step / r.step_us_per_step : 0;
  out << "canary " << fixed(r.canary_us_per_step, 1) << " us per step (" << fixed(share, 1) << "% of the step), "
      << fixed(r.steps_per_second, 0) << " steps/s\n";
  if (!r.by_batch_size.empty()) {
    out << "canary us per step by live batch size (steps: median / mean):\n";
    std::snprintf(line, sizeof line, "  %10s  %-22s  %-22s  %s\n", "batch size", "all steps", "decode only",
                  "with a prefill chunk");
    out << line;
    for (const BatchTiming& b : r.by_batch_size) {
      std::snprintf(line, sizeof line, "  %10lld  %-22s  %-22s  %s\n", static_cast<long long>(b.batch_size),
                    table_times(b.all).c_str(), table_times(b.decode_only).c_str(),
                    table_times(b.with_prefill).c_str());
      out << line;
    }
  }
  if (r.reference_mismatches >= 0) out << "steps whose rings differ from the host reference: " << r.reference_mismatches << "\n";
  out << "runtime checks: " << r.runtime_warnings << " warnings, " << r.health_errors << " canary-not-running errors\n";
  for (const auto& l : r.runtime_warning_lines) out << "  " << l << "\n";
  for (const auto& l : r.health_error_lines) out << "  " << l << "\n";
  out << (r.ok() ? "OK: every detectable fault detected, no false positive\n"
                 : "FAIL: " + std::to_string(r.missed()) + " missed, " + std::to_string(r.false_positives) +
                       " false positives\n");
  return out.str();
}

std::string format_json(const SimulationReport& r) {
  std::ostringstream out;
  const SimulationOptions& o = r.options;
  out << "{\"backend\": " << json_string(r.backend) << ", \"steps\": " << r.steps_run << ", \"seed\": " << o.seed
      << ", \"page_size\": " << o.page_size << ", \"max_batch\": " << o.max_batch << ", \"swa\": " << o.swa_window
      << ", \"spec_decode\": " << (o.spec_decode ? "true" : "false") << ", \"real_kv\": \"" << mode_name(o.real_kv) << "\""
      << ", \"full_batch\": " << (o.full_batch ? "true" : "false") << ", \"output_tokens\": " << o.output_tokens
      << ", \"requests_finished\": " << r.requests_finished << ", \"requests_aborted\": " << r.requests_aborted
      << ", \"tokens_written\": " << r.tokens_written << ",\n \"classes\": {";
  bool first = true;
  for (int k = 0; k < kFaultClasses; ++k) {
    const ClassSummary& c = r.classes[k];
    const FaultExpectation e = expected_catch(static_cast<FaultClass>(k));
    out << (first ? "" : ",") << "\n  " << json_string(fault_class_name(static_cast<FaultClass>(k))) << ": {\"injected\": " << c.injected
        << ", \"not_covered\": " << c.not_covered << ", \"unexercised\": " << c.unexercised << ", \"detectable\": " << c.detectable
        << ", \"detected\": " << c.detected << ", \"missed\": " << c.missed << ", \"caught_anyway\": " << c.caught_anyway
        << ", \"skipped\": " << c.skipped << ", \"latency_steps\": {\"min\": " << c.latency_min << ", \"median\": " << c.latency_median
        << ", \"max\": " << c.latency_max << "}, \"reason_bits\": " << c.reason_bits
        << ", \"expected_stage\": " << json_string(e.stage) << ", \"expected_reason_bits\": " << e.reason_bits << "}";
    first = false;
  }
  out << "},\n \"faults\": [";
  first = true;
  for (const auto& f : r.faults) {
    out << (first ? "" : ",") << "\n  {\"id\": " << f.id << ", \"class\": " << json_string(fault_class_name(f.fault))
        << ", \"step\": " << f.step << ", \"covered\": " << (f.covered ? "true" : "false") << ", \"exercised_step\": " << f.exercised_step
        << ", \"detected_step\": " << f.detected_step << ", \"reason_bits\": " << f.reason_bits << ", \"kernel_kinds\": " << f.kinds
        << ", \"rows\": " << f.rows << ", \"slots\": [";
    for (std::size_t i = 0; i < f.slots.size() && i < 32; ++i) out << (i ? ", " : "") << f.slots[i];
    out << "], \"note\": " << json_string(f.note) << "}";
    first = false;
  }
  out << "],\n \"rows\": " << r.rows << ", \"never_written_rows\": " << r.never_written_rows
      << ", \"false_positives\": " << r.false_positives << ", \"false_positive_lines\": [";
  for (std::size_t i = 0; i < r.false_positive_lines.size(); ++i) out << (i ? ", " : "") << json_string(r.false_positive_lines[i]);
  out << "], \"ring_overflows\": " << r.ring_overflows << ",\n \"canary_us_per_step\": " << fixed(r.canary_us_per_step, 3)
      << ", \"step_us_per_step\": " << fixed(r.step_us_per_step, 3) << ", \"steps_per_second\": " << fixed(r.steps_per_second, 1)
      << ",\n \"canary_us_by_batch_size\": [";
  for (std::size_t i = 0; i < r.by_batch_size.size(); ++i) {
    const BatchTiming& b = r.by_batch_size[i];
    out << (i ? "," : "") << "\n  {\"batch_size\": " << b.batch_size << ", \"steps\": " << b.all.steps
        << ", \"canary_us\": " << fixed(b.all.canary_us, 3)
        << ", \"canary_us_median\": " << fixed(b.all.canary_us_median, 3)
        << ", \"step_us\": " << fixed(b.all.step_us, 3) << ",\n   \"decode_only\": " << json_times(b.decode_only)
        << ", \"with_prefill\": " << json_times(b.with_prefill) << "}";
  }
  out << "], \"reference_mismatches\": " << r.reference_mismatches << ",\n \"runtime_warnings\": " << r.runtime_warnings
      << ", \"health_errors\": " << r.health_errors << ", \"runtime_lines\": [";
  bool first_line = true;
  for (const auto* lines : {&r.runtime_warning_lines, &r.health_error_lines})
    for (const auto& l : *lines) {
      out << (first_line ? "" : ", ") << json_string(l);
      first_line = false;
    }
  out << "], \"missed\": " << r.missed()
      << ", \"ok\": " << (r.ok() ? "true" : "false") << "}\n";
  return out.str();
}

}  // namespace sim
}  // namespace kvcanary
