#ifndef KVCANARY_RUNTIME_RUNTIME_REPORT_HPP
#define KVCANARY_RUNTIME_RUNTIME_REPORT_HPP

// What Canary::end_step() and flush() hand back, and the error of the health check.

#include <kvcanary/stages/report.hpp>
#include <kvcanary/runtime/config.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvcanary {

// One read of the rings (every group's new rows), and what the host checks said about that step.
struct RuntimeReport {
  std::int64_t step = -1;            // the step whose snapshot was read (end_step count then); -1: none yet
  ViolationReport violations;        // every group's new rows; totals summed over the groups
  std::vector<GroupKind> row_groups;  // the group of each kept row of `violations`
  std::vector<GroupKind> overflowed_groups;  // the groups whose ring held more violations than rows
  std::vector<std::string> warnings;  // capacity overflow (a disabled verify pass), bad batch rows, a full ring
  std::vector<std::string> health_errors;  // "canary not running"
  std::vector<std::string> info;      // the stats line, the SWA divergence line
};

// Thrown by end_step() in ReportMode::Raise when the health check failed: a pass was not executed as
// often as it was launched (a graph replayed without the canary's nodes, the passes on another stream).
class CanaryNotRunningError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvcanary

#endif
