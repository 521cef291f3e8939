#ifndef KVCANARY_RUNTIME_IMPL_COUNTER_BLOCK_HPP
#define KVCANARY_RUNTIME_IMPL_COUNTER_BLOCK_HPP

// The runtime's device counters in one int64 block, so that the report pump snapshots all of them with
// one device copy: per group, the ring's count, a kernel run counter and a slot run counter per
// (stage, launch tag), the plan scalars of the head and sweep passes (int32 pairs in int64 words: the
// VerifyPlan / PlanStatus Views of the passes point here), and the SWA divergence counts.

#include <kvcanary/stages/canary_types.hpp>

#include <cstdint>

namespace kvcanary {
namespace Impl {

enum class CounterStage : int { Verify = 0, Write = 1 };
constexpr int kCounterStages = 2;

struct CounterBlock {
  static constexpr int kCount = 0;
  static constexpr int kKernelRuns = 1;                                      // [stage][tag]
  static constexpr int kSlotRuns = kKernelRuns + kCounterStages * kKernelKinds;  // [stage][tag]
  static constexpr int kFlags = kSlotRuns + kCounterStages * kKernelKinds;   // 8 int32 in 4 words
  static constexpr int kSwaDivergence = kFlags + 4;
  static constexpr int kSwaOutOfWindow = kSwaDivergence + 1;
  static constexpr int kGroupStride = 64;
  static constexpr int kGroups = 3;
  static constexpr int kSize = kGroups * kGroupStride;
  static_assert(kSwaOutOfWindow < kGroupStride, "the counters of a group fit its stride");

  // The int32 flags, in int32 units from the group's base; each pass's four in this order (the runtime reads
  // input_error_bits and first_bad_row at enable + 2 and + 3).
  enum Flag : int {
    kHeadEnable = 0,
    kHeadNumValid,
    kHeadInputErrors,
    kHeadFirstBadRow,
    kSweepEnable,
    kSweepNumValid,
    kSweepInputErrors,
    kSweepFirstBadRow,
  };

  // Device code calls these too: a constexpr function without KOKKOS_INLINE_FUNCTION is host-only, and where
  // device code calls one nvcc only warns (#20013) and the device code is undefined (f2051c9's snapshot kernel
  // lost the calling branch and mailed no rows on CUDA). The CUDA build makes that warning an error (CMakeLists.txt).
  KOKKOS_INLINE_FUNCTION static constexpr int group_base(int group) { return group * kGroupStride; }
  // A group's ring count, as an index into the whole block.
  KOKKOS_INLINE_FUNCTION static constexpr int count_index(int group) { return group_base(group) + kCount; }
  KOKKOS_INLINE_FUNCTION static constexpr int kernel_runs(int stage, int tag) {
    return kKernelRuns + stage * kKernelKinds + tag;
  }
  KOKKOS_INLINE_FUNCTION static constexpr int slot_runs(int stage, int tag) {
    return kSlotRuns + stage * kKernelKinds + tag;
  }
  KOKKOS_INLINE_FUNCTION static constexpr int int32_index(int flag) { return 2 * kFlags + flag; }
};

// Two int32 flags as the block holds them in one int64 word: `first` in the low half (little-endian: x86 and
// NVIDIA GPUs), as CounterBlock::int32_index() addresses them.
KOKKOS_INLINE_FUNCTION std::int64_t pack_int32_pair(std::int32_t first, std::int32_t second) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<std::uint32_t>(first)) |
                                   (static_cast<std::uint64_t>(static_cast<std::uint32_t>(second)) << 32));
}

}  // namespace Impl
}  // namespace kvcanary

#endif
