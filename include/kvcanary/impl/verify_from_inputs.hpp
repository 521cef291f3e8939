#ifndef KVCANARY_IMPL_VERIFY_FROM_INPUTS_HPP
#define KVCANARY_IMPL_VERIFY_FROM_INPUTS_HPP

// The head verify of plan_and_verify() (SPEC-CANARY §5.1): the verify entries launched as in
// verify_portable.hpp, but the entry is computed from the plan's inputs instead of read from the
// VerifyPlan's four arrays (32 bytes an entry neither stored by the plan nor loaded back). Item i finds
// its row in the workspace's verify_offsets (the plan's scan wrote them, stream-ordered before this
// launch) and takes its values from entry_values(), the code the plan's entries stage stores, so the two
// routes cannot disagree on an entry.

#include <kvcanary/impl/device_outputs.hpp>
#include <kvcanary/impl/entry_search.hpp>
#include <kvcanary/impl/hash.hpp>
#include <kvcanary/impl/row_rules.hpp>
#include <kvcanary/impl/verify_portable.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class MemorySpace>
struct VerifyFromInputsFunctor {
  DeviceInputs<MemorySpace> in;
  DeviceOutputs<MemorySpace> out;            // read only: the scalars and verify_offsets the plan wrote
  DeviceVector<MemorySpace> req_identities;  // SPEC-CANARY §11.7: read only when has_identities
  bool has_identities;
  std::int64_t batch_size;
  VerifyCall<MemorySpace> call;

  // Entry i (launch_canary_entries()); whether it was active.
  KOKKOS_INLINE_FUNCTION bool item(const std::int64_t i) const {
    const std::int32_t enable = out.enable();
    if (!call.count_runs(i, enable, active_entries(out.verify_num_valid(), out.verify_capacity()))) return false;
    // i < active <= verify_offsets(bs): a batch of at least one row, and the owner row is not empty.
    const std::int64_t row = owner_row(out.verify_offsets, 0, batch_size - 1, i);
    const EntryValues v = entry_values(in, in.row_fields(row), i - out.verify_offsets(row));
    // The identity of the entry's request, as the plan's identity launch copies it (identities.hpp).
    const std::int64_t mask = has_identities ? identity_mask(req_identities(row)) : 0;
    call.check(VerifyEntry{v.slot, v.position, v.prev_slot, call.check_expected_token ? v.expected_token : -1, mask});
    return true;
  }
};

template <class ExecutionSpace, class MemorySpace>
void launch_verify_from_inputs(const ExecutionSpace& space, const VerifyFromInputsFunctor<MemorySpace>& functor) {
  // Entries past the host's bound on the total are never active: the launch stops there, below the capacity.
  launch_canary_entries(space, "kvcanary::verify[from_inputs]",
                        functor.in.verify_total_bound(functor.batch_size, functor.out.verify_capacity()), functor);
}

}  // namespace Impl
}  // namespace kvcanary

#endif
