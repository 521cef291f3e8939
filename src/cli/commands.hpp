#ifndef KVCANARY_CLI_COMMANDS_HPP
#define KVCANARY_CLI_COMMANDS_HPP

// `plan` (SPEC §5) and `check` (of any case: plan cases here, canary cases in canary_commands.hpp). Each
// reads and checks its case before it starts Kokkos, and returns the exit status; rejected inputs are thrown (RejectedInput, std::invalid_argument) for main to report.

#include "command_line.hpp"

#include <ostream>

namespace kvcanary {
namespace cli {

// Prints the plan as one line of JSON; returns 0.
int plan_command(const CommandLine& command_line, std::ostream& out);

// A plan case: runs the library and the reference from the same poisoned outputs (step by step for a
// multi-step file) and compares every output element; prints a summary; returns 0 when they agree, 1 otherwise.
// A verify, write or step case (by its keys, canary_case.hpp): see check_canary_case.
int check_command(const CommandLine& command_line, std::ostream& out);

}  // namespace cli
}  // namespace kvcanary

#endif
