#ifndef KVCANARY_CLI_DEMO_HPP
#define KVCANARY_CLI_DEMO_HPP

// `kvcanary demo` (SPEC §5): a built-in synthetic batch (fixed seed) planned on one backend,
// timed, and checked against the reference.

#include "command_line.hpp"

#include <ostream>

namespace kvcanary {
namespace cli {

// Prints what it did and how long it took; returns 0, or 1 when the library disagrees with the reference.
int demo_command(const CommandLine& command_line, std::ostream& out);

}  // namespace cli
}  // namespace kvcanary

#endif
