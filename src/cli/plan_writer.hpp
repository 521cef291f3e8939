#ifndef KVCANARY_CLI_PLAN_WRITER_HPP
#define KVCANARY_CLI_PLAN_WRITER_HPP

// The SPEC §5 output of a plan, written straight to a stream: a JSON document of a plan cost ~16 bytes
// an entry and its text as much again, which made printing the largest part of the tool's memory.

#include <kvcanary/tools/reference_plan.hpp>

#include <cstdint>
#include <ostream>

namespace kvcanary {
namespace cli {

// Writes the members "verify_plan", "write_plan" and "status" of one plan, without the braces around
// them: verify arrays cut to verify_num_valid when enable == 1 and empty otherwise, write_offsets whole,
// the first batch_size seeds. With `whole_seeds`, write_plan also holds "write_seed_slot_indices_all",
// the whole array (what a multi-step case carries over).
void write_plan_members(std::ostream& out, const reference::Outputs& outputs, std::int64_t batch_size,
                        bool whole_seeds);

}  // namespace cli
}  // namespace kvcanary

#endif
