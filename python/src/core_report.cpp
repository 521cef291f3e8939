// The host report (SPEC-CANARY §7) of a ring snapshot, for kvcanary.read_report(): the library's own
// make_report(), flattened into core.hpp's plain types.

#include "core.hpp"
#include "core_kokkos.hpp"

#include <kvcanary/stages/report.hpp>

#include <algorithm>

namespace kvcanary {
namespace python {

Report make_report(const RingSnapshot& s, std::int64_t already_reported, bool keep_never_written) {
  const reference::ViolationRing ring =
      reference::ring_snapshot(s.rows.data(), s.capacity, s.count, s.slot_run_counter, s.kernel_run_counter);
  ReportOptions options;
  options.mode = ReportMode::None;
  options.keep_never_written = keep_never_written;
  return flatten(kvcanary::make_report(ring, already_reported, options));
}

Report flatten(const ViolationReport& report) {
  Report out;
  for (const RingRow& row : report.rows) out.rows.insert(out.rows.end(), row.begin(), row.end());
  out.lines = report.lines;
  out.count = report.count;
  out.capacity = report.capacity;
  out.overflowed = report.overflowed;
  out.lost_to_overflow = report.lost_to_overflow;
  out.newly_lost = report.newly_lost;
  out.first_row = report.first_row;
  out.rows_read = report.rows_read;
  out.dropped = report.dropped;
  out.dropped_launch_tags = report.dropped_launch_tags;
  out.slot_run_counter = report.slot_run_counter;
  out.kernel_run_counter = report.kernel_run_counter;
  out.summary = summary_line(report);
  return out;
}

std::string format_row(const std::int64_t row[8]) {
  RingRow r;
  std::copy(row, row + 8, r.begin());
  return format_violation(r);
}

}  // namespace python
}  // namespace kvcanary
