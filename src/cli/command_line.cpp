#include "command_line.hpp"

#include "backends.hpp"
#include "cli_error.hpp"

#include <charconv>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

// One row per subcommand; a new one (e.g. `simulate`) is a row here, a case in main.cpp's dispatch and
// a line in usage_text().
struct Subcommand {
  const char* name;
  Command command;
  bool reads_case;               // takes one FILE.json
  bool takes_canary_algorithm;   // --canary-algorithm
};

constexpr Subcommand kSubcommands[] = {
    {"plan", Command::Plan, true, false},    {"check", Command::Check, true, true},
    {"demo", Command::Demo, false, false},   {"verify", Command::Verify, true, false},
    {"write", Command::Write, true, false},  {"step", Command::Step, true, true},
    {"simulate", Command::Simulate, false, false},
};

std::string subcommand_list() {
  std::string list;
  for (const Subcommand& s : kSubcommands) list += std::string(list.empty() ? "" : ", ") + s.name;
  return list;
}

}  // namespace

const char* usage_text() {
  return R"(kvcanary: the KV-cache canary's plan, verify and write stages on one JSON case

Usage:
  kvcanary plan   [--backend B] [--algorithm A] FILE.json    print the plan (SPEC section 5)
  kvcanary verify [--backend B] [--algorithm C] FILE.json    verify a canary buffer (SPEC-CANARY 5)
  kvcanary write  [--backend B] [--algorithm C] FILE.json    write a step's records (SPEC-CANARY 4)
  kvcanary step   [--backend B] [--algorithm A] [--canary-algorithm C] FILE.json
                                                             plan -> verify -> write in one call
  kvcanary check  [--backend B] [--algorithm A|C] [--canary-algorithm C] FILE.json
                                                             compare the library with the reference
  kvcanary demo   [--backend B] [--algorithm A] [--iterations N]
                                                             time a built-in synthetic batch's plan
  kvcanary simulate [--steps N] [--seed N] [--faults CLASS,...|all|none] [--backend B] [--page-size N]
                    [--swa W] [--spec-decode] [--max-batch N] [--full-batch] [--output-tokens N]
                    [--real-kv none|partial|all] [--skip-canary-step N] [--verify-capacity N]
                    [--health-check-every N] [--json]
  kvcanary simulate --two-places [--steps N] [--seed N] [--faults CLASS,...|all|none] [--real-kv M] [--backend B]
  kvcanary simulate --state [--steps N] [--seed N] [--faults CLASS,...|all|none] [--backend B]
                                                             the engine simulator with fault injection
                                                             (docs/simulator.md; default: every fault class);
                                                             exit 1 when a detectable fault was missed or a
                                                             violation was left unexplained
  kvcanary --help | --version

Options:
  --backend B     serial | openmp | cuda (only those compiled into Kokkos);
                  default: Kokkos::DefaultExecutionSpace
  --algorithm A   plan, step, demo: the plan's entries path, default | portable | cuda-persistent
                  (off CUDA, cuda-persistent falls back to portable)
  --algorithm C   verify, write: the canary stages' path, default | portable | cuda (off CUDA, cuda
                  falls back to portable); check: A for a plan or step case, C for a verify or write case
  --canary-algorithm C   step, check of a step case: the verify and write stages' path
  --iterations N  demo: timed plan() calls after one warm-up (default 20)
  --full-batch    simulate: keep the batch full (max-batch requests every step, a finished one replaced
                  at once); the report times decode-only steps apart from steps with a prefill chunk
  --output-tokens N  simulate: every request's output is N tokens (default: drawn, median 24, <= 128)
  --skip-canary-step N   simulate: a fault of the canary itself: step N's canary replays are skipped
                  (the runtime's health check must report the canary not running)
  --verify-capacity N    simulate: the runtime's verify capacity (default: derived); too small, the
                  batches overflow it and the runtime must warn
  --health-check-every N simulate: the runtime's health check period in steps (default 50, 0: off)
  --two-places    simulate: a prefill and a decode engine with a host tier, records travelling with the
                  KV (SPEC-CANARY section 12); its faults: late_write, partial_transfer, layout_mixup,
                  stale_tier, defrag_bytes
  --state         simulate: requests with recurrent state slots, stamped after each update and checked at
                  each resume (SPEC-CANARY section 13); its faults: state_stale, state_boundary, state_alias;
                  exit 1 also when a fault found no step to host it (--faults none for a short clean run)
  FILE "-" reads standard input.

Plan case (plan; SPEC section 2 inputs):
  req_pool_indices, prefix_lens, extend_seq_lens   arrays of int64 (required)
  req_to_token                                     array of rows of int32, rows of equal length (required)
  verify_capacity, write_req_capacity              int64 (required: capacities are inputs, no default)
  swa_window_size, kv_token_id_vs_position_offset  int32 (missing or null: 0)
  full_to_swa_index_mapping                        array of int64 (missing or null: no LUT)
  req_to_verify_expected_tokens                    array of rows of int32 (missing or null: no pool)
  req_to_verify_expected_tokens_valid_lens         array of int64 (missing or null: absent)
  req_identities                                   array of int64 (SPEC-CANARY 11.7; missing: none)
{"steps": [case, ...]} plans the cases in order on one set of outputs (equal capacities); `plan` then
prints the last step's plan plus "steps", every step's plan with "write_seed_slot_indices_all".

Canary cases (SPEC-CANARY section 9):
  verify   canary_buffer, verify_plan, [check_expected_token, kernel_kind, ring_capacity, real_kv,
           check_slot_zero, check_freed (SPEC-CANARY 11, default false)]
  write    canary_buffer, write_plan, input_ids, positions, out_cache_loc,
           [expected_input_ids + expected_positions, chain_position_assert, kernel_kind, ring_capacity, real_kv]
  step     a plan case plus the write keys other than write_plan, and check_expected_token
  canary_buffer   array of [token, position, prev_hash, real_kv_hash] (int64), one per slot
  verify_plan     verify_num_valid, enable, verify_slot_indices, verify_expected_tokens,
                  verify_expected_positions, verify_prev_slot_indices (arrays of one length: the capacity),
                  [verify_identities (SPEC-CANARY 11.7, the same length)]
  write_plan      write_offsets (capacity + 1 entries), write_seed_slot_indices, write_num_valid_reqs,
                  [write_identities (as many as the seeds; 11.7)]
  kernel_kind     a launch tag name (default HEAD_K_FULL); ring_capacity >= 0 (default 1024)
  real_kv         {"mode": "none"|"partial"|"all", "sources": [{"page_size", "bytes_per_token",
                  "read_bytes", "rows": [[byte, ...], ...]}, ...]}
They print {"canary_buffer", "ring": {"count", "capacity", "rows"}, "slot_run_counter",
"kernel_run_counter", "report", "report_dropped"} (step: and the plan's keys), ring rows sorted.
`check` tells a case's kind by its keys: verify_plan -> verify, write_plan -> write, canary_buffer
alone -> step, none of them -> plan.
Keys starting with '_' are ignored; any other unknown key is an error.
Limits (docs/cli-limits.md; they keep memory under 1.5 GiB): a case file of at most 32 MiB;
write_req_capacity <= 2^22; plan verify arrays are allocated with min(verify_capacity, prefix
tokens of the batch) entries, which must be <= 2^23; plan prints at most 2^26 array entries;
canary_buffer <= 2^21 slots; ring_capacity <= 2^20; token arrays <= 2^22 entries. Work: the write
stage walks at most 2^24 tokens (overlapping write_offsets count again); at most 2^30 real-KV bytes
are folded. simulate: options whose memory bound is above 1.5 GiB are refused.

Exit status: 0 success (check: library and reference agree); 1 check or demo found a disagreement;
2 rejected input or command line (one line on stderr); 3 internal error.
)";
}

