#ifndef KVCANARY_CLI_COMMAND_LINE_HPP
#define KVCANARY_CLI_COMMAND_LINE_HPP

// The command line of `kvcanary` (SPEC §5, SPEC-CANARY §9), parsed without Kokkos so that a bad one costs
// nothing:
//   kvcanary plan   [--backend B] [--algorithm A] FILE.json     the plan (SPEC §5)
//   kvcanary verify [--backend B] [--algorithm C] FILE.json     SPEC-CANARY §5 on one case
//   kvcanary write  [--backend B] [--algorithm C] FILE.json     SPEC-CANARY §4 on one case
//   kvcanary step   [--backend B] [--algorithm A] [--canary-algorithm C] FILE.json   plan -> verify -> write
//   kvcanary check  [--backend B] [--algorithm A|C] [--canary-algorithm C] FILE.json   library vs reference
//   kvcanary demo   [--backend B] [--algorithm A] [--iterations N]
//   kvcanary simulate [options]                                the engine simulator (simulate_command.hpp)
//   kvcanary --help | --version
// A = the plan's entries algorithm, C = the canary stages' algorithm. Options may come before or after
// FILE, as "--name value" or "--name=value"; FILE "-" is stdin. A subcommand is one row of kSubcommands
// (command_line.cpp): its name, whether it reads a case and which options it takes.

#include <kvcanary/canary_types.hpp>
#include <kvcanary/plan_types.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvcanary {
namespace cli {

enum class Command { Help, Version, Plan, Check, Demo, Verify, Write, Step, Simulate };

// What kind of case a file holds (check_command tells by its keys: canary_case.hpp).
enum class CaseKind { Plan, Verify, Write, Step };

struct CommandLine {
  Command command = Command::Help;
  std::string name;                    // the subcommand as typed
  std::string file;                    // every subcommand but demo
  std::optional<std::string> backend;  // empty: Kokkos::DefaultExecutionSpace
  std::optional<std::string> algorithm;         // --algorithm, checked against the stage it names
  std::optional<std::string> canary_algorithm;  // --canary-algorithm (step, check)
  int iterations = 20;  // demo: timed plan() calls
  std::vector<std::string> simulate_args;  // simulate: its own options, parsed by simulate_command
};

// Throws UsageError naming the offending argument.
CommandLine parse_command_line(int argc, const char* const* argv);

// An option given as "--name=value" or "--name value": its name, and its value (args[i] is the option;
// i moves past a separate value). option_value throws UsageError when the value is missing.
std::string option_name(const std::string& arg);
std::string option_value(const std::vector<std::string>& args, std::size_t& i);

// The value of an integer option (--iterations, simulate's --steps, --seed, ...), parsed the one strict way
// for every subcommand: an optional '-' and decimal digits, nothing else (no space, no '+', no trailing
// text), in [lo, hi]. Throws UsageError "OPTION needs a whole number in [lo, hi], got 'TEXT'".
std::int64_t integer_option(const std::string& option, const std::string& text, std::int64_t lo, std::int64_t hi);

// The algorithms of a command line for a case of `kind`: --algorithm names the plan's entries algorithm
// for plan, step and demo (and check of a plan or step case), and the canary algorithm for verify and write
// (and check of such a case); --canary-algorithm names the canary algorithm of step. Throws UsageError
// for a name that is not one of the stage's.
EntriesAlgorithm plan_algorithm(const CommandLine& command_line);
CanaryAlgorithm canary_algorithm(const CommandLine& command_line, CaseKind kind);

const char* usage_text();

}  // namespace cli
}  // namespace kvcanary

#endif
