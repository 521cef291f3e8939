#ifndef KVCANARY_REPORT_HPP
#define KVCANARY_REPORT_HPP

// The host report of SPEC-CANARY §7: ring rows → one line each, a never-written filter that always says
// what it dropped, and three ways to deliver (none, log, raise), plus a JSON form for tools. Everything
// here is pure host code on a snapshot of the ring (reference::ViolationRing); reading a device ring
// (copy + fence) is the reader's job, on top of make_report().

#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvcanary {

using reference::RingRow;

// The §7 line of one row:
//   kv_canary violation: launch_tag=<TAG> fail_reason=<r1+r2|none> slot_idx=<d> position=<d>
//   stored_token=<d> expected_token=<d> stored_chain_hash=0x<16 hex> expected_aux=0x<16 hex>
// (one line). Reason names in bit order (§7, then §11's verify_freed ... padding_slot_kv); a set bit above
// PADDING_SLOT_KV (a corrupted row) is named `bit<N>` (N = 11..63) in its place in that order, so no bit is
// ever hidden. A kind outside §1 is UNKNOWN.
std::string format_violation(const RingRow& row);

// The §7 reason names of `bits` joined by '+', in bit order; "none" when 0.
std::string fail_reason_names(std::int64_t bits);

// A verify-stage row whose stored_token, position and stored_chain_hash are all 0: a never-written (or
// wiped) record (SPEC-CANARY §7). A row with a write bit (8, 16) or OUT_OF_RANGE (64) comes from a real
// store or a bad index, and a row with a bit of SPEC-CANARY §11 (128 up to 1024) from a check whose fields
// are not a record's: never one, whatever its fields hold.
bool is_never_written(const RingRow& row);

enum class ReportMode { None, Log, Raise };

struct ReportOptions {
  ReportMode mode = ReportMode::Log;
  bool keep_never_written = false;  // keep the rows is_never_written() would drop
  // Receives each line in Log mode, and the never-written line in Raise mode (no trailing newline);
  // empty: each line and a newline go to std::cerr.
  std::function<void(const std::string&)> sink;
};

// One read of the ring: the rows [first_row, first_row + rows_read) of the snapshot, less those the
// never-written filter dropped.
struct ViolationReport {
  std::vector<RingRow> rows;       // kept rows, in ring order
  std::vector<std::string> lines;  // format_violation() of each kept row
  std::int64_t count = 0;          // the ring's total count of violations (keeps growing past capacity)
  std::int64_t capacity = 0;
  bool overflowed = false;            // count > capacity: the rows past capacity were counted, not kept
  std::int64_t lost_to_overflow = 0;  // count - capacity when overflowed, else 0
  // Of those, the ones counted since the previous read (make_report: all of them; ViolationReader: only
  // the new ones), so that a full ring is reported once per read that loses violations, not every step.
  std::int64_t newly_lost = 0;
  std::int64_t first_row = 0;         // = already_reported
  std::int64_t rows_read = 0;         // rows of the window, before the filter
  std::int64_t dropped = 0;           // never-written rows the filter dropped (0 with keep_never_written)
  std::vector<std::int64_t> dropped_launch_tags;  // the distinct kernel kinds of the dropped rows, ascending
  std::int64_t slot_run_counter = 0;
  std::int64_t kernel_run_counter = 0;

  // The already_reported of the next read of the same ring.
  std::int64_t next_row() const { return first_row + rows_read; }
};

namespace Impl {
// The never-written filter's bookkeeping of one dropped row (make_report, the runtime's reader): counts it
// in report.dropped and adds its kernel kind to report.dropped_launch_tags (kept distinct and ascending).
void note_dropped_row(ViolationReport& report, const RingRow& row);
}  // namespace Impl

// The report of the rows [already_reported, min(count, capacity)) of a ring snapshot. Throws
// std::invalid_argument ("kvcanary::make_report: ...") when already_reported is negative or beyond the rows
// the ring holds (a ring reset under a reader), or when the snapshot's rows do not match its count.
ViolationReport make_report(const reference::ViolationRing& ring, std::int64_t already_reported,
                            const ReportOptions& options = ReportOptions{});

// One line summing a report up: "kv_canary report: rows=<kept> dropped_never_written=<d> count=<d>
// capacity=<d> overflowed=<0|1> lost_to_overflow=<d>". It starts with "kv_canary report:", never with
// "kv_canary violation:", so tools counting violation lines do not count it.
std::string summary_line(const ViolationReport& report);

// SPEC-CANARY §7's line for the rows the never-written filter dropped, e.g.
// "kv_canary: 2 never-written rows dropped (launch tags HEAD_K_FULL, HEAD_V_FULL)"; "" when none were.
std::string never_written_line(const ViolationReport& report);

// Whether a report has something to raise: a kept row, or violations newly lost to a full ring (a ring
// of capacity 0 keeps only the count: those are violations too). Dropped never-written rows alone are not.
bool has_violations(const ViolationReport& report);

// Thrown by deliver() in Raise mode; carries every kept row and its line.
class ViolationError : public std::runtime_error {
 public:
  explicit ViolationError(ViolationReport report);
  const std::vector<RingRow>& rows() const { return report_.rows; }
  const std::vector<std::string>& lines() const { return report_.lines; }
  const ViolationReport& report() const { return report_; }

 private:
  ViolationReport report_;
};

// None: nothing. Log: each line to the sink, then never_written_line() when rows were dropped, then
// summary_line() when violations were newly lost to a full ring. Raise: never_written_line() to the sink
// when rows were dropped, then throws ViolationError when has_violations(report). So in Log and Raise
// modes a wiped record (dropped as never written) or a full ring is never silent (SPEC-CANARY §7). The
// sink: options.sink, or std::cerr when it is empty.
void deliver(const ViolationReport& report, const ReportOptions& options);

// {"count": n, "capacity": c, "overflowed": b, "lost_to_overflow": n, "first_row": n, "rows_read": n,
//  "dropped": n, "slot_run_counter": n, "kernel_run_counter": n, "rows": [[8 int64], ...], "lines": [...]}
std::string report_json(const ViolationReport& report);

}  // namespace kvcanary

#endif
