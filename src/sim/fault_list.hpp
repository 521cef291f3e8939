#ifndef KVCANARY_SIM_FAULT_LIST_HPP
#define KVCANARY_SIM_FAULT_LIST_HPP

// The fault classes of the simulator's models by name: a class's name, and the --faults list ("all", "none" or a
// comma-separated list of class names).

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvcanary {
namespace sim {

// The name of `fault` (names[fault]); "unknown" for a value outside the enumeration.
template <class Fault, std::size_t N>
const char* fault_name(Fault fault, const char* const (&names)[N]) {
  const int k = static_cast<int>(fault);
  return k >= 0 && static_cast<std::size_t>(k) < N ? names[k] : "unknown";
}

// Fault k is named names[k]; throws std::invalid_argument "kvcanary simulate: unknown <what> '<name>' (...)".
template <class Fault, std::size_t N>
std::vector<Fault> parse_fault_list(const std::string& list, const char* const (&names)[N], const char* what) {
  std::vector<Fault> faults;
  if (list == "none") return faults;
  if (list == "all") {
    for (std::size_t k = 0; k < N; ++k) faults.push_back(static_cast<Fault>(k));
    return faults;
  }
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    const auto it = std::find(std::begin(names), std::end(names), name);
    if (it == std::end(names)) {
      std::string known;
      for (const char* n : names) known += std::string(known.empty() ? "" : ", ") + n;
      throw std::invalid_argument("kvcanary simulate: unknown " + std::string(what) + " '" + name +
                                  "' (all, none, or of: " + known + ")");
    }
    faults.push_back(static_cast<Fault>(it - std::begin(names)));
    begin = end + 1;
  }
  return faults;
}

}  // namespace sim
}  // namespace kvcanary

#endif
