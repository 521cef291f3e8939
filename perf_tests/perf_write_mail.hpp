#ifndef KVCANARY_PERF_WRITE_MAIL_HPP
#define KVCANARY_PERF_WRITE_MAIL_HPP

// The in-graph pump's snapshot taken apart (CUDA only; docs/perf-notes.md, "The in-graph pump measured"): the
// write of K and V with, folded into its last block, each part of the runtime's epilogue in turn, so that
// differences against write_kv/<case>/cuda/graph (no epilogue) give what each part costs the stream:
//   write_kv_mail/<case>/count_only/graph    the grid-wide completion count alone (a fence and one atomicAdd a
//                                             block, the last block's fence and reset)
//   write_kv_mail/<case>/mail_device/graph   the whole snapshot (runtime/impl/pump_in_write.hpp) into a
//                                             mailbox in device memory: no store leaves the GPU
//   write_kv_mail/<case>/mail_pinned/graph   the same into pinned host memory, as the runtime takes it
// The snapshot's counter block is a zeroed device array and no group mails ring rows (a clean step's
// snapshot: the counters and the header). Checked like write_kv/ (records, ring, counters), and the epilogue
// ran once a call: the completion count back at 0, the forward number at the calls made.

#include "perf_timing.hpp"

#include <kvcanary/kvcanary.hpp>
#include <kvcanary/runtime/impl/pump_in_write.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvcanary_perf {

enum class MailPart { CountOnly, DeviceMailbox, PinnedMailbox };

inline std::vector<std::pair<MailPart, std::string>> mail_parts() {
  return {{MailPart::CountOnly, "count_only"},
          {MailPart::DeviceMailbox, "mail_device"},
          {MailPart::PinnedMailbox, "mail_pinned"}};
}

#ifdef KOKKOS_ENABLE_CUDA
// The completion count of an active epilogue with nothing after it.
struct CountOnlyEpilogue {
  static constexpr bool kActive = true;
  unsigned* done_blocks = nullptr;
  __device__ void operator()(int, int) const {}
};

// What the epilogue writes and reads, allocated once (labelled) on the benchmark's instance.
struct MailTargets {
  MailPart part;
  Kokkos::View<std::int64_t*, Kokkos::CudaSpace> block, mailed, device_mailbox;
  Kokkos::View<std::int64_t, Kokkos::CudaSpace> forward_seq;
  Kokkos::View<unsigned, Kokkos::CudaSpace> done_blocks;
  Kokkos::View<std::int64_t*, Kokkos::CudaHostPinnedSpace> pinned_mailbox;
  kvcanary::Impl::MailboxWriter writer;

  MailTargets(const Kokkos::Cuda& space, MailPart part_, std::int64_t window) : part(part_) {
    using kvcanary::Impl::CounterBlock;
    using kvcanary::Impl::MailboxLayout;
    MailboxLayout layout;
    layout.window = window;
    const std::int64_t words = MailboxLayout::kSlots * layout.slot_words();
    block = decltype(block)(Kokkos::view_alloc(space, "kvcanary_perf::mail_counter_block"), CounterBlock::kSize);
    mailed = decltype(mailed)(Kokkos::view_alloc(space, "kvcanary_perf::mail_rows_mailed"), kvcanary::kGroupKinds);
    forward_seq = decltype(forward_seq)(Kokkos::view_alloc(space, "kvcanary_perf::mail_forward_seq"));
    done_blocks = decltype(done_blocks)(Kokkos::view_alloc(space, "kvcanary_perf::mail_done_blocks"));
    if (part == MailPart::DeviceMailbox)
      device_mailbox = decltype(device_mailbox)(Kokkos::view_alloc(space, "kvcanary_perf::mail_device_mailbox"), words);
    if (part == MailPart::PinnedMailbox)
      pinned_mailbox = decltype(pinned_mailbox)(Kokkos::view_alloc(space, "kvcanary_perf::mail_pinned_mailbox"), words);
    writer.block = block.data();
    writer.forward_seq = forward_seq.data();
    writer.mailed = mailed.data();
    writer.mailbox = part == MailPart::PinnedMailbox ? pinned_mailbox.data() : device_mailbox.data();
    writer.layout = layout;
    writer.capacity = window;  // no group is on (rows null): only the counters and the header are mailed
    space.fence();
  }

  // The write of `targets` with this part folded into its last block.
  template <class Plan, class Tokens, class Targets, class Ring>
  void write(const Kokkos::Cuda& space, const Plan& plan, const Tokens& tokens, const Targets& targets,
             const Ring& ring) const {
    kvcanary::Impl::with_write_functor<Kokkos::Cuda>(plan, tokens, targets, ring, [&](const auto& functor) {
      using Functor = std::remove_cv_t<std::remove_reference_t<decltype(functor)>>;
      using Backend = kvcanary::Impl::WriteBackend<Kokkos::Cuda>;
      using Hash = kvcanary::Impl::CudaWrite::SplitMultiply;
      const bool launched =
          part == MailPart::CountOnly
              ? Backend::template write<Functor, Hash>(space, functor, CountOnlyEpilogue{done_blocks.data()})
              : Backend::template write<Functor, Hash>(space, functor,
                                                       kvcanary::Impl::MailboxEpilogue{writer, done_blocks.data()});
      if (!launched) throw CheckFailure("the CUDA write kernel cannot run on this space");
    });
  }

  // After `calls` calls (the caller fenced): the count reset by each call's last block, one forward a call.
  void expect_ran(std::int64_t calls, const std::string& when) const {
    unsigned done = 0;
    std::int64_t seq = 0;
    Kokkos::deep_copy(done, done_blocks);
    Kokkos::deep_copy(seq, forward_seq);
    expect(done == 0u, when + ": the completion count is " + std::to_string(done) + ", not back at 0");
    if (part != MailPart::CountOnly)
      expect(seq == calls, when + ": the epilogue numbered " + std::to_string(seq) + " forwards, want " +
                               std::to_string(calls));
  }
};

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace kvcanary_perf

#endif
