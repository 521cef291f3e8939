#ifndef KVCANARY_CANARY_TYPES_HPP
#define KVCANARY_CANARY_TYPES_HPP

// The data of the canary stages (SPEC-CANARY §1, §3): the canary buffer, the violation ring, the launch
// tags and fail reasons, the real-KV sources, and the options of write() and verify(). Every device
// type is a bundle of Kokkos Views in one memory space; copying one copies handles, not data.

#include <kvcanary/stages/plan_shape_checks.hpp>

#include <Kokkos_Core.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvcanary {

// SPEC-CANARY §1: the launch tag stamped in field 0 of every ring row.
enum class KernelKind : std::int32_t {
  HEAD_K_FULL = 0,
  HEAD_V_FULL = 1,
  TAIL_K_FULL = 2,
  TAIL_V_FULL = 3,
  SWEEP_K_FULL = 4,
  SWEEP_V_FULL = 5,
  HEAD_K_SWA = 6,
  HEAD_V_SWA = 7,
  TAIL_K_SWA = 8,
  TAIL_V_SWA = 9,
  SWEEP_K_SWA = 10,
  SWEEP_V_SWA = 11,
};
constexpr int kKernelKinds = 12;

// The §1 name of a kind ("HEAD_K_FULL"); "UNKNOWN" for a value outside the enum (a corrupted row).
inline const char* kernel_kind_name(std::int64_t kind) {
  static const char* const names[kKernelKinds] = {"HEAD_K_FULL", "HEAD_V_FULL", "TAIL_K_FULL", "TAIL_V_FULL",
                                                  "SWEEP_K_FULL", "SWEEP_V_FULL", "HEAD_K_SWA", "HEAD_V_SWA",
                                                  "TAIL_K_SWA", "TAIL_V_SWA", "SWEEP_K_SWA", "SWEEP_V_SWA"};
  return kind >= 0 && kind < kKernelKinds ? names[kind] : "UNKNOWN";
}

inline std::optional<KernelKind> kernel_kind_from_name(std::string_view name) {
  for (int k = 0; k < kKernelKinds; ++k)
    if (name == kernel_kind_name(k)) return static_cast<KernelKind>(k);
  return std::nullopt;
}

// SPEC-CANARY §1: fail_reason_bits of a ring row (field 7).
enum FailReason : std::int64_t {
  kVerifyChainHash = 1,
  kVerifyPosition = 2,
  kVerifyRealKvHash = 4,
  kWriteToken = 8,
  kWritePosition = 16,
  kVerifyToken = 32,
  kOutOfRange = 64,  // this project's addition: an index handed to a stage points outside its array
  // Canary v2 (SPEC-CANARY §11):
  kVerifyFreed = 128,        // verify read a FREED record (a read after free, before reuse)
  kVerifySlotZero = 256,     // a live position of the plan maps to slot 0, the padding slot
  kMetadataMismatch = 512,   // the attention backend's own page metadata disagrees with req_to_token
  kPaddingSlotKv = 1024,     // the padding slot's real-KV bytes are not the ones the engine declared
};

// SPEC-CANARY §11.2: the token of a FREED record, "FREED" in ASCII negated (outside int32, so no int32
// token array can store it).
constexpr std::int64_t kFreedToken = -0x4652454544LL;

// A canary record: four int64 (SPEC-CANARY §1), 32 bytes, in this order.
enum RecordField : int { kToken = 0, kPosition = 1, kPrevHash = 2, kRealKvHash = 3 };
constexpr int kRecordFields = 4;
constexpr std::int64_t kRecordBytes = 32;

// A ring row: eight int64 (SPEC-CANARY §1), in this order.
enum RingField : int {
  kRowKernelKind = 0,
  kRowSlot = 1,
  kRowPosition = 2,
  kRowStoredToken = 3,
  kRowExpectedToken = 4,
  kRowStoredChainHash = 5,
  kRowExpectedAux = 6,
  kRowFailReasonBits = 7,
};
constexpr int kRingFields = 8;

// SPEC-CANARY §3.
enum class RealKvMode : std::int32_t { None = 0, Partial = 1, All = 2 };
constexpr int kMaxRealKvSources = 4;

// Which implementation runs write() and verify().
enum class CanaryAlgorithm {
  Default,   // the backend trait decides
  Portable,  // Kokkos parallel_for, on every backend
  Cuda,      // a raw CUDA kernel where one exists and measures faster; falls back to Portable elsewhere
};

// num_slots records at slot * stride_bytes, viewed as int64 [num_slots, 4] with row stride stride_bytes / 8.
// An owning buffer (allocate_canary_buffer) is zeroed at allocation; an engine's own bytes can be wrapped
// (wrap_canary_buffer) with any stride >= 32 that is a multiple of 8.
template <class MemorySpace>
struct CanaryBuffer {
  using memory_space = MemorySpace;
  Kokkos::View<std::int64_t**, Kokkos::LayoutStride, MemorySpace> records;

