#include "step_timer.hpp"

namespace kvcanary {
namespace sim {

void StepTimer::add(const StepSample& sample) {
  Sums& sums = sums_[sample.batch_size];
  for (const int k : {0, sample.prefill ? 2 : 1}) {
    ++sums.steps[k];
    sums.canary_us[k] += sample.canary_us;
    sums.step_us[k] += sample.step_us;
  }
  ++seen_;
  if (static_cast<std::int64_t>(samples_.size()) < kMaxTimedSteps) {
    if (samples_.empty()) samples_.reserve(static_cast<std::size_t>(kMaxTimedSteps) / 16);
    samples_.push_back(sample);
    return;
  }
  const auto slot = std::uniform_int_distribution<std::int64_t>(0, seen_ - 1)(rng_);
  if (slot < kMaxTimedSteps) samples_[static_cast<std::size_t>(slot)] = sample;
}

std::vector<BatchTiming> StepTimer::by_batch_size() const {
  if (seen_ <= kMaxTimedSteps) return batch_timings(samples_);  // every step: exact
  std::vector<BatchTiming> sampled = batch_timings(samples_);  // medians
  std::vector<BatchTiming> out;
  for (const auto& [size, sums] : sums_) {
    BatchTiming b;
    b.batch_size = size;
    for (const BatchTiming& t : sampled)
      if (t.batch_size == size) b = t;
    StepTimes* times[3] = {&b.all, &b.decode_only, &b.with_prefill};
    for (int k = 0; k < 3; ++k) {
      StepTimes& t = *times[k];
      const bool sampled_any = t.steps > 0;
      t.steps = sums.steps[k];
      if (t.steps == 0) continue;
      t.canary_us = sums.canary_us[k] / static_cast<double>(t.steps);
      t.step_us = sums.step_us[k] / static_cast<double>(t.steps);
      if (!sampled_any) t.canary_us_median = t.canary_us;  // too rare to be drawn: its mean
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace sim
}  // namespace kvcanary
