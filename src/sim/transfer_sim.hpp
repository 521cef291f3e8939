#ifndef KVCANARY_SIM_TRANSFER_SIM_HPP
#define KVCANARY_SIM_TRANSFER_SIM_HPP

// The simulator's second place (docs/simulator.md, "Two places"; SPEC-CANARY §12): a prefill engine and a
// decode engine with a host tier, in one run. Requests are prefilled on the prefill place, their KV bytes
// and canary records travel to the decode place (export_records -> bytes -> import_records, never
// re-stamped), decode there, are offloaded to the tier and restored, and are moved by defragmentation
// (relocate). Transfer faults are injected with ground truth; every decode step verifies every live prefix
// at the decode place, and each row is attributed to a fault or counted as a false positive.
//
// The engine model is host code (transfer_sim.cpp); the canary stages run through TransferStages: on a
// Kokkos backend (BackendTransferStages, the library's device stages through the host-data bridges) or on
// the host reference (reference_transfer_stages()). Both give the same report, to the byte: the run is
// deterministic (one seeded generator, rows attributed in sorted order).

#include "sim_types.hpp"

#include <kvcanary/tools/host_bridge_canary_v2.hpp>
#include <kvcanary/tools/host_bridge_transfer.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvcanary {
namespace sim {

// The transfer faults (issue 24), a list of their own beside FaultClass.
enum class TransferFault : int {
  LateWrite = 0,        // the prefill's write lands after the decode place freed the pages and gave them to B
  PartialTransfer = 1,  // only a prefix of the records (or of the KV bytes) arrives
  LayoutMixup = 2,      // the KV bytes arrive in another layout (a token's two 16-byte halves swapped)
  StaleTier = 3,        // a restore serves an older tier entry of the request (its last store failed)
  DefragBytes = 4,      // defragmentation moves the records, but the copy of one cell moves wrong bytes
};
constexpr int kTransferFaults = 5;

// "late_write", "partial_transfer", "layout_mixup", "stale_tier", "defrag_bytes".
const char* transfer_fault_name(TransferFault fault);
// "all", "none" or a comma-separated list of names; throws std::invalid_argument naming a bad one.
std::vector<TransferFault> parse_transfer_faults(const std::string& list);

struct TransferSimOptions {
  std::int64_t steps = 400;
  std::uint64_t seed = 1;
  std::vector<TransferFault> faults;      // classes to inject (empty: a clean run)
  std::int64_t faults_per_class = 4;      // at most 64
  std::int64_t slots_per_place = 1024;    // page size 1; slot 0 is the padding slot, never handed out
  std::int64_t max_active = 8;            // requests decoding at once
  std::int64_t max_prompt = 32, max_output = 32;
  std::int64_t tier_every = 5;            // steps between offload + restore of a live request (0: never)
  std::int64_t defrag_every = 7;          // steps between relocations of a live request (0: never)
  RealKvMode real_kv = RealKvMode::All;   // NONE: faults that move only bytes are not covered
};

struct TransferFaultRecord {
  std::int64_t id = 0;
  TransferFault fault = TransferFault::LateWrite;
  std::int64_t step = 0;
  std::int64_t victim = -1;            // the request whose prefix holds the damage
  std::vector<std::int64_t> slots;     // decode-place slots damaged
  bool covered = true;                 // false: bytes-only damage with real-KV NONE
  std::int64_t detected_step = -1;
  std::int64_t reason_bits = 0;
  std::int64_t rows = 0;
  std::string variant;                 // which form of the fault ("records", "bytes", ...)
};

struct TransferClassSummary {
  std::int64_t injected = 0, not_covered = 0, detectable = 0, detected = 0, missed = 0, skipped = 0;
  std::int64_t reason_bits = 0;
};

struct TransferSimReport {
  std::string backend;
  TransferSimOptions options;
  std::int64_t steps_run = 0, requests_finished = 0, requests_aborted = 0;
  std::int64_t transfers = 0, offloads = 0, relocations = 0, records_moved = 0;
  std::vector<TransferFaultRecord> faults;
  TransferClassSummary classes[kTransferFaults];
  std::int64_t rows = 0, false_positives = 0;
  std::vector<std::string> false_positive_lines;  // the first few, as "slot=<s> bits=<b> step=<t>"