std::int64_t integer_option(const std::string& option, const std::string& text, std::int64_t lo, std::int64_t hi) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no leading space and no '+'; the whole text must be the number.
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < lo || value > hi)
    throw UsageError(option + " needs a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'");
  return value;
}

std::string option_name(const std::string& arg) { return arg.substr(0, arg.find('=')); }

std::string option_value(const std::vector<std::string>& args, std::size_t& i) {
  const std::string& arg = args[i];
  const std::size_t equals = arg.find('=');
  if (equals != std::string::npos) return arg.substr(equals + 1);
  if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
  return args[++i];
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CommandLine cl;
  if (args.empty()) throw UsageError("missing command (" + subcommand_list() + ", --help or --version)");

  const std::string& command = args.front();
  if (command == "--help" || command == "-h" || command == "help") return cl;
  if (command == "--version") {
    if (args.size() > 1) throw UsageError("--version takes no arguments, got '" + args[1] + "'");
    cl.command = Command::Version;
    return cl;
  }
  const Subcommand* subcommand = nullptr;
  for (const Subcommand& s : kSubcommands)
    if (command == s.name) subcommand = &s;
  if (subcommand == nullptr)
    throw UsageError("unknown command '" + command + "' (expected " + subcommand_list() + ", --help or --version)");
  cl.command = subcommand->command;
  cl.name = command;
  if (cl.command == Command::Simulate) {  // options of its own (simulate_command.cpp)
    for (std::size_t i = 1; i < args.size(); ++i)
      if (args[i] == "--help" || args[i] == "-h") cl.command = Command::Help;
    cl.simulate_args.assign(args.begin() + 1, args.end());
    return cl;
  }

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
    const std::string name = option_name(arg);
    if (name != "--backend" && name != "--algorithm" && name != "--iterations" && name != "--canary-algorithm")
      throw UsageError("unknown option '" + arg + "'");
    const std::string value = option_value(args, i);
    if (name == "--backend") {
      cl.backend = checked_backend(value);
    } else if (name == "--algorithm") {
      cl.algorithm = value;
    } else if (name == "--canary-algorithm") {
      if (!subcommand->takes_canary_algorithm)
        throw UsageError("--canary-algorithm is an option of step and check (" + command + " takes --algorithm)");
      cl.canary_algorithm = value;
    } else {
      cl.iterations = static_cast<int>(integer_option(name, value, 1, 100000));
      seen_iterations = true;
    }
  }

  if (!subcommand->reads_case) {
    if (!positional.empty()) throw UsageError(command + " takes no file, got '" + positional.front() + "'");
  } else {
    if (seen_iterations) throw UsageError("--iterations is an option of demo only");
    if (positional.empty()) throw UsageError(command + " needs a case file (FILE.json, or - for stdin)");
    if (positional.size() > 1) throw UsageError(command + " takes one case file, got also '" + positional[1] + "'");
    cl.file = positional.front();
  }
  // The names are checked now where the stage is known; check checks them once it knows the case's kind.
  if (cl.command == Command::Plan || cl.command == Command::Demo || cl.command == Command::Step) plan_algorithm(cl);
  if (cl.command == Command::Verify) canary_algorithm(cl, CaseKind::Verify);
  if (cl.command == Command::Write) canary_algorithm(cl, CaseKind::Write);
  if (cl.command == Command::Step) canary_algorithm(cl, CaseKind::Step);
  return cl;
}

EntriesAlgorithm plan_algorithm(const CommandLine& cl) {
  return cl.algorithm ? parse_algorithm(*cl.algorithm) : EntriesAlgorithm::Default;
}

CanaryAlgorithm canary_algorithm(const CommandLine& cl, CaseKind kind) {
  if (kind == CaseKind::Plan) {
    if (cl.canary_algorithm) throw UsageError("--canary-algorithm is for a verify, write or step case, not a plan case");
    return CanaryAlgorithm::Default;
  }
  const std::optional<std::string>& name = kind == CaseKind::Step ? cl.canary_algorithm : cl.algorithm;
  if (kind != CaseKind::Step && cl.canary_algorithm) {
    if (cl.algorithm) throw UsageError("give the canary algorithm of a verify or write case once (--algorithm)");
    return parse_canary_algorithm(*cl.canary_algorithm);
  }
  return name ? parse_canary_algorithm(*name) : CanaryAlgorithm::Default;
}

}  // namespace cli
}  // namespace kvcanary
