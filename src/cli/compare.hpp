#ifndef KVCANARY_CLI_COMPARE_HPP
#define KVCANARY_CLI_COMPARE_HPP

// Output-by-output comparison of two plans, element by element (written and untouched entries alike).

#include <kvcanary/reference.hpp>

#include <optional>
#include <string>

namespace kvcanary {
namespace cli {

// The first field (and index) where `library` differs from `expected`, e.g.
// "verify_slot_indices[17]: library 45, reference 46"; nullopt when every output agrees.
std::optional<std::string> first_difference(const reference::Outputs& expected, const reference::Outputs& library);

}  // namespace cli
}  // namespace kvcanary

#endif
