#ifndef KVCANARY_CLI_SIMULATE_COMMAND_HPP
#define KVCANARY_CLI_SIMULATE_COMMAND_HPP

// `kvcanary simulate`: the engine simulator with fault injection (src/sim, docs/simulator.md).
//   kvcanary simulate [--steps N] [--seed N] [--faults CLASS,...|all|none] [--backend B] [--page-size N]
//                     [--swa W] [--spec-decode] [--max-batch N] [--full-batch] [--output-tokens N]
//                     [--real-kv none|partial|all] [--json]
// Prints the report's table (or its JSON); exit 0 when no detectable fault was missed and no violation
// was left unexplained, 1 otherwise, 2 for a bad command line.

#include <ostream>
#include <string>
#include <vector>

namespace kvcanary {
namespace cli {

// Throws UsageError for a bad option, before Kokkos starts.
int simulate_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace cli
}  // namespace kvcanary

#endif
