#ifndef KVCANARY_IMPL_VERIFY_ENTRIES_CUDA_HPP
#define KVCANARY_IMPL_VERIFY_ENTRIES_CUDA_HPP

// The CUDA persistent plan's consuming sink (SPEC-CANARY §5.1, verify from the plan's inputs): each verify
// entry is checked against the targets where the plan's kernel makes it, instead of being stored and read
// back by a verify launch. For a batch of up to 256 rows the head pass is then one kernel (plan + verify of
// K and V), not two; the four verify arrays (32 B an entry) are neither written nor read.
//
// The run counters move as verify() moves them (SPEC-CANARY §5 steps 1-2, per target): kernel runs + 1,
// slot runs + the plan's verify total when it fits the capacity, + 0 on overflow (enable 0, no entry).

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/cuda_tiles.hpp>
#include <kvcanary/impl/hash.hpp>
#include <kvcanary/impl/verify_portable.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {
namespace CudaPersistent {

template <class MemorySpace>
struct CheckEntries {
  VerifyCall<MemorySpace> call;  // the targets, ring and options: what every verify route shares
  // SPEC-CANARY §11.7: an entry's chain link is masked by its batch row's identity (read only when set).
  DeviceVector<MemorySpace> req_identities;
  bool has_identities = false;

  __device__ void put(std::int64_t /*i*/, std::int64_t row, const EntryValues& v, bool /*streaming*/) const {
    call.check(VerifyEntry{v.slot, v.position, v.prev_slot, call.check_expected_token ? v.expected_token : -1,
                           has_identities ? identity_mask(req_identities(row)) : 0});
  }
  // As VerifyCall::count_runs() for item 0 of a plan whose scalars are (enable, num_valid) = write_totals()'s.
  __device__ void count_runs(std::int64_t total, std::int64_t capacity) const {
    call.count_runs(0, total > capacity ? 0 : 1, total > capacity ? capacity : total);
  }
};

}  // namespace CudaPersistent
}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
