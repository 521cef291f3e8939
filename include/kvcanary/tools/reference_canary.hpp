#ifndef KVCANARY_REFERENCE_CANARY_HPP
#define KVCANARY_REFERENCE_CANARY_HPP

// reference::write() and reference::verify(): the serial host model of SPEC-CANARY §2–§5 on std::vector,
// written straight from the text. With reference::plan() it is the oracle of the canary's tests and of
// the CLI's checks. It shares only the hash primitives (impl/hash.hpp, pinned by their own tests) and
// the enums of canary_types.hpp with the kernels.

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/cross_check_types.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace kvcanary {
namespace reference {

// One canary record (SPEC-CANARY §1); a buffer is one per slot, zero when never written.
struct Record {
  std::int64_t token = 0, position = 0, prev_hash = 0, real_kv_hash = 0;
  friend bool operator==(const Record& a, const Record& b) {
    return a.token == b.token && a.position == b.position && a.prev_hash == b.prev_hash &&
           a.real_kv_hash == b.real_kv_hash;
  }
};
using CanaryBuffer = std::vector<Record>;

using RingRow = std::array<std::int64_t, kRingFields>;

// The violation ring (SPEC-CANARY §1): rows appended in order up to `capacity` (fill once), `count` keeps
// growing past it.
struct ViolationRing {
  std::int64_t capacity = 0;
  std::vector<RingRow> rows;  // the first min(count, capacity) rows
  std::int64_t count = 0;
  std::int64_t slot_run_counter = 0;
  std::int64_t kernel_run_counter = 0;
};

// SPEC-CANARY §3: bytes [pages, row_bytes] row-major (row_bytes is the row stride).
struct RealKvSource {
  std::vector<std::uint8_t> bytes;
  std::int64_t pages = 0;
  std::int64_t row_bytes = 0;
  std::int64_t page_size = 1;
  std::int64_t bytes_per_token = 16;
  std::int64_t read_bytes = 16;
};

struct RealKv {
  RealKvMode mode = RealKvMode::None;
  std::vector<RealKvSource> sources;
};

// SPEC-CANARY §4's token arrays (int64; int32 callers widen).
struct StepTokens {
  std::vector<std::int64_t> input_ids, positions, out_cache_loc;
  std::optional<std::vector<std::int64_t>> expected_input_ids, expected_positions;
  std::int32_t chain_position_assert = 1;
};

// The hashes of SPEC-CANARY §2–§3 over a host buffer. slot_hash is anchor_hash for slot < 0; both throw
// std::invalid_argument for a slot they cannot read (>= buffer.size(); outside a source's bytes).
std::int64_t slot_hash(const CanaryBuffer& buffer, std::int64_t slot);
std::int64_t fold(const RealKv& real_kv, std::int64_t slot);

// Throws std::invalid_argument for sources that break SPEC-CANARY §3's rules for a buffer of num_slots
// (checked whenever sources are given, whatever the mode), and for a mode outside none/partial/all.
// `function` names the entry point in the message ("kvcanary::<function>: ...").
void check_real_kv(const RealKv& real_kv, std::int64_t num_slots, const char* function = "check_real_kv");

// A host ring built from a device ring's copied contents: `rows` points at capacity x 8 int64, row-major;
// the snapshot keeps the first min(count, capacity) of them (count read as uint64, as the ring does).
ViolationRing ring_snapshot(const std::int64_t* rows, std::int64_t capacity, std::int64_t count,
                            std::int64_t slot_run_counter, std::int64_t kernel_run_counter);

// SPEC-CANARY §4: the write stage, with the WritePlan of `plan` (write_offsets, write_seed_slot_indices,
// write_num_valid_reqs). Throws std::invalid_argument (nothing touched) on host-side errors; the host-side
// rules are listed at the top of src/reference_canary.cpp.
void write(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind, const RealKv& real_kv,
           CanaryBuffer& buffer, ViolationRing& ring);

// One request r of a checked write() call (SPEC-CANARY §4, steps 2-3), its chain starting from
// `seed_record` (the seed slot's record as the request reads it; ignored without a seed in range): its
// rows go to `ring`, each store to `store(slot, record)`, in token order. Returns the tokens stored. The
// caller has checked the call as write() does; write() is this for every request, in order, with the
// seed read from the buffer as it stands. (The outcomes SPEC-CANARY §4 leaves open, write_outcomes.hpp,
// walk requests with other seed reads.)
std::int64_t write_request(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind, const RealKv& real_kv,
                           std::int64_t num_slots, std::int64_t r, const Record& seed_record, ViolationRing& ring,
                           const std::function<void(std::int64_t, const Record&)>& store);

// SPEC-CANARY §5: the verify stage, with the VerifyPlan of `plan`; the buffer is only read. Throws
// std::invalid_argument (ring untouched) on host-side errors.
void verify(const Outputs& plan, const CanaryBuffer& buffer, KernelKind kernel_kind, const RealKv& real_kv,
            bool check_expected_token, ViolationRing& ring);

// The same with the checks of SPEC-CANARY §11.2-§11.3 (the call above is this one with VerifyChecks::v1():
// §5 as the original system wrote it).
void verify(const Outputs& plan, const CanaryBuffer& buffer, KernelKind kernel_kind, const RealKv& real_kv,
            bool check_expected_token, const VerifyChecks& checks, ViolationRing& ring);

// SPEC-CANARY §11.2: the free stage. Stamps a FREED record (kFreedToken, kept position, kept prev_hash,
// epoch) into every slot in [0, buffer.size()) of `slots`; negative slots are skipped, larger ones give
// OUT_OF_RANGE rows. Throws std::invalid_argument (nothing touched) on host-side errors.
void free(const std::vector<std::int64_t>& slots, std::int64_t epoch, KernelKind kernel_kind, CanaryBuffer& buffer,
          ViolationRing& ring);

// SPEC-CANARY §11.4: the backend's metadata, host copies (int32 callers widen).
struct BackendMetadata {
  MetadataForm form = MetadataForm::Csr;
  std::int64_t page_size = 1;
  std::vector<std::int64_t> kv_indptr, kv_indices;  // CSR: [bs + 1], [nnz]
  std::vector<std::int64_t> block_table;            // dense: row-major [bs, max_blocks]
  std::int64_t max_blocks = 0;
  std::vector<std::int64_t> seq_lens;  // dense: [bs]
};

// SPEC-CANARY §11.4: the cross-check of `metadata` against the plan inputs' req_to_token (and LUT).
// Throws std::invalid_argument (ring untouched) on host-side errors.
void cross_check(const Inputs& inputs, const BackendMetadata& metadata, KernelKind kernel_kind, ViolationRing& ring);

// SPEC-CANARY §11.5: fold(0) against the declared value; padding_fold_of_zeros() is the fold of zero bytes.
void check_padding_slot(const RealKv& real_kv, std::int64_t expected_fold, KernelKind kernel_kind, ViolationRing& ring);
std::int64_t padding_fold_of_zeros(const RealKv& real_kv);

}  // namespace reference
}  // namespace kvcanary

#endif
