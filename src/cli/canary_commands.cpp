#include "canary_commands.hpp"

#include "backends.hpp"
#include "case_outputs.hpp"
#include "canary_work.hpp"
#include "canary_writer.hpp"
#include "cli_error.hpp"
#include "compare.hpp"
#include "kokkos_session.hpp"
#include "plan_writer.hpp"

#include <kvcanary/canary_host_bridge.hpp>

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

void run_reference(const CanaryCase& c, CanaryRun& run) {
  if (c.kind == CaseKind::Step) reference::plan(c.plan_case.inputs, run.plan);
  if (c.kind != CaseKind::Write)
    reference::verify(run.plan, run.buffer, c.kernel_kind, c.real_kv, c.check_expected_token, c.checks, run.ring);
  if (c.kind != CaseKind::Verify) reference::write(run.plan, c.tokens, c.kernel_kind, c.real_kv, run.buffer, run.ring);
  sort_ring_rows(run.ring);
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
  const std::string reference_error = error_of([&] { run_reference(c, expected); });
  if (!library_error.empty() && library_error == reference_error)
    throw RejectedInput(path + ": " + library_error);  // both reject it: a rejected input
  if (library_error != reference_error) {
    out << "check: " << path << ": " << who << " and reference DISAGREE: library "
        << (library_error.empty() ? "accepted the call" : "threw: " + library_error) << "; reference "
        << (reference_error.empty() ? "accepted the call" : "threw: " + reference_error) << '\n';
    return 1;
  }
  auto difference = c.kind == CaseKind::Step ? first_difference(expected.plan, library.plan) : std::nullopt;
  if (!difference) difference = first_canary_difference(expected.buffer, expected.ring, library.buffer, library.ring);
  if (difference) {
    out << "check: " << path << ": " << who << " and reference DISAGREE at " << *difference << '\n';
    return 1;
  }
  out << "check: " << path << ": " << who << " agrees with the reference on every record"
      << (ring_overflowed(library.ring) ? "" : " and ring row") << " (" << summary(library) << ")\n";
  return 0;
}

}  // namespace cli
}  // namespace kvcanary
