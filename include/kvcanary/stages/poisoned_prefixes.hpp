#ifndef KVCANARY_POISONED_PREFIXES_HPP
#define KVCANARY_POISONED_PREFIXES_HPP

// Poisoned prefixes, attributed (SPEC-CANARY §11.6): from one step's violation rows and the step's batch,
// which requests read bad KV, from which position, and which slots must not be served again — so that an
// engine can evict or recompute those prefixes instead of only logging (SGLang #38319: a poisoned prefix
// persists until flush_cache). Host code on host copies, after the ring was read.

#include <kvcanary/tools/reference_plan.hpp>
#include <kvcanary/stages/report.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary {

struct PoisonedPrefix {
  std::int64_t batch_row = 0;           // request index in the batch
  std::int64_t pool_row = 0;            // req_pool_indices[batch_row]
  std::int64_t first_bad_position = 0;  // evict or recompute from here
  std::vector<std::int64_t> slots;      // distinct slots > 0 of positions [first_bad_position, prefix + extend), ascending
};

// Every launch tag (§1) of a canary group's slot space: the full group's kinds, the SWA group's kinds, ...
constexpr std::uint32_t kAllKernelKinds = (1u << kKernelKinds) - 1;
constexpr std::uint32_t kind_bit(KernelKind kind) { return 1u << static_cast<int>(kind); }

// Per active good batch row hit by a row whose kind is in `kinds`, ordered by batch row. A row hits
// (r, p) when p in [window_start, prefix + max(0, extend)) maps (req_to_token, then the LUT) to its slot;
// a METADATA_MISMATCH row hits (its batch row, prefix_lens of that row); rows of OUT_OF_RANGE alone are
// ignored. Throws std::invalid_argument for a batch whose shapes break SPEC §4's host rules.
std::vector<PoisonedPrefix> poisoned_prefixes(const std::vector<RingRow>& rows, const reference::Inputs& batch,
                                              std::uint32_t kinds = kAllKernelKinds);

// {"poisoned_prefixes": [{"batch_row": r, "pool_row": rp, "first_bad_position": p, "slots": [...]}, ...]}
std::string poisoned_prefixes_json(const std::vector<PoisonedPrefix>& prefixes);

}  // namespace kvcanary

#endif
