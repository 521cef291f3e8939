#ifndef KVCANARY_CLI_CANARY_COMMANDS_HPP
#define KVCANARY_CLI_CANARY_COMMANDS_HPP

// `verify`, `write` and `step` (SPEC-CANARY §9), and `check` of such a case. Each reads and checks its
// case before it starts Kokkos; rejected inputs are thrown (RejectedInput) for main to report.

#include "canary_case.hpp"
#include "command_line.hpp"

#include <ostream>

namespace kvcanary {
namespace cli {

// Runs the case's stages on the library (step: plan -> verify -> write on one buffer and ring) and prints
// one line of JSON (canary_writer.hpp; step: the plan's keys first); returns 0.
int canary_command(const CommandLine& command_line, CaseKind kind, std::ostream& out);

// Runs the same stages on the library and on the reference (reference::plan/verify/write) from the same
// case and compares the plan (step), every record and the ring (count, capacity, counters, rows as a
// multiset); prints a summary; returns 0 when they agree, 1 otherwise.
int check_canary_case(const CommandLine& command_line, CanaryCase canary, std::ostream& out);

}  // namespace cli
}  // namespace kvcanary

#endif
