#ifndef KVCANARY_CLI_LIMITS_HPP
#define KVCANARY_CLI_LIMITS_HPP

// kvcanary-plan's limits (docs/cli-limits.md). Each is checked before the memory it bounds is allocated.

#include <cstdint>

namespace kvcanary {
namespace cli {

// A case file is read up to this size; a larger one (or an endless stream such as /dev/zero) is refused
// there. A JSON value takes at least 2 bytes ("0,"), so this also bounds the values of a case (the cells
// of req_to_token and of the pool included) to 16 Mi, and with them the parsed document.
constexpr std::int64_t kMaxInputBytes = std::int64_t{32} << 20;

}  // namespace cli
}  // namespace kvcanary

#endif
