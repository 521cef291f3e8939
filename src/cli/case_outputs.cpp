#include "case_outputs.hpp"

#include "cli_error.hpp"

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvcanary {
namespace cli {

namespace {

// The shapes the library will see for a step, with the capacities the case declares.
void check_step(const Case& step) {
  PlanShapes shapes = reference::shapes_of(step.inputs, reference::Outputs{});
  for (std::int64_t& extent : shapes.verify_extents) extent = step.verify_capacity;
  shapes.write_req_capacity = step.write_req_capacity;
  shapes.write_offsets = step.write_req_capacity + 1;
  // The outputs hold identity arrays of the capacities exactly when the step has identities (SPEC-CANARY §11.7).
  shapes.has_verify_identities = shapes.has_write_identities = shapes.has_identities;
  shapes.verify_identities = step.verify_capacity;
  shapes.write_identities = step.write_req_capacity;
  check_plan_shapes(shapes);
  reference::check_flat_sizes(step.inputs);
}

// An upper bound of SPEC §4's total, stopping at `limit`: a good row has prefix_lens <= max_seq_len
// and verifies at most its prefix; padding and bad rows verify nothing.
std::int64_t total_bound(const Case& step, std::int64_t limit) {
  const reference::Inputs& in = step.inputs;
  std::int64_t bound = 0;
  for (std::size_t r = 0; r < in.req_pool_indices.size() && bound < limit; ++r) {
    if (in.req_pool_indices[r] == 0) continue;
    bound += std::clamp<std::int64_t>(in.prefix_lens[r], 0, in.max_seq_len);
  }
  return std::min(bound, limit);
}

// Array entries `run` prints for a step (plan_writer.hpp), from the same bounds as the allocation.
std::int64_t printed_entries(const Case& step, std::int64_t verify_entries, bool whole_seeds) {
  const auto batch_size = static_cast<std::int64_t>(step.inputs.req_pool_indices.size());
  const std::int64_t identities = step.inputs.req_identities ? verify_entries + batch_size : 0;  // SPEC-CANARY §11.7
  return 4 * verify_entries + (step.write_req_capacity + 1) + batch_size + (whole_seeds ? step.write_req_capacity : 0) +
         identities;
}

}  // namespace

reference::Outputs poisoned_outputs_for(const CaseFile& file) {
  const Case& first = file.steps.front();  // the steps share their capacities (parse_case_file)
  if (first.write_req_capacity > kMaxWriteReqCapacity)
    throw RejectedInput("write_req_capacity is " + std::to_string(first.write_req_capacity) +
                        ", above kvcanary's limit of " + std::to_string(kMaxWriteReqCapacity) +
                        " (write_offsets is printed whole)");
  for (std::size_t i = 0; i < file.steps.size(); ++i) {
    // The steps share one set of outputs: with identity arrays (SPEC-CANARY §11.7) for all or for none.
    if (file.steps[i].inputs.req_identities.has_value() != first.inputs.req_identities.has_value())
      throw RejectedInput("steps[" + std::to_string(i) + "]: req_identities is given in some steps only (all or none)");
    try {
      check_step(file.steps[i]);
    } catch (const std::invalid_argument& e) {
      if (!file.multi_step) throw;
      throw std::invalid_argument("steps[" + std::to_string(i) + "]: " + e.what());
    }
  }
  std::int64_t verify_entries = 0;
  for (const Case& step : file.steps)
    verify_entries = std::max(verify_entries, total_bound(step, first.verify_capacity));
  // With identities the verify arrays are five, not four (SPEC-CANARY §11.7): 4/5 of the entries, the same bytes.
  const std::int64_t max_entries = first.inputs.req_identities ? kMaxVerifyEntries / 5 * 4 : kMaxVerifyEntries;
  if (verify_entries > max_entries)
    throw RejectedInput("the verify arrays would need " + std::to_string(verify_entries) +
                        " entries (verify_capacity " + std::to_string(first.verify_capacity) +
                        ", capped by the batch's prefix tokens), above kvcanary's limit of " +
                        std::to_string(max_entries) + (first.inputs.req_identities ? " (with req_identities)" : ""));
  // A multi-step file prints every step and then the last one again. No overflow: each term is bounded by
  // the limits above and the steps by the input size.
  std::int64_t printed = file.multi_step ? printed_entries(file.steps.back(), verify_entries, true) : 0;
  for (std::size_t i = 0; i < file.steps.size(); ++i)
    printed += printed_entries(file.steps[i], total_bound(file.steps[i], first.verify_capacity), file.multi_step);
  if (printed > kMaxPrintedEntries)
    throw RejectedInput("the output could hold " + std::to_string(printed) + " array entries" +
                        (file.multi_step ? " over " + std::to_string(file.steps.size()) + " steps" : "") +
                        ", above kvcanary's limit of " + std::to_string(kMaxPrintedEntries));
  reference::Outputs outputs = reference::make_outputs(verify_entries, first.write_req_capacity, kPoison);
  if (first.inputs.req_identities) {
    outputs.verify_identities.emplace(static_cast<std::size_t>(verify_entries), kPoison);
    outputs.write_identities.emplace(static_cast<std::size_t>(first.write_req_capacity), kPoison);
  }
  return outputs;
}

reference::Outputs poisoned_outputs_for(const CaseFile& file, const std::string& path) {
  try {
    return poisoned_outputs_for(file);
  } catch (const std::invalid_argument& e) {  // the library's checks; bad_alloc goes on to main
    throw RejectedInput(path + ": " + e.what());
  } catch (const RejectedInput& e) {
    throw RejectedInput(path + ": " + e.what());
  }
}

}  // namespace cli
}  // namespace kvcanary