  std::int64_t missed() const;
  bool ok() const { return missed() == 0 && false_positives == 0; }
};

std::string format_transfer_table(const TransferSimReport& report);

// The canary stages the model calls, on host data (the reference's types).
namespace ref = kvcanary::reference;
struct TransferStages {
  virtual ~TransferStages() = default;
  virtual std::string name() const = 0;
  virtual void write(const ref::Outputs& plan, const ref::StepTokens& tokens, const ref::RealKv& kv,
                     ref::CanaryBuffer& buffer, ref::ViolationRing& ring) = 0;
  virtual void verify(const ref::Outputs& plan, const ref::CanaryBuffer& buffer, const ref::RealKv& kv,
                      ref::ViolationRing& ring) = 0;
  virtual void free(const std::vector<std::int64_t>& slots, std::int64_t epoch, ref::CanaryBuffer& buffer,
                    ref::ViolationRing& ring) = 0;
  virtual void export_records(const std::vector<std::int64_t>& slots, const ref::CanaryBuffer& buffer,
                              ref::TransferRecords& out, ref::ViolationRing& ring) = 0;
  virtual void import_records(const std::vector<std::int64_t>& slots, const ref::TransferRecords& in,
                              ref::CanaryBuffer& buffer, ref::ViolationRing& ring) = 0;
  virtual void relocate(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst,
                        ref::CanaryBuffer& buffer, ref::TransferRecords& staging, ref::ViolationRing& ring) = 0;
};

// The library's stages on `ExecutionSpace` (verify with the library's default checks: freed and slot zero).
template <class ExecutionSpace>
struct BackendTransferStages final : TransferStages {
  ExecutionSpace space;
  explicit BackendTransferStages(const ExecutionSpace& s) : space(s) {}
  std::string name() const override { return ExecutionSpace::name(); }
  void write(const ref::Outputs& plan, const ref::StepTokens& tokens, const ref::RealKv& kv, ref::CanaryBuffer& buffer,
             ref::ViolationRing& ring) override {
    write_host_data(space, plan, tokens, KernelKind::HEAD_K_FULL, kv, buffer, ring);
  }
  void verify(const ref::Outputs& plan, const ref::CanaryBuffer& buffer, const ref::RealKv& kv,
              ref::ViolationRing& ring) override {
    verify_host_data(space, plan, {&buffer}, {KernelKind::HEAD_K_FULL}, {&kv}, true, VerifyChecks{}, ring);
  }
  void free(const std::vector<std::int64_t>& slots, std::int64_t epoch, ref::CanaryBuffer& buffer,
            ref::ViolationRing& ring) override {
    free_host_data(space, slots, epoch, KernelKind::HEAD_K_FULL, buffer, ring);
  }
  void export_records(const std::vector<std::int64_t>& slots, const ref::CanaryBuffer& buffer, ref::TransferRecords& out,
                      ref::ViolationRing& ring) override {
    export_records_host_data(space, slots, buffer, out, KernelKind::HEAD_K_FULL, ring);
  }
  void import_records(const std::vector<std::int64_t>& slots, const ref::TransferRecords& in, ref::CanaryBuffer& buffer,
                      ref::ViolationRing& ring) override {
    import_records_host_data(space, slots, in, buffer, KernelKind::HEAD_K_FULL, ring);
  }
  void relocate(const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst, ref::CanaryBuffer& buffer,
                ref::TransferRecords& staging, ref::ViolationRing& ring) override {
    relocate_host_data(space, src, dst, buffer, staging, KernelKind::HEAD_K_FULL, ring);
  }
};

// The same stages on the host reference (the oracle).
std::unique_ptr<TransferStages> reference_transfer_stages();

// Runs the two-place model over `stages`. Throws std::invalid_argument for options out of range.
TransferSimReport simulate_transfer(TransferStages& stages, const TransferSimOptions& options);

// The backend by name ("serial", "openmp", "cuda", "default"), for the CLI's --backend.
TransferSimReport simulate_transfer(const TransferSimOptions& options, const std::string& backend);

template <class ExecutionSpace, class = std::enable_if_t<Kokkos::is_execution_space<ExecutionSpace>::value>>
TransferSimReport simulate_transfer(const ExecutionSpace& space, const TransferSimOptions& options) {
  BackendTransferStages<ExecutionSpace> stages(space);
  return simulate_transfer(stages, options);
}

}  // namespace sim
}  // namespace kvcanary

#endif
