#ifndef KVCANARY_CLI_LIMITS_HPP
#define KVCANARY_CLI_LIMITS_HPP

// kvcanary-plan's limits (docs/cli-limits.md). Each is checked before the memory it bounds is allocated;
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

}  // namespace cli
}  // namespace kvcanary

#endif
