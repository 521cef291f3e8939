#ifndef KVCANARY_RUNTIME_IMPL_PUMP_IN_WRITE_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_IN_WRITE_HPP

// The in-graph snapshot (pump_in_graph.hpp) folded into the forward's last write, so that it adds no
// kernel to the forward's graph: on CUDA's write path the write kernel's last block to finish writes the
// mailbox (impl/write_cuda.hpp's epilogue). Elsewhere (host backends, the portable write) nothing is folded
// and the caller launches the snapshot's own kernel after the write.

#include <kvcanary/runtime/impl/mail_by_block.hpp>
#include <kvcanary/runtime/impl/pump_in_graph.hpp>
#include <kvcanary/stages/write.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

template <class ExecutionSpace>
struct MailFold {
  // Launches the write with the snapshot in it and returns true, or launches nothing and returns false.
  template <class Functor>
  static bool write_and_mail(const ExecutionSpace&, const Functor&, CanaryAlgorithm, const MailboxWriter&, unsigned*) {
    return false;
  }
};

#ifdef KOKKOS_ENABLE_CUDA
// The snapshot by the write's last block (mail_by_block.hpp).
struct MailboxEpilogue {
  static constexpr bool kActive = true;
  static_assert(MailboxWriter::kOpenItems <= CudaWrite::kLanes, "a write block's threads open every item at once");
  MailboxWriter writer;
  unsigned* done_blocks = nullptr;

  __device__ void operator()(int thread, int threads) const {
    __shared__ std::int64_t header[MailboxWriter::kHeaderWords];
    if (thread < MailboxWriter::kOpenItems) writer.open(thread, header);  // a write block has >= 32 threads
    __syncthreads();
    store_and_close_by_block(writer, header, thread, threads);
  }
};

template <>
struct MailFold<Kokkos::Cuda> {
  template <class Functor>
  static bool write_and_mail(const Kokkos::Cuda& space, const Functor& functor, CanaryAlgorithm algorithm,
                             const MailboxWriter& writer, unsigned* done_blocks) {
    if (algorithm == CanaryAlgorithm::Portable) return false;
    Kokkos::Profiling::pushRegion("kvcanary::write");
    const bool launched = WriteBackend<Kokkos::Cuda>::write<Functor, CudaWrite::SplitMultiply>(
        space, functor, MailboxEpilogue{writer, done_blocks});
    Kokkos::Profiling::popRegion();
    return launched;
  }
};
#endif

}  // namespace Impl
}  // namespace kvcanary

#endif
