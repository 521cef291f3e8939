#include "command_line.hpp"

#include "backends.hpp"
#include "cli_error.hpp"

#include <vector>

namespace kvcanary {
namespace cli {

namespace {

int parse_iterations(const std::string& text) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < 1 || value > 100000)
    throw UsageError("--iterations expects an integer in [1, 100000], got '" + text + "'");
  return static_cast<int>(value);
}

}  // namespace

const char* usage_text() {
  return R"(kvcanary-plan: build kvcanary's VerifyPlan and WritePlan for one case (SPEC section 5)

Usage:
  kvcanary-plan run   [--backend B] [--algorithm A] FILE.json   print the plan as JSON
  kvcanary-plan check [--backend B] [--algorithm A] FILE.json   compare the library with the reference
  kvcanary-plan demo  [--backend B] [--algorithm A] [--iterations N]
                                                                time a built-in synthetic batch
  kvcanary-plan --help | --version

Options:
  --backend B     serial | openmp | cuda (only those compiled into Kokkos);
                  default: Kokkos::DefaultExecutionSpace
  --algorithm A   default | portable | cuda-persistent (entries path; off CUDA, cuda-persistent
                  falls back to portable)
  --iterations N  demo: timed plan() calls after one warm-up (default 20)
  FILE "-" reads standard input.

Case file: a JSON object with the SPEC section 2 inputs
  req_pool_indices, prefix_lens, extend_seq_lens   arrays of int64 (required)
  req_to_token                                     array of rows of int32, rows of equal length (required)
  verify_capacity, write_req_capacity              int64 (required: capacities are inputs, no default)
  swa_window_size, kv_token_id_vs_position_offset  int32 (missing or null: 0)
  full_to_swa_index_mapping                        array of int64 (missing or null: no LUT)
  req_to_verify_expected_tokens                    array of rows of int32 (missing or null: no pool)
  req_to_verify_expected_tokens_valid_lens         array of int64 (missing or null: absent)
Keys starting with '_' are ignored; any other key is an error. {"steps": [case, ...]} runs the
cases in order on one set of outputs (equal capacities); `run` then prints the last step's plan
plus "steps", every step's plan with "write_seed_slot_indices_all".
Limits (docs/cli-limits.md; they keep memory under 1.5 GiB): a case file of at most 32 MiB;
write_req_capacity <= 2^22; verify arrays are allocated with min(verify_capacity, prefix
tokens of the batch) entries, which must be <= 2^23; run prints at most 2^26 array entries.

Exit status: 0 success (check: library and reference agree); 1 check or demo found a disagreement;
2 rejected input or command line (one line on stderr); 3 internal error.
)";
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CommandLine cl;
  if (args.empty()) throw UsageError("missing command (run, check, demo, --help or --version)");

  const std::string& command = args.front();
  if (command == "--help" || command == "-h" || command == "help") return cl;
  if (command == "--version") {
    if (args.size() > 1) throw UsageError("--version takes no arguments, got '" + args[1] + "'");
    cl.command = Command::Version;
    return cl;
  }
  if (command == "run") cl.command = Command::Run;
  else if (command == "check") cl.command = Command::Check;
  else if (command == "demo") cl.command = Command::Demo;
  else throw UsageError("unknown command '" + command + "' (expected run, check, demo, --help or --version)");

  std::vector<std::string> positional;
  bool seen_iterations = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      cl.command = Command::Help;
      return cl;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (arg.size() > 1 && arg[0] == '-') throw UsageError("unknown option '" + arg + "'");
      positional.push_back(arg);  // includes "-" for stdin
      continue;
    }
    const std::size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (name != "--backend" && name != "--algorithm" && name != "--iterations")
      throw UsageError("unknown option '" + arg + "'");
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else {
      if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
      value = args[++i];
    }
    if (name == "--backend") {
      cl.backend = checked_backend(value);
    } else if (name == "--algorithm") {
      cl.algorithm = parse_algorithm(value);
    } else {
      cl.iterations = parse_iterations(value);
      seen_iterations = true;
    }
  }

  if (cl.command == Command::Demo) {
    if (!positional.empty()) throw UsageError("demo takes no file, got '" + positional.front() + "'");
  } else {
    if (seen_iterations) throw UsageError("--iterations is an option of demo only");
    if (positional.empty()) throw UsageError(command + " needs a case file (FILE.json, or - for stdin)");
    if (positional.size() > 1) throw UsageError(command + " takes one case file, got also '" + positional[1] + "'");
    cl.file = positional.front();
  }
  return cl;
}

}  // namespace cli
}  // namespace kvcanary
