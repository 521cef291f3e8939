#ifndef KVCANARY_CLI_CANARY_WRITER_HPP
#define KVCANARY_CLI_CANARY_WRITER_HPP

// The SPEC-CANARY §9 output of a verify, write or step call, streamed (json_writer.hpp): the canary
// buffer can be large, and the report lines are formatted one at a time as they are written.

#include <kvcanary/tools/reference_canary.hpp>

#include <ostream>

namespace kvcanary {
namespace cli {

// Sorts the ring's rows lexicographically over the 8 fields as signed int64 (the device's order is
// unspecified; the output must be deterministic).
void sort_ring_rows(reference::ViolationRing& ring);

// Writes the members "canary_buffer", "ring" {count, capacity, rows}, "slot_run_counter",
// "kernel_run_counter", "report" (format_violation of each row, in the rows' order, after the
// never-written filter of report.hpp) and "report_dropped", without the braces around them.
void write_canary_members(std::ostream& out, const reference::CanaryBuffer& buffer,
                          const reference::ViolationRing& ring);

}  // namespace cli
}  // namespace kvcanary

#endif
