#ifndef KVCANARY_SIM_MEMORY_BOUND_HPP
#define KVCANARY_SIM_MEMORY_BOUND_HPP

// What a simulation may hold at its peak, from its options alone (docs/simulator.md, docs/cli-limits.md):
// every buffer of the engine and of the device pipeline is sized by engine_shape() once, and nothing grows
// with the steps (fault count capped, step timings kept in a bounded sample), so this is known before
// anything is allocated. `kvcanary simulate` refuses options whose bound is above kMaxSimulationBytes.

#include "sim_types.hpp"

#include <cstdint>

namespace kvcanary {
namespace sim {

// The bound the CLI states, the same as for its other commands (1.5 GiB on the host backends).
constexpr std::int64_t kMaxSimulationBytes = std::int64_t{3} << 29;

// An upper bound of the peak resident memory of simulate(space, options) on a host backend, in bytes,
// reference shadow excluded. Throws std::invalid_argument where engine_shape() does.
std::int64_t peak_memory_bound(const SimulationOptions& options);

}  // namespace sim
}  // namespace kvcanary

#endif
