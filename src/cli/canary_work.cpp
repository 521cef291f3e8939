#include "canary_work.hpp"

#include "cli_error.hpp"
#include "limits.hpp"

#include <algorithm>
#include <string>

namespace kvcanary {
namespace cli {

namespace {

// reference::write's walk of one request: nothing for an empty span, one step for a span that starts
// outside the tokens (it stops there), else the span up to the first index past them.
std::int64_t walked(std::int64_t first, std::int64_t last, std::int64_t num_tokens) {
  if (first >= last) return 0;
  if (first < 0) return 1;
  return std::min(last - first, std::max<std::int64_t>(0, num_tokens - first) + 1);
}

std::int64_t folded_per_token(const reference::RealKv& real_kv) {
  if (real_kv.mode == RealKvMode::None) return 0;
  std::int64_t bytes = 0;  // <= 4 sources of at most 16 Mi bytes a token (the input limit)
  for (const reference::RealKvSource& source : real_kv.sources)
    bytes += real_kv.mode == RealKvMode::Partial ? 16 : source.read_bytes;
  return bytes;
}

}  // namespace

CanaryWork canary_work(const CanaryCase& c, const reference::Outputs& plan) {
  CanaryWork work;
  const auto num_tokens = static_cast<std::int64_t>(c.tokens.input_ids.size());
  if (c.kind == CaseKind::Verify) {
    const auto capacity = static_cast<std::int64_t>(plan.verify_slot_indices.size());
    work.verify_entries = plan.enable != 0 ? std::clamp<std::int64_t>(plan.verify_num_valid, 0, capacity) : 0;
  } else if (c.kind == CaseKind::Step) {
    // The verify arrays hold the plan's bound of its entries; the plan's spans are disjoint (an exclusive
    // prefix sum of non-negative lengths), so each request walks its own tokens and one step past them.
    work.verify_entries = static_cast<std::int64_t>(plan.verify_slot_indices.size());
    work.write_tokens_walked = num_tokens + static_cast<std::int64_t>(c.plan_case.inputs.req_pool_indices.size());
  } else {
    const auto capacity = static_cast<std::int64_t>(plan.write_seed_slot_indices.size());
    const std::int64_t reqs = std::clamp<std::int64_t>(plan.write_num_valid_reqs, 0, capacity);
    for (std::int64_t r = 0; r < reqs && work.write_tokens_walked <= kMaxWriteTokensWalked; ++r)
      work.write_tokens_walked += walked(plan.write_offsets[static_cast<std::size_t>(r)],
                                         plan.write_offsets[static_cast<std::size_t>(r) + 1], num_tokens);
  }
  // No overflow: entries <= 2^23, walked <= 2^24 + 2^22 (the loop stops past the limit), bytes <= 2^26 a token.
  work.folded_per_token = folded_per_token(c.real_kv);
  work.folded_bytes = (work.verify_entries + work.write_tokens_walked) * work.folded_per_token;
  return work;
}

void check_canary_work(const CanaryCase& c, const reference::Outputs& plan) {
  const CanaryWork work = canary_work(c, plan);
  if (work.write_tokens_walked > kMaxWriteTokensWalked)
    throw RejectedInput("write_plan.write_offsets: the write stage would walk more than " +
                        std::to_string(kMaxWriteTokensWalked) +
                        " tokens (spans that overlap are walked again), above kvcanary's work limit");
  if (work.folded_bytes > kMaxFoldedBytes)
    throw RejectedInput("real_kv: the stages would fold " + std::to_string(work.folded_bytes) + " real-KV bytes (" +
                        std::to_string(work.verify_entries + work.write_tokens_walked) + " entries and tokens x " +
                        std::to_string(work.folded_per_token) +
                        " bytes), above kvcanary's work limit of " + std::to_string(kMaxFoldedBytes));
}

}  // namespace cli
}  // namespace kvcanary
