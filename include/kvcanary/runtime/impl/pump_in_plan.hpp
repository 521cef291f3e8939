#ifndef KVCANARY_RUNTIME_IMPL_PUMP_IN_PLAN_HPP
#define KVCANARY_RUNTIME_IMPL_PUMP_IN_PLAN_HPP

// The mailbox snapshot carried by the next forward's first plan (PumpSnapshot::WithNextPlan; docs/runtime.md,
// "The report pump"): forward N's snapshot is written by one extra block of forward N + 1's first head plan,
// so it adds no launch, no event and no work after the forward's last pass. That plan is the head pass's one
// launch up to 256 rows (the plan's kernel checks each entry where it makes it), or an offsets-only plan of one
// block (verify[from_inputs] after it; the rows kernel above 256 rows). What it reads is final while that plan
// runs: forward N's passes and the sweeps after it are done (stream order) and the passes after this plan have
// not started, but for what the plan's launch itself writes:
// * its pass's scalars (two words), which the snapshot takes from a copy instead, with no wait and no fence on
//   either side: the plan's scalar-writing thread also writes what it wrote into copy (launch & 1) of two,
//   `launch` counting its launches; the snapshot block, counting its own (the same launches), reads the
//   previous launch's copy, which this launch's writer does not touch;
// * in the checking launch, its pass's run counters, which the snapshot block adds itself once it has loaded
//   them, and the rows its checks append, which the snapshot mails only once whole (ride()). The ring count it
//   mails may include this launch's claims: the loss it reports is then a forward early, never late.
// Elsewhere (host backends, a plan the CUDA kernels decline) the runtime launches the one-team snapshot kernel
// before the plan.

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

// What the carrying plan needs: the snapshot's writer, where the plan's two scalar words are in the counter
// block, and the handover words (device memory): the writer's and the snapshot's launch counts, then the two
// copies of the scalar words. The Canary sets copy 1 to the scalars' initial words (what the first launch's
// snapshot reads) and the rest to 0.
struct PlanMail {
  static constexpr int kWriterLaunches = 0, kSnapshotLaunches = 1, kCopies = 2, kWords = kCopies + 4;
  MailboxWriter writer;
  std::int64_t* handover = nullptr;
  int scalars_at = 0;
};

#ifdef KOKKOS_ENABLE_CUDA
struct PlanMailRider {
  static constexpr bool kActive = true;
  static_assert(CudaPersistent::kTileThreads >= CounterBlock::kSize &&
                    CudaPersistent::kRowsThreads >= CounterBlock::kSize,
                "a plan block's threads hold a word of the counter block each");
  PlanMail mail;

  // The plan's scalar-writing thread: its launch count at the start, then the scalars it wrote, packed as the
  // counter block holds them (CounterBlock's flag order, int32 pairs in int64 words).
  __device__ std::int64_t before_scalars() const { return mail.handover[PlanMail::kWriterLaunches]; }
  __device__ void after_scalars(std::int64_t launch, const VerifyScalars& s) const {
    std::int64_t* copy = mail.handover + PlanMail::kCopies + 2 * (launch & 1);
    copy[0] = pack_int32_pair(s.enable, s.num_valid);
    copy[1] = pack_int32_pair(s.input_error_bits, s.first_bad_row);
    mail.handover[PlanMail::kWriterLaunches] = launch + 1;
  }

