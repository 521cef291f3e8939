#ifndef KVCANARY_RUNTIME_IMPL_MAIL_BY_BLOCK_HPP
#define KVCANARY_RUNTIME_IMPL_MAIL_BY_BLOCK_HPP

// The mailbox snapshot's stores by the threads of one CUDA block, for the kernels that carry a snapshot in a
// block of their own launch (pump_in_write.hpp, pump_in_plan.hpp): after the block opened the slot, every
// word stored, the checksum summed by warp shuffles and one word a warp, then closed by thread 0.

#include <kvcanary/runtime/impl/pump_in_graph.hpp>

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <cstdint>

namespace kvcanary {
namespace Impl {

// `thread` of `threads` (a multiple of 32, at most 1024), each with `sum`, the hashes of the words it stored:
// the block's total, then thread 0 closes the slot. A barrier of the whole block.
__device__ inline void sum_and_close_by_block(const MailboxWriter& writer, const std::int64_t* header,
                                              std::uint64_t sum, int thread, int threads) {
  constexpr int kLanes = 32;
  __shared__ std::uint64_t by_warp[1024 / kLanes];
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (thread % kLanes == 0) by_warp[thread / kLanes] = sum;
  __syncthreads();
  if (thread == 0) {
    std::uint64_t total = 0;
    for (int w = 0; w < threads / kLanes; ++w) total += by_warp[w];
    writer.close(header, total);
  }
}

// Every word of the slot `header` (shared memory, opened by the block before a barrier), then the checksum.
__device__ inline void store_and_close_by_block(const MailboxWriter& writer, const std::int64_t* header, int thread,
                                                int threads) {
  std::uint64_t sum = 0;
  const std::int64_t words = writer.words(header);
  for (std::int64_t i = thread; i < words; i += threads) sum += writer.store(i, header);
  sum_and_close_by_block(writer, header, sum, thread, threads);
}

}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
