#ifndef KVCANARY_CLI_CASE_OUTPUTS_HPP
#define KVCANARY_CLI_CASE_OUTPUTS_HPP

// The host outputs a case runs on: checked before anything is allocated, kept within the CLI's
// memory limits, and poisoned so that `check` can tell written entries from untouched ones.

#include "json_io.hpp"
#include "limits.hpp"

#include <kvcanary/tools/reference_plan.hpp>

#include <cstdint>
#include <string>

namespace kvcanary {
namespace cli {

// The fill of every output before the first plan call: a value no case of the tests produces.
// (Scalars get its low 32 bits.)
constexpr std::int64_t kPoison = static_cast<std::int64_t>(0xDEADBEEFDEADBEEFull);

// Checks write_req_capacity against its limit (first: the library's checks compute capacity + 1), runs the
// library's host-side checks of SPEC §4 (check_plan_shapes, with the capacities as declared) on every step,
// then the CLI's other limits (limits.hpp), and returns poisoned outputs for the whole file.
// Throws std::invalid_argument (the library's message) or RejectedInput; allocates nothing before that.
reference::Outputs poisoned_outputs_for(const CaseFile& file);

// The same, with every rejection (the library's checks included) thrown as RejectedInput naming `path`.
reference::Outputs poisoned_outputs_for(const CaseFile& file, const std::string& path);

}  // namespace cli
}  // namespace kvcanary

#endif
