#ifndef KVCANARY_HEAD_FINGERPRINT_HPP
#define KVCANARY_HEAD_FINGERPRINT_HPP

// A real-KV fingerprint that survives re-sharding (SPEC-CANARY §12.6): per token, a sum over the global
// heads of each head's mixed fold, so that any split of the heads between ranks (prefill TP 2, decode TP 4)
// and any declared layout give the same value once the ranks' partial sums are added.
//
//   head_fingerprints(space, slots, shard, out, ring[, options]);          // out[i]: this rank's partial sum
//   // the engine all-reduces `out` (sum of int64, mod 2^64) over its ranks, on both sides
//   check_fingerprints(space, slots, expected, actual, ring[, options]);    // bit 4 rows where they differ
//
// * A shard: this rank's KV bytes of one tensor (K or V of a layer), [pages, row_bytes], with the offset of
//   (slot, local head j) = (slot / page_size) * row stride + (slot % page_size) * token_stride_bytes
//   + j * head_stride_bytes; heads first_head .. first_head + num_heads - 1 of the model's, head_bytes each.
// * Negative slots are padding (out 0, not compared); head_fingerprints of a slot >= the shard's
//   pages * page_size gives 0 and an OUT_OF_RANGE row.
// * kernel_run_counter += 1 per call; slot_run_counter += the slots fingerprinted / compared.
// * Asynchronous on `space`, no allocation, no copy, no fence (capturable); host errors before any launch.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/canary_validate.hpp>
#include <kvcanary/impl/head_fingerprint_portable.hpp>
#include <kvcanary/stages/transfer.hpp>

#include <type_traits>

namespace kvcanary {

template <class MemorySpace>
struct HeadShard {
  Kokkos::View<const std::uint8_t**, Kokkos::LayoutStride, MemorySpace> bytes;  // [pages, row_bytes]
  std::int64_t page_size = 1;
  std::int64_t token_stride_bytes = 0;  // between the tokens of a page
  std::int64_t head_stride_bytes = 0;   // between this rank's heads of a token
  std::int64_t head_bytes = 16;         // bytes of one head of one token (a positive multiple of 16)
  std::int64_t first_head = 0;          // the global index of this rank's first head
  std::int64_t num_heads = 1;           // this rank's heads
};

namespace Impl {

// The shape rules of a shard (shared with the host reference): every read in bounds for every slot below
// pages * page_size, every 16-byte read at a multiple of 16 from the row's start.
struct HeadShardShape {
  std::int64_t pages = 0, row_bytes = 0, page_size = 1, token_stride = 0, head_stride = 0, head_bytes = 16;
  std::int64_t first_head = 0, num_heads = 1;
};

inline void check_head_shard(const char* where, const HeadShardShape& s) {
  if (s.page_size < 1) throw_invalid_in(where, "shard.page_size is ", s.page_size, ", must be >= 1");
  if (s.head_bytes < 16 || s.head_bytes % 16 != 0)
    throw_invalid_in(where, "shard.head_bytes is ", s.head_bytes, ", must be a positive multiple of 16");
  if (s.token_stride < 0 || s.token_stride % 16 != 0 || s.head_stride < 0 || s.head_stride % 16 != 0)
    throw_invalid_in(where, "shard strides are ", s.token_stride, " and ", s.head_stride, " bytes, must be multiples of 16 >= 0");
  if (s.num_heads < 1 || s.first_head < 0 || s.first_head > (std::int64_t{1} << 40))
    throw_invalid_in(where, "shard heads ", s.first_head, " + ", s.num_heads, " are out of range");
  if (s.pages < 0 || s.row_bytes < 0) throw_invalid_in(where, "shard.bytes has a negative extent");
  // (page_size - 1) * token_stride + (num_heads - 1) * head_stride + head_bytes <= row_bytes, without
  // overflow: each product is bounded by row_bytes before it is formed.
  const std::int64_t limit = s.row_bytes;
  const auto fits = [&](std::int64_t count, std::int64_t stride, std::int64_t room) {
    return count <= 0 || stride == 0 || count <= room / stride;
  };
  bool ok = fits(s.page_size - 1, s.token_stride, limit) && fits(s.num_heads - 1, s.head_stride, limit);
  if (ok) {
    const std::int64_t last = (s.page_size - 1) * s.token_stride;
    const std::int64_t heads = (s.num_heads - 1) * s.head_stride;
    ok = last <= limit - heads && last + heads <= limit - s.head_bytes;
  }
  if (!ok && s.pages > 0)
    throw_invalid_in(where, "shard reads past its rows: ", s.page_size, " tokens of stride ", s.token_stride, ", ",
                     s.num_heads, " heads of stride ", s.head_stride, " and ", s.head_bytes, " bytes in rows of ",
                     s.row_bytes, " bytes");
}

template <class MemorySpace>
DeviceHeadShard device_head_shard(const char* where, const HeadShard<MemorySpace>& shard) {
  HeadShardShape s{extent_of(shard.bytes, 0), extent_of(shard.bytes, 1), shard.page_size, shard.token_stride_bytes,
                   shard.head_stride_bytes, shard.head_bytes, shard.first_head, shard.num_heads};
  check_head_shard(where, s);
  const std::int64_t row_stride = s.pages > 1 ? static_cast<std::int64_t>(shard.bytes.stride(0)) : 0;
  if (row_stride % 16 != 0) throw_invalid_in(where, "shard.bytes has a row stride of ", row_stride, " bytes, must be a multiple of 16");
  if (s.row_bytes > 1 && shard.bytes.stride(1) != 1) throw_invalid_in(where, "shard.bytes has column stride ", shard.bytes.stride(1), ", must be 1");
  if (reinterpret_cast<std::uintptr_t>(shard.bytes.data()) % 16 != 0)
    throw_invalid_in(where, "shard.bytes does not start at a 16-byte aligned address");
  if (s.pages > 0 && s.page_size > (std::int64_t{1} << 62) / s.pages) throw_invalid_in(where, "shard holds too many slots");
  return DeviceHeadShard{shard.bytes.data(), row_stride, s.page_size, s.token_stride, s.head_stride, s.head_bytes,
                         s.first_head, s.num_heads, s.pages * s.page_size};
}

}  // namespace Impl

namespace Impl {
template <class ValuesView, class MemorySpace>
constexpr bool check_fingerprint_view() {
  static_assert(Kokkos::is_view<ValuesView>::value && ValuesView::rank == 1 &&
                    std::is_same<std::remove_const_t<typename ValuesView::value_type>, std::int64_t>::value,
                "kvcanary fingerprints: fingerprint arrays are rank-1 Views of int64");
  static_assert(std::is_same<typename ValuesView::memory_space, MemorySpace>::value,
                "kvcanary fingerprints: fingerprint arrays must live in the shard's memory space");
  return true;
}
}  // namespace Impl

template <class ExecutionSpace, class SlotsView, class MemorySpace, class OutView>
void head_fingerprints(const ExecutionSpace& space, const SlotsView& slots, const HeadShard<MemorySpace>& shard,
                       const OutView& out, const ViolationRing<MemorySpace>& ring,
                       const TransferOptions& options = TransferOptions{}) {
  static_assert(Impl::check_transfer_types<ExecutionSpace, SlotsView, MemorySpace>());
  static_assert(Impl::check_fingerprint_view<OutView, MemorySpace>());
  static_assert(!std::is_const<typename OutView::value_type>::value, "kvcanary::head_fingerprints: out is written");
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  constexpr const char* kWhere = "head_fingerprints";
  Impl::check_slot_list(kWhere, "slots", slots);
  if (slots.extent(0) > 0 && out.data() == nullptr) Impl::throw_invalid_in(kWhere, "out is not allocated");
  if (out.extent(0) < slots.extent(0)) Impl::throw_invalid_in(kWhere, "out holds ", out.extent(0), " values, the slot list needs ", slots.extent(0));
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, options.kernel_kind);
  Impl::HeadFingerprintFunctor<MemorySpace, Index> functor{};
  functor.slots = slots;
  functor.out = out;
  functor.shard = Impl::device_head_shard(kWhere, shard);
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  Impl::launch_canary_items(space, "kvcanary::head_fingerprints[portable]", Impl::extent_of(slots), functor);
}