  // The extra block (kTileThreads or kRowsThreads threads, at least the counter block's words). Each thread
  // loads its word of the counter block at once (beside a checking plan, also its row's share of the pass's
  // verify total), while the first warp opens the slot and thread 32 takes the previous launch's copy: one
  // round trip to device memory before the stores. Beside a plan that appends (Appends::kAppends), once every
  // thread has loaded the counters (a barrier), one thread counts the plan's runs, so that the snapshot holds
  // the counters as they were before the launch; and the windows end at the first row not yet whole.
  template <class Appends>
  __device__ void ride(int thread, int threads, const Appends& appends) const {
    __shared__ std::int64_t header[MailboxWriter::kHeaderWords];
    __shared__ std::int64_t copied[2];
    __shared__ std::int64_t part_by_warp[1024 / 32];
    const std::int64_t mine = thread < CounterBlock::kSize ? mail.writer.block[thread] : 0;
    std::int64_t part = appends.part(thread);
    if (thread < MailboxWriter::kOpenItems) mail.writer.open(thread, header, /*move_cursor=*/!Appends::kAppends);
    if (thread == 32) {
      static_assert(MailboxWriter::kOpenItems <= 32, "the first warp opens every item");
      // Both copies loaded with the count (one round trip, not two), then the previous launch's kept.
      std::int64_t* launches = mail.handover + PlanMail::kSnapshotLaunches;
      const std::int64_t* copies = mail.handover + PlanMail::kCopies;
      const std::int64_t launch = *launches, even[2] = {copies[0], copies[1]}, odd[2] = {copies[2], copies[3]};
      const bool previous_odd = ((launch + 1) & 1) != 0;
      copied[0] = previous_odd ? odd[0] : even[0];
      copied[1] = previous_odd ? odd[1] : even[1];
      *launches = launch + 1;
    }
    if constexpr (Appends::kAppends) {
      for (int offset = 16; offset > 0; offset /= 2) part += __shfl_down_sync(0xffffffffu, part, offset);
      if (thread % 32 == 0) part_by_warp[thread / 32] = part;
    }
    __syncthreads();
    if constexpr (Appends::kAppends) {
      if (thread == 0) {
        std::int64_t total = 0;
        for (int w = 0; w < threads / 32; ++w) total += part_by_warp[w];
        appends.count(total);
      }
      end_windows_at_whole_rows(thread, threads, header);
    }
    std::uint64_t sum = 0;
    const std::int64_t words = mail.writer.words(header);
    for (std::int64_t i = thread; i < words; i += threads) {
      if (i >= CounterBlock::kSize) {
        sum += mail.writer.store(i, header);
        continue;
      }
      const std::int64_t k = i - mail.scalars_at;  // i == thread here: threads >= the block's words
      sum += mail.writer.put(i, header, k >= 0 && k < 2 ? copied[k] : mine);
    }
    sum_and_close_by_block(mail.writer, header, sum, thread, threads);
  }

  // Beside a plan whose checks append to a ring (windows opened without moving the cursors): a row this launch
  // claimed may be half written, so each window ends at its first row whose fail-reason bits are still 0
  // (DeviceRing::push stores them last, after a fence; a ring's rows are 0 until pushed). Each thread fences
  // after its loads of the bits, so that the rows below an end, loaded after the barrier, are whole. A row not
  // yet whole goes with the next snapshot. Then the cursors move past the windows. Nothing to do, and no
  // barrier, when every window is empty (the clean step).
  __device__ void end_windows_at_whole_rows(int thread, int threads, std::int64_t* header) const {
    __shared__ unsigned long long first_open[kGroupKinds];
    bool any = false;
    for (int g = 0; g < kGroupKinds; ++g) any |= header[2 + 2 * g] > header[1 + 2 * g];  // block-uniform
    if (any) {
      if (thread < kGroupKinds) first_open[thread] = static_cast<unsigned long long>(header[2 + 2 * thread]);
      __syncthreads();
      for (int g = 0; g < kGroupKinds; ++g)
        for (std::int64_t k = header[1 + 2 * g] + thread; k < header[2 + 2 * g]; k += threads)
          if (*static_cast<const volatile std::int64_t*>(mail.writer.row_bits(g, k)) == 0)
            atomicMin(&first_open[g], static_cast<unsigned long long>(k));
      __threadfence();
      __syncthreads();
      if (thread < kGroupKinds) header[2 + 2 * thread] = static_cast<std::int64_t>(first_open[thread]);
      __syncthreads();
    }
    if (thread < kGroupKinds) mail.writer.advance(thread, header);
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
