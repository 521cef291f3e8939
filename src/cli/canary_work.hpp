#ifndef KVCANARY_CLI_CANARY_WORK_HPP
#define KVCANARY_CLI_CANARY_WORK_HPP

// The work bound of a canary case (limits.hpp, docs/cli-limits.md): what the verify and write stages
// will walk and fold, counted from the case and its plan before Kokkos starts.

#include "canary_case.hpp"

#include <kvcanary/reference.hpp>

#include <cstdint>

namespace kvcanary {
namespace cli {

struct CanaryWork {
  std::int64_t verify_entries = 0;       // entries the verify stage checks (step: the plan's bound)
  std::int64_t write_tokens_walked = 0;  // token visits of the write stage, overlaps counted again
  std::int64_t folded_per_token = 0;     // real-KV bytes folded an entry or stored token
  std::int64_t folded_bytes = 0;         // real-KV bytes folded by both
};

// `plan` is the plan the stages will run on: the case's own (verify, write) or the outputs sized for
// the plan a step makes.
CanaryWork canary_work(const CanaryCase& c, const reference::Outputs& plan);

// Throws RejectedInput when the work is above kMaxWriteTokensWalked or kMaxFoldedBytes.
void check_canary_work(const CanaryCase& c, const reference::Outputs& plan);

}  // namespace cli
}  // namespace kvcanary

#endif
