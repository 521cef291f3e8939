#ifndef KVCANARY_SIM_STATE_SIM_HPP
#define KVCANARY_SIM_STATE_SIM_HPP

// The simulator's state model (docs/simulator.md "State slots"; SPEC-CANARY §13): one engine whose requests
// carry a recurrent state in a state slot beside their KV. Every step, before the forward, the requests that
// resume from a state are checked (state_plan at q = L - 1, then verify of their state slots); after the
// forward and its KV write, the padded batch's state slots are stamped (state_plan at q = p, then write).
// New requests may be prefix hits (a fork of a live request: its KV prefix shared, its state copied with its
// record). State faults are injected with ground truth (request, slot, the step the damage is readable) and
// every row of the check is attributed to one of them or counted as a false positive.
//
// The engine model is host code (state_sim.cpp); the canary stages run through StateStages: the library's
// stages on a Kokkos backend (through the host-data bridges) or the host reference. Both give the same
// report to the byte (one seeded generator, rows attributed in sorted order).

#include "transfer_sim.hpp"

#include <kvcanary/tools/host_bridge_state.hpp>
#include <kvcanary/tools/reference_state.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kvcanary {
namespace sim {

// The state faults (issue 23, KV-BUGS rows 41-43).
enum class StateFault : int {
  Stale = 0,     // row 41: a prefix hit's fresh state slot is not given the cached state; it holds another's
  Boundary = 1,  // row 42: a prefix hit resumes at L while the state it was given is valid through p != L - 1
  Alias = 2,     // row 43: a graph-padding dummy carries a parked request's state slot (its update lands there)
};
constexpr int kStateFaults = 3;

// "state_stale", "state_boundary", "state_alias".
const char* state_fault_name(StateFault fault);
// "all", "none" or a comma-separated list of names; throws std::invalid_argument naming a bad one.
std::vector<StateFault> parse_state_faults(const std::string& list);

struct StateSimOptions {
  std::int64_t steps = 200;
  std::uint64_t seed = 1;
  std::vector<StateFault> faults;     // classes to inject (empty: a clean run)
  std::int64_t faults_per_class = 4;  // at most 64, at seeded steps in [10, steps - 10]
  std::int64_t max_active = 8;        // live requests (state slots in use) at most
  std::int64_t max_prompt = 16, max_output = 16;
  std::int64_t fork_percent = 50;    // a new request is a prefix hit (a fork of a live request) this often
  std::int64_t park_percent = 25;    // a live request sits out a step (parked) this often
  bool free_states = true;           // released state slots go through the free stage (FREED records)
  bool stamp_skips_dummies = false;  // the stamp leaves the dummies out while the engine's update does not:
                                     // blind to state_alias (the condition of KV-BUGS row 43)
};

struct StateFaultRecord {
  std::int64_t id = 0;
  StateFault fault = StateFault::Stale;
  std::int64_t injected_step = 0;
  std::int64_t readable_step = 0;  // the first step whose check can read the damage
  std::int64_t victim = -1;        // the request that resumes from the damaged state
  std::int64_t slot = -1;          // the canary slot of the damaged state (kv_slots + state slot)
  std::int64_t detected_step = -1;
  std::int64_t reason_bits = 0;
  std::int64_t rows = 0;
  std::string variant;  // "freed", "another's state", "past the boundary", "dummy"
  std::int64_t latency() const { return detected_step < 0 ? -1 : detected_step - readable_step; }
};

struct StateClassSummary {
  std::int64_t injected = 0, detected = 0, missed = 0, skipped = 0;
  std::int64_t reason_bits = 0, max_latency = -1;
};

struct StateSimReport {
  std::string backend;
  StateSimOptions options;
  std::int64_t kv_slots = 0, state_slots = 0;
  std::int64_t steps_run = 0, requests_finished = 0, requests_aborted = 0, forks = 0;
  std::int64_t checks = 0, stamps = 0, dummies = 0;  // state entries checked and stamped, dummy stamps
  std::vector<StateFaultRecord> faults;
  StateClassSummary classes[kStateFaults];
  std::int64_t rows = 0, false_positives = 0;
  std::vector<std::string> false_positive_lines;  // the first few

  std::int64_t missed() const;
  std::int64_t skipped() const;
  // Every requested fault injected and detected, and no false positive.
  bool ok() const { return missed() == 0 && skipped() == 0 && false_positives == 0; }
};

std::string format_state_table(const StateSimReport& report);

// The stages the model calls: write, verify, free and export/import (a state copy moves its record) of the
// transfer model's stages, and state_plan.
struct StateStages {
  virtual ~StateStages() = default;
  virtual TransferStages& canary() = 0;
  virtual void state_plan(const ref::StateInputs& inputs, ref::StatePlan& plan, ref::ViolationRing& ring) = 0;
};

template <class ExecutionSpace>
struct BackendStateStages final : StateStages {
  BackendTransferStages<ExecutionSpace> stages;
  explicit BackendStateStages(const ExecutionSpace& space) : stages(space) {}
  TransferStages& canary() override { return stages; }
  void state_plan(const ref::StateInputs& inputs, ref::StatePlan& plan, ref::ViolationRing& ring) override {
    state_plan_host_data(stages.space, inputs, plan, KernelKind::HEAD_K_FULL, ring);
  }
};

// The same stages on the host reference (the oracle).
std::unique_ptr<StateStages> reference_state_stages();

// Runs the state model over `stages`. Throws std::invalid_argument for options out of range.
StateSimReport simulate_state(StateStages& stages, const StateSimOptions& options);

// The backend by name ("serial", "openmp", "cuda", "default"), for the CLI's --backend.
StateSimReport simulate_state(const StateSimOptions& options, const std::string& backend);

template <class ExecutionSpace, class = std::enable_if_t<Kokkos::is_execution_space<ExecutionSpace>::value>>
StateSimReport simulate_state(const ExecutionSpace& space, const StateSimOptions& options) {
  BackendStateStages<ExecutionSpace> stages(space);
  return simulate_state(stages, options);
}

}  // namespace sim
}  // namespace kvcanary

#endif
