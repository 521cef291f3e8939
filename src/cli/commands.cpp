#include "commands.hpp"

#include "backends.hpp"
#include "canary_case.hpp"
#include "canary_commands.hpp"
#include "case_outputs.hpp"
#include "cli_error.hpp"
#include "compare.hpp"
#include "json_io.hpp"
#include "kokkos_session.hpp"
#include "plan_writer.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace kvcanary {
namespace cli {

namespace {

struct PreparedCase {
  CaseFile file;
  reference::Outputs outputs;  // poisoned, sized for every step
};

// Everything that can reject the case, before Kokkos starts.
PreparedCase prepare(CaseFile file, const std::string& path) {
  PreparedCase prepared;
  prepared.file = std::move(file);
  prepared.outputs = poisoned_outputs_for(prepared.file, path);
  return prepared;
}

std::string step_name(const CaseFile& file, std::size_t i) {
  return file.multi_step ? "step " + std::to_string(i + 1) + "/" + std::to_string(file.steps.size()) + ": " : "";
}

std::string scalars(const reference::Outputs& o) {
  return "verify_num_valid " + std::to_string(o.verify_num_valid) + ", enable " + std::to_string(o.enable) +
         ", write_num_valid_reqs " + std::to_string(o.write_num_valid_reqs) + ", input_error_bits " +
         std::to_string(o.input_error_bits) + ", first_bad_row " + std::to_string(o.first_bad_row);
}

}  // namespace

int plan_command(const CommandLine& command_line, std::ostream& out) {
  PreparedCase prepared = prepare(load_case(command_line.file, CaseKind::Plan).plan_file, command_line.file);
  const CaseFile& file = prepared.file;
  PlanOptions options;
  options.algorithm = plan_algorithm(command_line);
  const auto batch_size = [](const Case& step) {
    return static_cast<std::int64_t>(step.inputs.req_pool_indices.size());
  };

  // Each step is printed as soon as it is planned, so the output costs no memory (plan_writer.hpp); the
  // last step's plan follows "steps" rather than preceding it. Nothing is printed before the first plan
  // succeeds, so that a failure there leaves stdout empty.
  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  for (std::size_t i = 0; i < file.steps.size(); ++i) {
    plan_on_backend(command_line.backend, file.steps[i].inputs, prepared.outputs, options);
    if (!file.multi_step) continue;
    out << (i == 0 ? "{\"steps\":[{" : ",{");
    write_plan_members(out, prepared.outputs, batch_size(file.steps[i]), true);
    out << '}';
  }
  out << (file.multi_step ? "]," : "{");
  write_plan_members(out, prepared.outputs, batch_size(file.steps.back()), file.multi_step);
  out << "}\n";
  return 0;
}

namespace {

int check_plan(const CommandLine& command_line, CaseFile case_file, std::ostream& out) {
  PreparedCase prepared = prepare(std::move(case_file), command_line.file);
  const CaseFile& file = prepared.file;
  PlanOptions options;
  options.algorithm = plan_algorithm(command_line);
  canary_algorithm(command_line, CaseKind::Plan);  // refuses --canary-algorithm
  reference::Outputs expected = prepared.outputs;
  reference::Outputs library = std::move(prepared.outputs);

  Kokkos::ScopeGuard kokkos(kokkos_arguments());
  const std::string who = "library (" + describe_execution_space(command_line.backend) + "; algorithm " +
                          algorithm_name(options.algorithm) + ")";
  for (std::size_t i = 0; i < file.steps.size(); ++i) {
    const Case& step = file.steps[i];
    std::string library_error, reference_error;
    try {
      plan_on_backend(command_line.backend, step.inputs, library, options);
    } catch (const std::invalid_argument& e) {
      library_error = e.what();
    }
    try {
      reference::plan(step.inputs, expected);
    } catch (const std::invalid_argument& e) {
      reference_error = e.what();
    }
    if (!library_error.empty() && library_error == reference_error)
      throw RejectedInput(command_line.file + ": " + library_error);  // both reject it: a rejected input
    if (library_error != reference_error) {
      out << "check: " << command_line.file << ": " << step_name(file, i) << who << " and reference DISAGREE: "
          << "library " << (library_error.empty() ? "accepted the call" : "threw: " + library_error)
          << "; reference " << (reference_error.empty() ? "accepted the call" : "threw: " + reference_error) << '\n';
      return 1;
    }
    if (const auto difference = first_difference(expected, library)) {
      out << "check: " << command_line.file << ": " << step_name(file, i) << who
          << " and reference DISAGREE at " << *difference << '\n';
      return 1;
    }
    out << "check: " << command_line.file << ": " << step_name(file, i) << who
        << " agrees with the reference on every output element (" << scalars(library) << ")\n";
  }
  return 0;
}

}  // namespace

int check_command(const CommandLine& command_line, std::ostream& out) {
  LoadedCase loaded = load_case(command_line.file, std::nullopt);
  if (loaded.kind == CaseKind::Plan) return check_plan(command_line, std::move(loaded.plan_file), out);
  return check_canary_case(command_line, std::move(loaded.canary), out);
}

}  // namespace cli
}  // namespace kvcanary
