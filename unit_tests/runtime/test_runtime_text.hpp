// The runtime's lines: the multi-line form byte-equal to the original system's on the same rows (the
// expected text was produced by the original's own code: make_original_format_cases.py), and the stats and
// SWA divergence lines in the original's formats (hand-derived from stats_logger.py and swa_divergence.py).

#include "original_format_cases.hpp"

#include <kvcanary/runtime/report_text.hpp>
#include <kvcanary/stages/report.hpp>

#include <gtest/gtest.h>

namespace kvcanary_test {

TEST(RuntimeText, MultiLineEqualsTheOriginalsFormat) {
  const auto cases = kvcanary_runtime_test::original_format_cases();
  ASSERT_EQ(cases.size(), 14u);
  for (const auto& c : cases)
    EXPECT_EQ(kvcanary::format_violation_multiline(c.row, c.total, c.ring_overflow, c.step_when_pumped), c.text);
}

TEST(RuntimeText, MultiLineFirstLineIsTheSpecLineForKnownKinds) {
  for (const auto& c : kvcanary_runtime_test::original_format_cases()) {
    if (c.row[0] < 0 || c.row[0] >= kvcanary::kKernelKinds) continue;
    const std::string text = kvcanary::format_violation_multiline(c.row, c.total, c.ring_overflow, c.step_when_pumped);
    EXPECT_EQ(text.substr(0, text.find('\n')), kvcanary::format_violation(c.row));
  }
}

TEST(RuntimeText, MultiLineNamesThisProjectsOutOfRangeBit) {
  const kvcanary::reference::RingRow row{0, 4096, 3, -1, 7, -1, -1, 64 | 2};
  const std::string text = kvcanary::format_violation_multiline(row, 1, false, 5);
  EXPECT_NE(text.find("fail_reason=verify_position+out_of_range"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  fail_reasons: verify_position out_of_range\n"), std::string::npos) << text;
}

TEST(RuntimeText, StatsAndDivergenceLines) {
  EXPECT_EQ(kvcanary::stats_line(200, 123456, 3, 2, 6),
            "[canary] step=200 protected_tokens=123456 sweep_passes=3 violations=2 launch_tags_active=6/12");
  kvcanary::SwaDivergence d;
  d.forward_ct = 10;
  d.verify_full = 500;
  d.verify_swa = 120;
  d.swa_full_idx_divergence = 3;
  d.swa_out_of_window_tokens = 40;
  EXPECT_EQ(kvcanary::swa_divergence_line(d),
            "kv_canary_swa_divergence={\"forward_ct\":10,\"verify_full\":500,\"verify_swa\":120,"
            "\"swa_full_idx_divergence\":3,\"swa_out_of_window_tokens\":40}");
}

}  // namespace kvcanary_test
