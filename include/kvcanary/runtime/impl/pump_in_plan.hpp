#ifndef KVCANARY_RUNTIME_IMPL_PUMP_IN_PLAN_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_IN_PLAN_HPP

// The mailbox snapshot carried by the next forward's first plan (PumpSnapshot::WithNextPlan; docs/runtime.md,
// "The report pump"): forward N's snapshot is written by one extra block of forward N + 1's first head plan,
// an offsets-only plan of one block up to 256 rows (the rows kernel above), so it adds no launch, no event and
// no work after the forward's last pass. Everything it reads is final while that plan runs: forward N's passes
// and the sweeps after it are done (stream order), the passes after this plan have not started, and the plan
// writes none of the counter block but its pass's scalars (two words). Those two the plan's scalar-writing
// thread hands over first: at the start of its kernel it copies their old values into `handoff` and raises
// handoff[0]; the snapshot block waits for it, takes them and lowers it for the next launch (one writer, one
// reader a launch). Elsewhere (host backends, a plan the CUDA kernels decline) the runtime launches the
// one-team snapshot kernel before the plan instead.

#include <kvcanary/runtime/impl/counter_block.hpp>
#include <kvcanary/runtime/impl/pump_in_graph.hpp>
#include <kvcanary/stages/plan_and_verify.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <kvcanary/impl/cuda_tiles.hpp>
#include <kvcanary/impl/cuda_two_launches.hpp>
#include <kvcanary/runtime/impl/mail_by_block.hpp>
#endif

namespace kvcanary {
namespace Impl {

// What the carrying plan needs: the snapshot's writer, the handoff words ([0] raised, [1, 2] the scalars' old
// values; device memory, zero before the first launch) and where the plan's scalars are in the counter block.
struct PlanMail {
  MailboxWriter writer;
  std::int64_t* handoff = nullptr;
  int scalars_at = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
struct PlanMailRider {
  static constexpr bool kActive = true;
  static constexpr int kPollThread = 32;  // the second warp waits while the first opens the slot
  static constexpr long kMaxPolls = 1l << 20;
  static_assert(MailboxWriter::kOpenItems <= kPollThread, "the first warp opens every item");
  static_assert(CudaPersistent::kTileThreads >= CounterBlock::kSize && CudaPersistent::kRowsThreads >= CounterBlock::kSize,
                "a plan block's threads hold a word of the counter block each");
  PlanMail mail;

  __device__ static std::int64_t load(const std::int64_t* word) { return *static_cast<const volatile std::int64_t*>(word); }
  __device__ static void store(std::int64_t* word, std::int64_t value) { *static_cast<volatile std::int64_t*>(word) = value; }

  // The plan's scalar-writing thread, before it writes them (same thread, same words: in order).
  __device__ void before_scalars() const {
    const std::int64_t first = load(mail.writer.block + mail.scalars_at);
    const std::int64_t second = load(mail.writer.block + mail.scalars_at + 1);
    store(mail.handoff + 1, first);
    store(mail.handoff + 2, second);
    __threadfence();
    store(mail.handoff, 1);
  }

  // The extra block (kTileThreads or kRowsThreads threads, at least the counter block's words). Each thread
  // loads its word of the counter block at once, while the first warp opens the slot and the second waits for
  // the handoff: one round trip to device memory before the stores, not three in a row.
  __device__ void ride(int thread, int threads) const {
    __shared__ std::int64_t header[MailboxWriter::kHeaderWords];
    __shared__ std::int64_t held[2];
    __shared__ bool handed;
    const std::int64_t mine = thread < CounterBlock::kSize ? load(mail.writer.block + thread) : 0;
    if (thread < MailboxWriter::kOpenItems) mail.writer.open(thread, header);
    if (thread == kPollThread) {
      // The plan's block starts with the handoff; the bound only keeps a device that never ran it from hanging
      // (the snapshot then takes the two words as they are).
      long polls = 0;
      while (load(mail.handoff) == 0 && ++polls < kMaxPolls) {
      }
      __threadfence();
      handed = polls < kMaxPolls;
      held[0] = load(mail.handoff + 1);
      held[1] = load(mail.handoff + 2);
      if (handed) store(mail.handoff, 0);
    }
    __syncthreads();
    std::uint64_t sum = 0;
    const std::int64_t words = mail.writer.words(header);
    for (std::int64_t i = thread; i < words; i += threads) {
      if (i >= CounterBlock::kSize) {
        sum += mail.writer.store(i, header);
        continue;
      }
      const std::int64_t k = i - mail.scalars_at;  // i == thread here: threads >= the block's words
      sum += mail.writer.put(i, header, handed && k >= 0 && k < 2 ? held[k] : mine);
    }
    sum_and_close_by_block(mail.writer, header, sum, thread, threads);
  }
};
#endif

// plan_and_verify() after an offsets-only plan whose first launch carries the snapshot; false: nothing was
// launched (not CUDA, or its kernels declined), and the caller launches the snapshot kernel, then the plan.
template <class ExecutionSpace>
struct PlanMailCarrier {
  template <class MemorySpace>
  static bool plan_and_verify(const ExecutionSpace&, const PlanMail&, const PlanInputs<MemorySpace>&,
                              const VerifyPlan<MemorySpace>&, const WritePlan<MemorySpace>&,
                              const PlanStatus<MemorySpace>&, const PlanWorkspace<MemorySpace>&,
                              const std::vector<VerifyTarget<MemorySpace>>&, const ViolationRing<MemorySpace>&,
                              const PlanOptions&, const VerifyOptions&) {
    return false;
  }
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct PlanMailCarrier<Kokkos::Cuda> {
  template <class MemorySpace>
  static bool plan_and_verify(const Kokkos::Cuda& space, const PlanMail& mail, const PlanInputs<MemorySpace>& inputs,
                              const VerifyPlan<MemorySpace>& verify_plan, const WritePlan<MemorySpace>& write_plan,
                              const PlanStatus<MemorySpace>& status, const PlanWorkspace<MemorySpace>& workspace,
                              const std::vector<VerifyTarget<MemorySpace>>& targets,
                              const ViolationRing<MemorySpace>& ring, const PlanOptions& plan_options,
                              const VerifyOptions& verify_options) {
    return plan_and_verify_carrying(space, inputs, verify_plan, write_plan, status, workspace, targets, ring,
                                    plan_options, verify_options, PlanMailRider{mail});
  }
};
#endif

}  // namespace Impl
}  // namespace kvcanary

#endif
