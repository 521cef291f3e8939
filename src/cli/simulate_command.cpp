// `kvcanary simulate` (simulate_command.hpp): options into kvcanary::sim::SimulationOptions, then the run.

#include "simulate_command.hpp"

#include "backends.hpp"
#include "cli_error.hpp"
#include "command_line.hpp"
#include "kokkos_session.hpp"

#include <sim/memory_bound.hpp>
#include <sim/simulate.hpp>
#include <sim/state_sim.hpp>
#include <sim/transfer_sim.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace kvcanary {
namespace cli {

namespace {

RealKvMode real_kv_mode(const std::string& text) {
  if (text == "none") return RealKvMode::None;
  if (text == "partial") return RealKvMode::Partial;
  if (text == "all") return RealKvMode::All;
  throw UsageError("--real-kv needs none, partial or all, got '" + text + "'");
}

// --faults through `parse` (a list of names), a bad name as a usage error.
template <class Parse>
auto faults_option(const std::string& value, Parse parse) {
  try {
    return parse(value);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--faults: ") + e.what());
  }
}

// The options of a model beside the one-engine model (`flag`: --two-places, --state) as (name, value) in
// order; an option not in `allowed` is a usage error naming those that apply.
std::vector<std::pair<std::string, std::string>> model_options(const std::vector<std::string>& args,
                                                               const std::string& flag,
                                                               const std::vector<std::string>& allowed) {
  std::vector<std::pair<std::string, std::string>> values;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) continue;
    const std::string name = option_name(args[i]);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw UsageError("simulate " + flag + ": option '" + args[i] + "' does not apply (" + list + " do)");
    }
    values.emplace_back(name, option_value(args, i));
  }
  return values;
}

std::uint64_t seed_option(const std::string& value) {
  return static_cast<std::uint64_t>(integer_option("--seed", value, 0, std::numeric_limits<std::int64_t>::max()));
}

// `simulate --two-places` (docs/simulator.md "Two places"): the prefill/decode/tier model and its transfer
// faults; only --steps, --seed, --faults (transfer fault names), --real-kv and --backend apply.
int two_places_command(const std::vector<std::string>& args, std::ostream& out) {
  sim::TransferSimOptions options;
  options.faults = sim::parse_transfer_faults("all");
  std::optional<std::string> backend;
  for (const auto& [name, value] :
       model_options(args, "--two-places", {"--steps", "--seed", "--faults", "--real-kv", "--backend"})) {
    if (name == "--steps") options.steps = integer_option(name, value, 1, 100000000);
    if (name == "--seed") options.seed = seed_option(value);
    if (name == "--real-kv") options.real_kv = real_kv_mode(value);
    if (name == "--backend") backend = checked_backend(value);
    if (name == "--faults") options.faults = faults_option(value, sim::parse_transfer_faults);
  }
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  const sim::TransferSimReport report = sim::simulate_transfer(options, backend.value_or("default"));
  out << sim::format_transfer_table(report);
  return report.ok() ? 0 : 1;
}

// `simulate --state` (docs/simulator.md "State slots"): requests with recurrent state slots and the state
// faults; only --steps, --seed, --faults (state fault names) and --backend apply.
int state_command(const std::vector<std::string>& args, std::ostream& out) {
  sim::StateSimOptions options;
  options.faults = sim::parse_state_faults("all");
  std::optional<std::string> backend;
  for (const auto& [name, value] : model_options(args, "--state", {"--steps", "--seed", "--faults", "--backend"})) {
    if (name == "--steps") options.steps = integer_option(name, value, 1, 100000000);
    if (name == "--seed") options.seed = seed_option(value);
    if (name == "--backend") backend = checked_backend(value);
    if (name == "--faults") options.faults = faults_option(value, sim::parse_state_faults);
  }
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  const sim::StateSimReport report = sim::simulate_state(options, backend.value_or("default"));
  out << sim::format_state_table(report);
  return report.ok() ? 0 : 1;
}

}  // namespace

int simulate_command(const std::vector<std::string>& args, std::ostream& out) {
  const bool two_places = std::find(args.begin(), args.end(), "--two-places") != args.end();
  const bool state = std::find(args.begin(), args.end(), "--state") != args.end();
  if (two_places && state) throw UsageError("simulate: --two-places and --state are two models, give one of them");
  if (two_places) return two_places_command(args, out);
  if (state) return state_command(args, out);
  sim::SimulationOptions options;
  options.faults = sim::parse_fault_classes("all");
  std::optional<std::string> backend;
  bool json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--spec-decode") {
      options.spec_decode = true;
      continue;
    }
    if (arg == "--full-batch") {
      options.full_batch = true;
      continue;
    }
    if (arg == "--json") {
      json = true;
      continue;
    }
    const std::string name = option_name(arg);
    const bool known = name == "--steps" || name == "--seed" || name == "--faults" || name == "--backend" ||
                       name == "--page-size" || name == "--swa" || name == "--max-batch" || name == "--real-kv" ||
                       name == "--output-tokens" || name == "--skip-canary-step" || name == "--verify-capacity" ||
                       name == "--health-check-every";
    if (!known) throw UsageError("simulate: unknown option '" + arg + "'");
    const std::string value = option_value(args, i);
    if (name == "--steps") options.steps = integer_option(name, value, 1, 100000000);
    if (name == "--seed") options.seed = seed_option(value);
    if (name == "--page-size") options.page_size = integer_option(name, value, 1, 256);
    if (name == "--swa") options.swa_window = static_cast<int>(integer_option(name, value, 0, 1 << 20));
    if (name == "--max-batch") options.max_batch = integer_option(name, value, 1, 4096);
    if (name == "--output-tokens") options.output_tokens = integer_option(name, value, 1, 1 << 16);
    if (name == "--real-kv") options.real_kv = real_kv_mode(value);
    if (name == "--skip-canary-step") options.skip_canary_step = integer_option(name, value, 0, 100000000);
    if (name == "--verify-capacity") options.verify_capacity = integer_option(name, value, 1, std::int64_t{1} << 32);
    if (name == "--health-check-every") options.health_check_every = integer_option(name, value, 0, 100000000);
    if (name == "--backend") backend = checked_backend(value);
    if (name == "--faults") options.faults = faults_option(value, sim::parse_fault_classes);
  }
  // The memory bound (docs/cli-limits.md), from the options alone, before anything is allocated.
  const std::int64_t bound = sim::peak_memory_bound(options);
  if (bound > sim::kMaxSimulationBytes)
    throw UsageError("simulate: these options need up to " + std::to_string(bound >> 20) +
                     " MiB (max batch " + std::to_string(options.max_batch) + ", " +
                     std::to_string(options.max_prompt + std::max(options.max_output, options.output_tokens)) +
                     " tokens a request), above simulate's memory bound of " +
                     std::to_string(sim::kMaxSimulationBytes >> 20) + " MiB: lower --max-batch or --output-tokens");
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  const sim::SimulationReport report = sim::simulate(options, backend.value_or("default"));
  out << (json ? sim::format_json(report) : sim::format_table(report));
  return report.ok() ? 0 : 1;
}

}  // namespace cli
}  // namespace kvcanary