  std::int64_t num_slots() const { return static_cast<std::int64_t>(records.extent(0)); }
  std::int64_t stride_bytes() const {
    return records.extent(0) > 1 ? static_cast<std::int64_t>(records.stride(0)) * 8 : kRecordBytes;
  }
};

// SPEC-CANARY §1: fill-once ring of violation rows with a count that keeps growing, and two run counters.
template <class MemorySpace>
struct ViolationRing {
  using memory_space = MemorySpace;
  Kokkos::View<std::int64_t* [kRingFields], Kokkos::LayoutRight, MemorySpace> rows;  // [capacity][8]
  Kokkos::View<std::int64_t, MemorySpace> count;
  Kokkos::View<std::int64_t, MemorySpace> slot_run_counter;
  Kokkos::View<std::int64_t, MemorySpace> kernel_run_counter;

  std::int64_t capacity() const { return static_cast<std::int64_t>(rows.extent(0)); }
};

namespace Impl {
// The rows a ring of `capacity` holds after `count` appends: min(count, capacity), the count read as uint64 (a
// count past int64 is a huge unsigned value: the ring is full). Host and device.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t rows_held(std::int64_t count, std::int64_t capacity) {
  const auto appended = static_cast<std::uint64_t>(count), room = static_cast<std::uint64_t>(capacity);
  return appended < room ? appended : room;
}

// The appends such a ring dropped: count - rows_held(), as uint64 (0 unless the count passed the capacity).
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t rows_lost(std::int64_t count, std::int64_t capacity) {
  return static_cast<std::uint64_t>(count) - rows_held(count, capacity);
}
}  // namespace Impl

// SPEC-CANARY §3: a paged KV tensor as bytes [pages, row_bytes]; a token's bytes start at row
// slot / page_size, column (slot % page_size) * bytes_per_token.
template <class MemorySpace>
struct RealKvSource {
  Kokkos::View<const std::uint8_t**, Kokkos::LayoutStride, MemorySpace> bytes;
  std::int64_t page_size = 1;
  std::int64_t bytes_per_token = 16;
  std::int64_t read_bytes = 16;
};

// Up to kMaxRealKvSources sources, folded in order; mode None (or no source) fingerprints as 0.
template <class MemorySpace>
struct RealKv {
  RealKvMode mode = RealKvMode::None;
  std::vector<RealKvSource<MemorySpace>> sources;
};

// One canary buffer a verify() call checks, with its launch tag and real-KV sources. A call may take
// several that share one plan (the K and V halves): the plan is read once for all of them.
template <class MemorySpace>
struct VerifyTarget {
  CanaryBuffer<MemorySpace> buffer;
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;
  RealKv<MemorySpace> real_kv;
};
constexpr int kMaxVerifyTargets = 4;

// The checks of SPEC-CANARY §11 that verify() runs. Both are on by default: cheap, and they never fire
// on a correct engine. v1() turns them off: §5 exactly as the original system wrote it.
struct VerifyChecks {
  bool slot_zero = true;  // §11.3: an entry of slot 0 (a live position on the padding slot) -> bit 256
  bool freed = true;      // §11.2: a FREED record read -> bit 128
  static constexpr VerifyChecks v1() { return VerifyChecks{false, false}; }
};

struct VerifyOptions {
  bool check_expected_token = true;
  CanaryAlgorithm algorithm = CanaryAlgorithm::Default;
  VerifyChecks checks = VerifyChecks{};
};

// The step's flat token arrays (SPEC-CANARY §4), all of one length num_tokens. Index is std::int64_t or
// std::int32_t (widened as it is read). The input assert is on when both expected arrays are given.
template <class MemorySpace, class Index = std::int64_t>
struct StepTokens {
  using memory_space = MemorySpace;
  using index_type = Index;
  template <class T>
  using Vector = Kokkos::View<const T*, Kokkos::LayoutRight, MemorySpace>;

  Vector<Index> input_ids;
  Vector<Index> positions;
  Vector<Index> out_cache_loc;  // slots (SWA callers pass already-translated slots)
  std::optional<Vector<Index>> expected_input_ids;
  std::optional<Vector<Index>> expected_positions;
  // Device flag: != 0 turns the chain-position assert on (a device value, so a graph can toggle it).
  Kokkos::View<const std::int32_t, MemorySpace> chain_position_assert;

  std::int64_t num_tokens() const { return static_cast<std::int64_t>(input_ids.extent(0)); }
};

template <class MemorySpace>
struct WriteOptions {
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;
  RealKv<MemorySpace> real_kv;
  CanaryAlgorithm algorithm = CanaryAlgorithm::Default;
};

