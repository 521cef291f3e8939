#ifndef KVCANARY_CLI_COMMAND_LINE_HPP
#define KVCANARY_CLI_COMMAND_LINE_HPP

// The command line of kvcanary-plan (SPEC §5), parsed without Kokkos so that a bad one costs nothing:
//   kvcanary-plan run   [--backend B] [--algorithm A] FILE.json
//   kvcanary-plan check [--backend B] [--algorithm A] FILE.json
//   kvcanary-plan demo  [--backend B] [--algorithm A] [--iterations N]
//   kvcanary-plan --help | --version
// Options may come before or after FILE, as "--name value" or "--name=value"; FILE "-" is stdin.

#include <kvcanary/plan_types.hpp>

#include <optional>
#include <string>

namespace kvcanary {
namespace cli {

enum class Command { Help, Version, Run, Check, Demo };

struct CommandLine {
  Command command = Command::Help;
  std::string file;                    // run, check
  std::optional<std::string> backend;  // empty: Kokkos::DefaultExecutionSpace
  EntriesAlgorithm algorithm = EntriesAlgorithm::Default;
  int iterations = 20;  // demo: timed plan() calls
};

// Throws UsageError naming the offending argument.
CommandLine parse_command_line(int argc, const char* const* argv);

const char* usage_text();

}  // namespace cli
}  // namespace kvcanary

#endif
