#ifndef KVCANARY_WRITE_OUTCOMES_HPP
#define KVCANARY_WRITE_OUTCOMES_HPP

// What SPEC-CANARY §4 leaves open in one write call, and whether a result is one of the outcomes it
// allows: the oracle for inputs on which reference::write()'s one serial order is not the only answer
// (`kvcanary check`, the simulator's tests). Host code on the reference's types.
//
// §4: "Two tokens of one call that target the same slot, or a slot that is one request's seed and
// another's target in the same call: the outcome is unspecified." The outcomes allowed here (decision in
// docs/design.md, "Outcomes SPEC-CANARY §4 leaves open"): every request walks its tokens as §4 says;
// * a seed read of a slot other requests store to sees, field by field (token, position, prev_hash: a
//   32-byte record is not stored atomically), the value before the call or a value one of those stores
//   wrote — never a value from a store that itself follows the read (no cycle of reads);
// * a slot that several tokens store to ends, field by field, with the value of one of those stores;
// * everything else — the other slots, every row, the counters — follows from those choices exactly.

#include <kvcanary/tools/reference_canary.hpp>

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace reference {

struct OpenWrites {
  std::vector<std::int64_t> contested_seeds;  // requests whose seed slot another request of the call stores to
  std::vector<std::int64_t> shared_slots;     // slots that two or more tokens of the call store to, ascending
  bool any() const { return !contested_seeds.empty() || !shared_slots.empty(); }
};

// The open parts of write(plan, tokens) on a buffer of num_slots records (what the call's offsets, seeds
// and slots say; no record is read). Call it on a call write() accepts.
OpenWrites open_writes(const Outputs& plan, const StepTokens& tokens, std::int64_t num_slots);

struct WriteOutcomeCheck {
  bool allowed = false;
  // Assignments of the open seed reads evaluated. Requests that no open read links are decided apart (one
  // group of linked requests at a time, its first assignment that explains its rows and slots is kept).
  std::int64_t outcomes_tried = 0;
  bool exhausted = false;  // more than max_outcomes assignments needed: undecided (allowed stays false)
};

// Whether (buffer_after, ring_after) is an outcome SPEC-CANARY §4 allows for
// write(plan, tokens, kernel_kind, real_kv) on (buffer_before, ring_before). Ring rows are compared as
// multisets; a ring that overflowed must hold a sub-multiset of the outcome's rows and the same count.
// Throws std::invalid_argument for a call reference::write() rejects.
WriteOutcomeCheck check_write_outcome(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind,
                                      const RealKv& real_kv, const CanaryBuffer& buffer_before,
                                      const ViolationRing& ring_before, const CanaryBuffer& buffer_after,
                                      const ViolationRing& ring_after, std::int64_t max_outcomes = 1 << 16);

}  // namespace reference
}  // namespace kvcanary

#endif
