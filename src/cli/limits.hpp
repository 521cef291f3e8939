#ifndef KVCANARY_CLI_LIMITS_HPP
#define KVCANARY_CLI_LIMITS_HPP

// kvcanary's limits (docs/cli-limits.md). Each is checked before the memory it bounds is allocated;
// together they keep the tool's peak memory under 1.5 GiB whatever the input, so that a hostile
// case is refused with one line instead of exhausting the machine.

#include <cstdint>

namespace kvcanary {
namespace cli {

// A case file is read up to this size; a larger one (or an endless stream such as /dev/zero) is refused
// there. A JSON value takes at least 2 bytes ("0,"), so this also bounds the values of a case (the cells
// of req_to_token and of the pool included) to 16 Mi, and with them the parsed document.
constexpr std::int64_t kMaxInputBytes = std::int64_t{32} << 20;

// write_offsets (write_req_capacity + 1 entries) is allocated and printed whole.
constexpr std::int64_t kMaxWriteReqCapacity = std::int64_t{1} << 22;

// Verify arrays are allocated with min(verify_capacity, the batch's prefix tokens) entries, 32 bytes each
// on the host and as much again in Kokkos Views (twice on the host for `check`).
constexpr std::int64_t kMaxVerifyEntries = std::int64_t{1} << 23;

// Array entries `run` may print, over all steps, counted from the same bounds before anything runs:
// printing streams, so this bounds the output (at most 21 bytes an entry) and the run time, not memory.
constexpr std::int64_t kMaxPrintedEntries = std::int64_t{1} << 26;

// Canary cases (SPEC-CANARY §9). The text bounds what it holds (canary_buffer, token arrays, real_kv bytes,
// plan arrays), but not the ring, whose capacity is one number: every limit is checked before the memory it
// bounds is allocated, and they keep a verify, write or step case (and its check) under the same 1.5 GiB.

// canary_buffer records: 32 bytes each, held ~6 times at once by `check` (case, library upload and
// download, reference, outputs), and printed (4 entries a slot).
constexpr std::int64_t kMaxCanarySlots = std::int64_t{1} << 21;

// ring_capacity: the library allocates capacity rows of 64 bytes (and a host mirror); rows printed.
constexpr std::int64_t kMaxRingCapacity = std::int64_t{1} << 20;

// Each token array (input_ids, positions, out_cache_loc, expected_*): 8 bytes an entry, a few copies.
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 22;

// Work (docs/cli-limits.md, "Work bound"). The limits above bound what a case holds, not what it makes the
// stages do: overlapping write_offsets walk the same tokens again per request, and verify entries may
// name one slot with a large real-KV token many times. These two are counted from the case before
// Kokkos starts (canary_work.hpp); `check` runs the stages twice (library and reference).

// Tokens the write stage walks: the sum over valid requests of their spans (each at most the token
// count + 1, where the walk stops). plan() makes spans disjoint, so an honest case walks at most
// tokens + requests <= 2^23; this leaves room for overlap without letting it multiply.
constexpr std::int64_t kMaxWriteTokensWalked = std::int64_t{1} << 24;

// Real-KV bytes folded: (verify entries + write tokens walked) x the bytes folded a token (16 a source in
// PARTIAL mode, read_bytes in ALL). 1 GiB is about 2 s a stage on the host backends (measured).
constexpr std::int64_t kMaxFoldedBytes = std::int64_t{1} << 30;

}  // namespace cli
}  // namespace kvcanary

#endif
