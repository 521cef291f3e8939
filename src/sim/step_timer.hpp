#ifndef KVCANARY_SIM_STEP_TIMER_HPP
#define KVCANARY_SIM_STEP_TIMER_HPP

// The step timings of a run in memory that does not grow with the steps (issue 19 item 2): step counts and
// means per live batch size are exact; medians come from every step up to kMaxTimedSteps, and beyond that
// from a uniform sample of kMaxTimedSteps steps (reservoir sampling with a fixed seed).

#include "sim_types.hpp"

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace kvcanary {
namespace sim {

constexpr std::int64_t kMaxTimedSteps = std::int64_t{1} << 20;

class StepTimer {
 public:
  void add(const StepSample& sample);
  std::vector<BatchTiming> by_batch_size() const;

 private:
  struct Sums {  // [0] all steps, [1] decode only, [2] with prefill
    std::int64_t steps[3] = {0, 0, 0};
    double canary_us[3] = {0, 0, 0}, step_us[3] = {0, 0, 0};
  };
  std::map<std::int64_t, Sums> sums_;  // by live batch size: at most max_batch + 1 entries
  std::vector<StepSample> samples_;
  std::int64_t seen_ = 0;
  std::mt19937_64 rng_{20261204};
};

}  // namespace sim
}  // namespace kvcanary

#endif