// One canary buffer a write() call stamps, with its launch tag and real-KV sources. A call may take
// several that share the plan and the tokens (the K and V halves): the plan and the tokens are read
// once, and the chain is walked once for all buffers whose seed records agree (SPEC-CANARY §4).
template <class MemorySpace>
struct WriteTarget {
  CanaryBuffer<MemorySpace> buffer;
  KernelKind kernel_kind = KernelKind::HEAD_K_FULL;
  RealKv<MemorySpace> real_kv;
};
constexpr int kMaxWriteTargets = kMaxVerifyTargets;

// The options of a write() of several targets (each target carries its own kind and real-KV sources).
struct WriteCallOptions {
  CanaryAlgorithm algorithm = CanaryAlgorithm::Default;
};

// ---- allocation helpers: labelled, once, up front (they initialize on `space`, which does not wait) ----
// A negative size throws std::invalid_argument naming the helper, the argument and the value.

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
CanaryBuffer<MemorySpace> allocate_canary_buffer(const ExecutionSpace& space, std::int64_t num_slots,
                                                 const std::string& label = "kvcanary::canary_buffer") {
  const std::size_t n = Impl::allocation_size("allocate_canary_buffer", "num_slots", num_slots);
  Kokkos::View<std::int64_t* [kRecordFields], Kokkos::LayoutRight, MemorySpace> records(
      Kokkos::view_alloc(space, label), n);  // zero-initialised (SPEC-CANARY §1)
  return CanaryBuffer<MemorySpace>{records};
}

namespace Impl {
// A K and a V canary buffer in one zeroed allocation, a slot's K record then its V record (stride 64 bytes):
// the layout of KvRecords::Interleaved (runtime/config.hpp). The buffers' subviews keep the allocation.
template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
std::array<CanaryBuffer<MemorySpace>, 2> allocate_interleaved_kv_buffers(const ExecutionSpace& space,
                                                                         std::int64_t num_slots,
                                                                         const std::string& label) {
  constexpr int kSlotFields = 2 * kRecordFields;
  const std::size_t n = allocation_size("allocate_interleaved_kv_buffers", "num_slots", num_slots);
  Kokkos::View<std::int64_t* [kSlotFields], Kokkos::LayoutRight, MemorySpace> kv(Kokkos::view_alloc(space, label), n);
  return {CanaryBuffer<MemorySpace>{Kokkos::subview(kv, Kokkos::ALL, std::make_pair(0, kRecordFields))},
          CanaryBuffer<MemorySpace>{Kokkos::subview(kv, Kokkos::ALL, std::make_pair(kRecordFields, kSlotFields))}};
}
}  // namespace Impl

// A canary buffer over an engine's own bytes in MemorySpace (unmanaged: kvcanary never frees them):
// record s at bytes + s * stride_bytes. Throws std::invalid_argument for a stride below 32 or not a
// multiple of 8, a base not aligned to 8 bytes, or a negative slot count.
template <class MemorySpace>
CanaryBuffer<MemorySpace> wrap_canary_buffer(void* bytes, std::int64_t num_slots, std::int64_t stride_bytes) {
  if (num_slots < 0) Impl::throw_invalid_in("wrap_canary_buffer", "num_slots is ", num_slots, ", must be >= 0");
  if (stride_bytes < kRecordBytes || stride_bytes % 8 != 0)
    Impl::throw_invalid_in("wrap_canary_buffer", "stride_bytes is ", stride_bytes,
                           ", must be >= 32 and a multiple of 8");
  if (reinterpret_cast<std::uintptr_t>(bytes) % 8 != 0)
    Impl::throw_invalid_in("wrap_canary_buffer", "the buffer at ", bytes, " is not aligned to 8 bytes");
  if (num_slots > 0 && bytes == nullptr) Impl::throw_invalid_in("wrap_canary_buffer", "the buffer is null");
  const Kokkos::LayoutStride layout(static_cast<std::size_t>(num_slots), static_cast<std::size_t>(stride_bytes / 8),
                                    kRecordFields, 1);
  return CanaryBuffer<MemorySpace>{
      Kokkos::View<std::int64_t**, Kokkos::LayoutStride, MemorySpace>(static_cast<std::int64_t*>(bytes), layout)};
}

template <class ExecutionSpace, class MemorySpace = typename ExecutionSpace::memory_space>
ViolationRing<MemorySpace> allocate_violation_ring(const ExecutionSpace& space, std::int64_t capacity) {
  const std::size_t n = Impl::allocation_size("allocate_violation_ring", "capacity", capacity);
  ViolationRing<MemorySpace> ring;
  ring.rows = decltype(ring.rows)(Kokkos::view_alloc(space, "kvcanary::ring::rows"), n);
  ring.count = decltype(ring.count)(Kokkos::view_alloc(space, "kvcanary::ring::count"));
  ring.slot_run_counter = decltype(ring.count)(Kokkos::view_alloc(space, "kvcanary::ring::slot_run_counter"));
  ring.kernel_run_counter = decltype(ring.count)(Kokkos::view_alloc(space, "kvcanary::ring::kernel_run_counter"));
  return ring;
}

}  // namespace kvcanary

#endif
