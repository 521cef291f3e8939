#ifndef KVCANARY_SIM_FAULT_MODEL_HPP
#define KVCANARY_SIM_FAULT_MODEL_HPP

// What the simulator's models beside the one-engine model (two places, state slots) share: one seeded
// generator, the faults due at seeded steps, empty rings, and the count of rows no fault explains.

#include <kvcanary/tools/reference_canary.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvcanary {
namespace sim {

// `Report` has false_positives and false_positive_lines, and classes[] with a `skipped` count.
template <class Fault, class Report>
class FaultModel {
 protected:
  static constexpr std::int64_t kRingCapacity = 4096;

  explicit FaultModel(std::uint64_t seed) : rng_(seed) {}

  // `per_class` faults of each class at seeded steps in [10, steps - 10], ordered by step, then class.
  void schedule_faults(const std::vector<Fault>& faults, std::int64_t per_class, std::int64_t steps) {
    for (const Fault f : faults)
      for (std::int64_t k = 0; k < per_class; ++k)
        due_.push_back({uniform(10, std::max<std::int64_t>(10, steps - 10)), f});
    std::sort(due_.begin(), due_.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : static_cast<int>(a.second) < static_cast<int>(b.second);
    });
  }
  // A fault of class `f` is due (its step reached); take() removes it when the event can host it.
  bool due(Fault f) const {
    return std::any_of(due_.begin(), due_.end(), [&](const auto& d) { return d.second == f && d.first <= step_; });
  }
  bool take(Fault f) {
    const auto it =
        std::find_if(due_.begin(), due_.end(), [&](const auto& d) { return d.second == f && d.first <= step_; });
    if (it == due_.end()) return false;
    due_.erase(it);
    return true;
  }
  // Faults that found no event to host them by the end of the run.
  void count_skipped() {
    for (const auto& d : due_) ++report_.classes[static_cast<int>(d.second)].skipped;
  }

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  static ref::ViolationRing ring() {
    ref::ViolationRing r;
    r.capacity = kRingCapacity;
    return r;
  }
  // Stages other than the model's check never report on a correct model: any row is the model's bug.
  void expect_no_rows(const ref::ViolationRing& r, const char* what) {
    for (const ref::RingRow& row : r.rows) false_positive(row, what);
  }
  void false_positive(const ref::RingRow& row, const char* what) {
    ++report_.false_positives;
    if (report_.false_positive_lines.size() < 20)
      report_.false_positive_lines.push_back(std::string(what) + " step=" + std::to_string(step_) +
                                             " slot=" + std::to_string(row[kRowSlot]) +
                                             " bits=" + std::to_string(row[kRowFailReasonBits]));
  }

  std::mt19937_64 rng_;
  std::vector<std::pair<std::int64_t, Fault>> due_;
  std::int64_t step_ = 0;
  Report report_;
};

// Throws std::invalid_argument "kvcanary simulate (<model>): <what>".
[[noreturn]] inline void bad_model_option(const std::string& model, const std::string& what) {
  throw std::invalid_argument("kvcanary simulate (" + model + "): " + what);
}

// The ranges of the options the models share (steps, faults_per_class, max_prompt, max_output, max_active).
template <class Options>
void check_shared_options(const std::string& model, const Options& o) {
  if (o.steps < 0 || o.steps > 100000000) bad_model_option(model, "steps must be in [0, 100000000]");
  if (o.faults_per_class < 0 || o.faults_per_class > 64) bad_model_option(model, "faults_per_class must be in [0, 64]");
  if (o.max_prompt < 2 || o.max_output < 2 || o.max_prompt > 4096 || o.max_output > 4096)
    bad_model_option(model, "max_prompt and max_output must be in [2, 4096]");
  if (o.max_active < 1 || o.max_active > 256) bad_model_option(model, "max_active must be in [1, 256]");
}

// The sum of one count over a report's classes.
template <class Summary, std::size_t N>
std::int64_t total_of(const Summary (&classes)[N], std::int64_t Summary::*count) {
  std::int64_t n = 0;
  for (const Summary& c : classes) n += c.*count;
  return n;
}

}  // namespace sim
}  // namespace kvcanary

#endif
