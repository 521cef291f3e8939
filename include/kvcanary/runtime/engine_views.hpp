#ifndef KVCANARY_RUNTIME_ENGINE_VIEWS_HPP
#define KVCANARY_RUNTIME_ENGINE_VIEWS_HPP

// What kvcanary::Canary reads from the engine, as Views over the engine's own memory (no copy):
// the long-lived tables given once to the constructor, a forward's batch, and a sweep's cached prefixes.
// For a CUDA graph, every View of a captured pass must keep its address across replays (the engine
// refills the same buffers in place), as for plan(), verify() and write().

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan_types.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace kvcanary {

template <class MemorySpace>
using EngineVector = Kokkos::View<const std::int64_t*, Kokkos::LayoutRight, MemorySpace>;
template <class MemorySpace>
using EngineTable = Kokkos::View<const std::int32_t**, Kokkos::LayoutStride, MemorySpace>;

// One group's bytes: the real KV it fingerprints, and optionally the engine's own canary records.
template <class MemorySpace>
struct GroupViews {
  std::vector<RealKvSource<MemorySpace>> real_kv_k, real_kv_v;  // up to kMaxRealKvSources each
  std::optional<CanaryBuffer<MemorySpace>> k, v;               // absent: the Canary allocates them
};

// Given once, to the constructor; kept (handles) for the Canary's lifetime.
template <class MemorySpace>
struct EngineTables {
  EngineTable<MemorySpace> req_to_token;                       // [max_running_requests, max_context_len]
  std::optional<EngineTable<MemorySpace>> expected_tokens;     // req_to_verify_expected_tokens (verify_token_assert)
  std::optional<EngineVector<MemorySpace>> full_to_swa_index_mapping;  // the SWA group's LUT
  GroupViews<MemorySpace> target, swa, draft;
};

// One group's tokens of a forward, all of one length (int64). SWA slots are already translated by the
// engine (SPEC-CANARY §4); the draft group's are the draft model's.
template <class MemorySpace>
struct ForwardTokens {
  EngineVector<MemorySpace> input_ids, positions, out_cache_loc;
  std::optional<EngineVector<MemorySpace>> expected_input_ids, expected_positions;  // write_input_assert
};

// One forward: the plan's batch (SPEC §2) and each enabled group's tokens.
template <class MemorySpace>
struct ForwardBatch {
  EngineVector<MemorySpace> req_pool_indices, prefix_lens, extend_seq_lens;  // [bs]
  std::optional<EngineVector<MemorySpace>> expected_tokens_valid_lens;      // [bs], verify_token_assert
  ForwardTokens<MemorySpace> tokens;                                        // target group
  std::optional<ForwardTokens<MemorySpace>> swa_tokens, draft_tokens;       // when those groups are on
  std::optional<EngineVector<MemorySpace>> identities;                      // [bs], request_identities (§11.7)
};

// The prefix cache's entries for a sweep: pool row r holds a cached prefix of lengths[r] tokens.
template <class MemorySpace>
struct CachedPrefixes {
  EngineVector<MemorySpace> pool_rows, lengths;                             // [n]
  std::optional<EngineVector<MemorySpace>> expected_tokens_valid_lens;      // [n]; absent: = lengths
  std::optional<EngineVector<MemorySpace>> identities;                      // [n], request_identities (§11.7)
};

}  // namespace kvcanary

#endif
