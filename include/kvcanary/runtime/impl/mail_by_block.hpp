#ifndef KVCANARY_RUNTIME_IMPL_MAIL_BY_BLOCK_HPP
#define KVCANARY_RUNTIME_IMPL_MAIL_BY_BLOCK_HPP

// The mailbox snapshot's stores by the threads of one CUDA block, for the kernels that carry a snapshot in a
// block of their own launch (pump_in_write.hpp, pump_in_plan.hpp): after the block opened the slot, every
// word stored and the checksum summed by warp shuffles into one part a warp.

#include <kvcanary/runtime/impl/pump_in_graph.hpp>

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <cstdint>

namespace kvcanary {
namespace Impl {

// `thread` of `threads` (a multiple of 32, at most 1024), each with `sum`, the hashes of the words it stored:
// thread 0 adds the header's, each warp's lane 0 puts its warp's total as a part of the checksum and the
// threads put the parts no warp has. No barrier: the host adds the parts up (pump_in_graph.hpp).
__device__ inline void sum_by_warps(const MailboxWriter& writer, const std::int64_t* header, std::uint64_t sum,
                                    int thread, int threads) {
  constexpr int kLanes = 32;
  static_assert(MailboxLayout::kSums * kLanes >= 1024, "a part for every warp of a block");
  if (thread == 0) sum += writer.store_header(header);
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (thread % kLanes == 0) writer.put_sum(header, thread / kLanes, sum);
  for (int part = threads / kLanes + thread; part < MailboxLayout::kSums; part += threads)
    writer.put_sum(header, part, 0);
}

// Every word of the slot `header` (shared memory, opened by the block before a barrier), then the checksum.
__device__ inline void store_and_sum_by_block(const MailboxWriter& writer, const std::int64_t* header, int thread,
                                              int threads) {
  std::uint64_t sum = 0;
  const std::int64_t words = writer.words(header);
  for (std::int64_t i = thread; i < words; i += threads) sum += writer.store(i, header);
  sum_by_warps(writer, header, sum, thread, threads);
}

}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
