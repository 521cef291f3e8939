#ifndef KVCANARY_CLI_COMPARE_HPP
#define KVCANARY_CLI_COMPARE_HPP

// Output-by-output comparison of two plans, element by element (written and untouched entries alike), and
// of two canary results (buffer and ring).

#include <kvcanary/tools/reference_plan.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <optional>
#include <string>

namespace kvcanary {
namespace cli {

// The first field (and index) where `library` differs from `expected`, e.g.
// "verify_slot_indices[17]: library 45, reference 46"; nullopt when every output agrees.
std::optional<std::string> first_difference(const reference::Outputs& expected, const reference::Outputs& library);

// The first difference between two canary results: a record field, the ring's count, capacity or counters,
// or a ring row (rows compared in order: sort both first, since the device's order is unspecified). The rows
// of a ring that overflowed are not compared: which violations a full ring kept is unspecified.
std::optional<std::string> first_canary_difference(const reference::CanaryBuffer& expected_buffer,
                                                   const reference::ViolationRing& expected_ring,
                                                   const reference::CanaryBuffer& library_buffer,
                                                   const reference::ViolationRing& library_ring);

// count > capacity (as uint64, as the ring counts).
bool ring_overflowed(const reference::ViolationRing& ring);

}  // namespace cli
}  // namespace kvcanary

#endif