template <class ExecutionSpace, class SlotsView, class ValuesView, class MemorySpace>
void check_fingerprints(const ExecutionSpace& space, const SlotsView& slots, const ValuesView& expected,
                        const ValuesView& actual, const ViolationRing<MemorySpace>& ring,
                        const TransferOptions& options = TransferOptions{}) {
  static_assert(Impl::check_transfer_types<ExecutionSpace, SlotsView, MemorySpace>());
  static_assert(Impl::check_fingerprint_view<ValuesView, MemorySpace>());
  using Index = std::remove_const_t<typename SlotsView::value_type>;
  constexpr const char* kWhere = "check_fingerprints";
  Impl::check_slot_list(kWhere, "slots", slots);
  if (expected.extent(0) < slots.extent(0) || actual.extent(0) < slots.extent(0))
    Impl::throw_invalid_in(kWhere, "expected and actual hold ", expected.extent(0), " and ", actual.extent(0),
                           " values, the slot list needs ", slots.extent(0));
  if (slots.extent(0) > 0 && (expected.data() == nullptr || actual.data() == nullptr))
    Impl::throw_invalid_in(kWhere, "expected or actual is not allocated");
  Impl::check_ring(kWhere, ring);
  Impl::check_kernel_kind(kWhere, options.kernel_kind);
  Impl::CheckFingerprintsFunctor<MemorySpace, Index> functor{};
  functor.slots = slots;
  functor.expected = expected;
  functor.actual = actual;
  functor.ring = Impl::DeviceRing<MemorySpace>(ring);
  functor.kind = static_cast<std::int64_t>(options.kernel_kind);
  Impl::launch_canary_items(space, "kvcanary::check_fingerprints[portable]", Impl::extent_of(slots), functor);
}

}  // namespace kvcanary

#endif
