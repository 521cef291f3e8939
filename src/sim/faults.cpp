// The fault classes' names and what should catch each (docs/simulator.md has the same table).

#include "fault_list.hpp"
#include "sim_types.hpp"

namespace kvcanary {
namespace sim {

namespace {
constexpr const char* kNames[kFaultClasses] = {"double_alloc",        "use_after_free", "page_table_overwrite",
                                               "rogue_write",         "kv_byte_flip",   "position_off_by_one",
                                               "swapped_tokens",      "swa_lut",        "stale_prefix",
                                               "freed_read",          "stale_metadata", "padding_kv",
                                               "cross_identity"};
constexpr std::int64_t kRecordBits = kVerifyChainHash | kVerifyPosition | kVerifyToken;
}  // namespace

const char* fault_class_name(FaultClass fault) {
  return fault_name(fault, kNames);
}

std::vector<FaultClass> parse_fault_classes(const std::string& list) {
  return parse_fault_list<FaultClass>(list, kNames, "fault class");
}

FaultExpectation expected_catch(FaultClass fault) {
  switch (fault) {
    case FaultClass::DoubleAllocation:
      return {"tail verify (same step) or head verify", kRecordBits, "the step the second holder writes the page",
              "none"};
    case FaultClass::UseAfterFree:
      return {"tail verify (same step) or head verify", kRecordBits, "the step the page's new holder writes it", "none"};
    case FaultClass::PageTableOverwrite:
      return {"head verify (slot 0: the slot-zero check)", kRecordBits | kVerifySlotZero, "the next step", "none"};
    case FaultClass::RogueWrite:
      return {"tail verify (same step) or head verify", kRecordBits, "the step of the write, else the next", "none"};
    case FaultClass::KvByteFlip:
      return {"tail verify", kVerifyRealKvHash, "the step of the flip",
              "real-KV none; PARTIAL and a byte past the first 16; a slot flipped before its tail stamp"};
    case FaultClass::PositionOffByOne:
      return {"head write (input / chain-position assert)", kWritePosition, "the step of the write", "none"};
    case FaultClass::SwappedTokens:
      return {"head write (input assert)", kWriteToken, "the step of the write", "none"};
    case FaultClass::SwaLutCorruption:
      return {"head verify (SWA group)", kRecordBits, "the next step", "no SWA group (--swa 0): not injected"};
    case FaultClass::StalePrefixHit:
      return {"sweep or head verify of a hit", kRecordBits, "once the evicted pages are rewritten: the next sweep or hit",
              "none"};
    case FaultClass::FreedRead:
      return {"head verify (free stage: FREED record)", kVerifyFreed | kVerifyChainHash, "the step of the free", "none"};
    case FaultClass::StaleMetadata:
      return {"cross-check of the backend's kv_indices (head)", kMetadataMismatch, "the step of the stale copy", "none"};
    case FaultClass::PaddingKv:
      return {"sweep (padding-slot check)", kPaddingSlotKv, "the next sweep",
              "real-KV none; PARTIAL and a byte past the first 16"};
    case FaultClass::CrossIdentityHit:
      return {"head verify (request identity, SPEC-CANARY §11.7)", kVerifyChainHash, "the step the request first runs",
              "none (with identities off: every request is identity 0, the hit is legitimate)"};
  }
  return {"", 0, "", ""};
}

std::int64_t SimulationReport::missed() const {
  std::int64_t n = 0;
  for (const auto& c : classes) n += c.missed;
  return n;
}

}  // namespace sim
}  // namespace kvcanary
