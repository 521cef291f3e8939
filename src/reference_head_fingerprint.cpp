// The serial host reference of SPEC-CANARY §12.6: the re-sharding-invariant head fingerprint and its
// comparison, in the SPEC's words. Bytes are read as little-endian words whatever the host's order.

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/stages/head_fingerprint.hpp>
#include <kvcanary/tools/reference_transfer.hpp>

#include "reference_ring.hpp"

namespace kvcanary {
namespace reference {

using detail::check_ring;
using detail::record_violation;
using detail::wrapping_add;

namespace {

std::uint64_t word_at(const std::vector<std::uint8_t>& bytes, std::int64_t offset) {
  std::uint64_t w = 0;
  for (int b = 7; b >= 0; --b) w = (w << 8) | bytes[static_cast<std::size_t>(offset + b)];
  return w;
}

std::int64_t partial(const HeadShard& shard, std::int64_t slot) {
  std::uint64_t sum = 0;
  const std::int64_t token = (slot / shard.page_size) * shard.row_bytes + (slot % shard.page_size) * shard.token_stride_bytes;
  for (std::int64_t j = 0; j < shard.num_heads; ++j) {
    std::uint64_t acc = 0;
    for (std::int64_t o = 0; o < shard.head_bytes; o += 16) {
      const std::int64_t at = token + j * shard.head_stride_bytes + o;
      acc = Impl::splitmix64(acc ^ word_at(shard.bytes, at));
      acc = Impl::splitmix64(acc ^ word_at(shard.bytes, at + 8));
    }
    const std::uint64_t head = static_cast<std::uint64_t>(shard.first_head + j);
    sum += Impl::splitmix64(Impl::splitmix64(head + 0x9E3779B97F4A7C15ULL) ^ acc);
  }
  return Impl::as_int64(sum);
}

}  // namespace

void head_fingerprints(const std::vector<std::int64_t>& slots, const HeadShard& shard, std::vector<std::int64_t>& out,
                       KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "head_fingerprints";
  Impl::check_head_shard(function, Impl::HeadShardShape{shard.pages, shard.row_bytes, shard.page_size,
                                                        shard.token_stride_bytes, shard.head_stride_bytes,
                                                        shard.head_bytes, shard.first_head, shard.num_heads});
  if (!Impl::holds(shard.bytes.size(), shard.pages, shard.row_bytes))
    Impl::throw_invalid_in(function, "shard.bytes holds ", shard.bytes.size(), " bytes, not ", shard.pages, " x ", shard.row_bytes);
  if (out.size() < slots.size()) Impl::throw_invalid_in(function, "out holds ", out.size(), " values, the slot list needs ", slots.size());
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  const std::int64_t capacity = shard.pages * shard.page_size;
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  std::int64_t computed = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::int64_t slot = slots[i];
    out[i] = 0;
    if (slot >= capacity) record_violation(ring, kernel_kind, slot, -1, -1, -1, -1, static_cast<std::int64_t>(i), kOutOfRange);
    if (slot < 0 || slot >= capacity) continue;
    out[i] = partial(shard, slot);
    ++computed;
  }
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, computed);
}

void check_fingerprints(const std::vector<std::int64_t>& slots, const std::vector<std::int64_t>& expected,
                        const std::vector<std::int64_t>& actual, KernelKind kernel_kind, ViolationRing& ring) {
  constexpr const char* function = "check_fingerprints";
  if (expected.size() < slots.size() || actual.size() < slots.size())
    Impl::throw_invalid_in(function, "expected and actual hold ", expected.size(), " and ", actual.size(),
                           " values, the slot list needs ", slots.size());
  Impl::check_kernel_kind(function, kernel_kind);
  check_ring(function, ring);
  ring.kernel_run_counter = wrapping_add(ring.kernel_run_counter, 1);
  std::int64_t compared = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    ++compared;
    if (expected[i] != actual[i])
      record_violation(ring, kernel_kind, slots[i], -1, -1, -1, actual[i], expected[i], kVerifyRealKvHash);
  }
  ring.slot_run_counter = wrapping_add(ring.slot_run_counter, compared);
}

}  // namespace reference
}  // namespace kvcanary
