#ifndef KVCANARY_SIM_REFERENCE_PIPELINE_HPP
#define KVCANARY_SIM_REFERENCE_PIPELINE_HPP

// The same step as DevicePipeline, on kvcanary's serial host reference (reference::plan, ::verify,
// ::write): the oracle a simulation's device rings are compared with, step by step.

#include "engine.hpp"

#include <kvcanary/tools/reference_plan.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <vector>

namespace kvcanary {
namespace sim {

class ReferencePipeline {
 public:
  ReferencePipeline(const EngineShape& shape, const SimulationOptions& options);
  void upload(const Engine& engine, const StepData& data);
  void head(const StepData& data);
  void model_write(const StepData& data);
  void tail(const StepData& data);
  void sweep(const StepData& data);
  void fence() const {}
  std::int64_t read(std::vector<GroupRow>& rows);
  // After head(): a group's plan and write inputs of the step (tests check what the engine handed the canary).
  bool has_group(Group group) const { return groups_[static_cast<int>(group)].on; }
  const reference::Outputs& plan(Group group) const { return groups_[static_cast<int>(group)].plan; }
  const reference::StepTokens& tokens(Group group) const { return groups_[static_cast<int>(group)].tokens; }

 private:
  struct GroupState {
    bool on = false;
    reference::Inputs inputs;
    reference::Outputs plan;
    reference::StepTokens tokens;
    reference::CanaryBuffer k, v;
    reference::ViolationRing ring;
    KernelKind head_k = KernelKind::HEAD_K_FULL, head_v = KernelKind::HEAD_V_FULL;
  };
  EngineShape shape_;
  SimulationOptions options_;
  GroupState groups_[kGroups];
  reference::RealKv real_k_, real_v_;
  reference::Inputs sweep_inputs_;
  reference::Outputs sweep_plan_;
};

}  // namespace sim
}  // namespace kvcanary

#endif
