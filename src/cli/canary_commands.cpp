#include "canary_commands.hpp"

#include "backends.hpp"
#include "case_outputs.hpp"
#include "canary_work.hpp"
#include "canary_writer.hpp"
#include "cli_error.hpp"
#include "compare.hpp"
#include "kokkos_session.hpp"
#include "plan_writer.hpp"

#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/write_outcomes.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvcanary {
namespace cli {

namespace {

// What a call leaves: the buffer, the ring, and the plan it ran on (step: the one it made).
struct CanaryRun {
  reference::CanaryBuffer buffer;
  reference::ViolationRing ring;
  reference::Outputs plan;
};

// The starting state of a case, with every check done (step: the plan's, limits.hpp included), so that
// nothing is rejected once Kokkos runs. Moves the case's buffer and plan out.
CanaryRun prepare(CanaryCase& c, const std::string& path) {
  CanaryRun run;
  if (c.kind == CaseKind::Step) {
    CaseFile file;
    file.steps.push_back(c.plan_case);
    run.plan = poisoned_outputs_for(file, path);
  } else {
    run.plan = std::move(c.plan);
  }
  try {
    check_canary_work(c, run.plan);  // before anything runs (limits.hpp)
  } catch (const RejectedInput& e) {
    throw RejectedInput(path + ": " + e.what());
  }
  run.buffer = std::move(c.buffer);
  run.ring.capacity = c.ring_capacity;
  return run;
}

// The algorithms a command line asks for a case of `kind` (UsageError for a name the stage lacks).
struct Algorithms {
  PlanOptions plan;  // step only
  CanaryAlgorithm canary = CanaryAlgorithm::Default;
};

Algorithms algorithms_for(const CommandLine& command_line, CaseKind kind) {
  Algorithms algorithms;
  if (kind == CaseKind::Step) algorithms.plan.algorithm = plan_algorithm(command_line);
  algorithms.canary = canary_algorithm(command_line, kind);
  return algorithms;
}

void run_library(const std::optional<std::string>& backend, const Algorithms& algorithms, const CanaryCase& c,
                 CanaryRun& run) {
  with_execution_space(backend, [&](const auto& space) {
    if (c.kind == CaseKind::Step) plan_host_data(space, c.plan_case.inputs, run.plan, algorithms.plan);
    if (c.kind != CaseKind::Write)
      verify_host_data(space, run.plan, {&run.buffer}, {c.kernel_kind}, {&c.real_kv}, c.check_expected_token, c.checks,
                       run.ring, algorithms.canary);
    if (c.kind != CaseKind::Verify)
      write_host_data(space, run.plan, c.tokens, c.kernel_kind, c.real_kv, run.buffer, run.ring, algorithms.canary);
  });
  sort_ring_rows(run.ring);
}

// The reference's run; when its write call leaves outcomes open (SPEC-CANARY §4), `before_write` gets the
// state the write started from, so that another outcome can be checked against it.
void run_reference(const CanaryCase& c, CanaryRun& run, std::optional<CanaryRun>& before_write) {
  if (c.kind == CaseKind::Step) reference::plan(c.plan_case.inputs, run.plan);
  if (c.kind != CaseKind::Write)
    reference::verify(run.plan, run.buffer, c.kernel_kind, c.real_kv, c.check_expected_token, c.checks, run.ring);
  if (c.kind != CaseKind::Verify) {
    if (reference::open_writes(run.plan, c.tokens, static_cast<std::int64_t>(run.buffer.size())).any())
      before_write = run;
    reference::write(run.plan, c.tokens, c.kernel_kind, c.real_kv, run.buffer, run.ring);
  }
  sort_ring_rows(run.ring);
}

// "N seed reads and M slots", what SPEC-CANARY §4 leaves open in the case's write call.
std::string open_parts(const reference::OpenWrites& open) {
  const auto count = [](std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return count(open.contested_seeds.size(), "request whose seed slot another request writes",
               "requests whose seed slot another request writes") +
         " and " + count(open.shared_slots.size(), "slot written by several tokens", "slots written by several tokens");
}

// Runs `stages` and returns the message of the std::invalid_argument it throws, or "" when it runs through.
template <class Stages>
std::string error_of(Stages&& stages) {
  try {
    stages();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string summary(const CanaryRun& run) {
  return std::to_string(run.buffer.size()) + " slots, ring count " + std::to_string(run.ring.count) + " of capacity " +
         std::to_string(run.ring.capacity) +
         (ring_overflowed(run.ring) ? " (overflowed: which rows it kept is unspecified, they are not compared)" : "") +
         ", slot_run_counter " + std::to_string(run.ring.slot_run_counter) + ", kernel_run_counter " +
         std::to_string(run.ring.kernel_run_counter);
}

}  // namespace

int canary_command(const CommandLine& command_line, CaseKind kind, std::ostream& out) {
  CanaryCase c = load_case(command_line.file, kind).canary;
  CanaryRun run = prepare(c, command_line.file);
  const Algorithms algorithms = algorithms_for(command_line, kind);
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  run_library(command_line.backend, algorithms, c, run);
  out << '{';
  if (kind == CaseKind::Step) {
    write_plan_members(out, run.plan, static_cast<std::int64_t>(c.plan_case.inputs.req_pool_indices.size()), false);
    out << ',';
  }
  write_canary_members(out, run.buffer, run.ring);
  out << "}\n";
  return 0;
}

int check_canary_case(const CommandLine& command_line, CanaryCase c, std::ostream& out) {
  const std::string& path = command_line.file;
  CanaryRun library = prepare(c, path);
  CanaryRun expected = library;
  const Algorithms algorithms = algorithms_for(command_line, c.kind);  // usage errors before Kokkos starts
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  std::string who = std::string(case_kind_name(c.kind)) + " case: library (" +
                    describe_execution_space(command_line.backend) + "; ";
  if (c.kind == CaseKind::Step) who += "plan algorithm " + std::string(algorithm_name(algorithms.plan.algorithm)) + ", ";
  who += "canary algorithm " + std::string(canary_algorithm_name(algorithms.canary)) + ")";

  const std::string library_error = error_of([&] { run_library(command_line.backend, algorithms, c, library); });
  std::optional<CanaryRun> before_write;
  const std::string reference_error = error_of([&] { run_reference(c, expected, before_write); });
  if (!library_error.empty() && library_error == reference_error)
    throw RejectedInput(path + ": " + library_error);  // both reject it: a rejected input
  if (library_error != reference_error) {
    out << "check: " << path << ": " << who << " and reference DISAGREE: library "
        << (library_error.empty() ? "accepted the call" : "threw: " + library_error) << "; reference "
        << (reference_error.empty() ? "accepted the call" : "threw: " + reference_error) << '\n';
    return 1;
  }
  const auto plan_difference = c.kind == CaseKind::Step ? first_difference(expected.plan, library.plan) : std::nullopt;
  if (plan_difference) {
    out << "check: " << path << ": " << who << " and reference DISAGREE at " << *plan_difference << '\n';
    return 1;
  }
  const auto difference = first_canary_difference(expected.buffer, expected.ring, library.buffer, library.ring);
  if (!before_write) {  // every outcome is specified: the reference's is the only one
    if (difference) {
      out << "check: " << path << ": " << who << " and reference DISAGREE at " << *difference << '\n';
      return 1;
    }
    out << "check: " << path << ": " << who << " agrees with the reference on every record"
        << (ring_overflowed(library.ring) ? "" : " and ring row") << " (" << summary(library) << ")\n";
    return 0;
  }
  // SPEC-CANARY §4 leaves this write call's outcome open: any outcome it allows is right.
  const reference::OpenWrites open =
      reference::open_writes(expected.plan, c.tokens, static_cast<std::int64_t>(before_write->buffer.size()));
  const std::string unspecified = "the case's write call leaves open what SPEC-CANARY §4 does not specify (" +
                                  open_parts(open) + ")";
  if (!difference) {
    out << "check: " << path << ": " << who << " agrees with the reference on every record"
        << (ring_overflowed(library.ring) ? "" : " and ring row") << "; " << unspecified
        << ", and the library's outcome is the reference's serial one (" << summary(library) << ")\n";
    return 0;
  }
  const reference::WriteOutcomeCheck outcome =
      reference::check_write_outcome(expected.plan, c.tokens, c.kernel_kind, c.real_kv, before_write->buffer,
                                     before_write->ring, library.buffer, library.ring);
  if (outcome.allowed) {
    out << "check: " << path << ": " << who << " agrees with SPEC-CANARY §4: " << unspecified
        << ", and the library's outcome is one the SPEC allows (found among " << outcome.outcomes_tried
        << " of them; the reference's serial order gives another, first different at " << *difference << ") ("
        << summary(library) << ")\n";
    return 0;
  }
  out << "check: " << path << ": " << who << " and reference DISAGREE at " << *difference << ", and "
      << (outcome.exhausted ? "none of the first " + std::to_string(outcome.outcomes_tried) +
                                  " outcomes SPEC-CANARY §4 allows matches it either (more were not tried)"
                            : "no outcome SPEC-CANARY §4 allows matches it either (" +
                                  std::to_string(outcome.outcomes_tried) + " tried)")
      << "; " << unspecified << '\n';
  return 1;
}

}  // namespace cli
}  // namespace kvcanary
