#ifndef KVCANARY_REPORT_READER_HPP
#define KVCANARY_REPORT_READER_HPP

// ViolationReader: the host's step boundary (SPEC-CANARY §7). read() copies a device ring to the host,
// fences, reports the rows it has not reported before, and delivers them (none / log / raise).
// Never call it inside a graph capture: it copies and waits.
//
//   kvcanary::ViolationReader reader({kvcanary::ReportMode::Raise});
//   ... each step: plan(), verify(), write() ...
//   reader.read(space, ring);   // throws kvcanary::ViolationError carrying every new row and line

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/tools/reference_canary.hpp>
#include <kvcanary/stages/report.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace kvcanary {

class ViolationReader {
 public:
  explicit ViolationReader(ReportOptions options = ReportOptions{}) : options_(std::move(options)) {}

  // The report of the rows counted since the last read (the first read: all of them); delivered per the
  // options before it is returned (in Raise mode, thrown instead when it has violations).
  template <class ExecutionSpace, class MemorySpace>
  ViolationReport read(const ExecutionSpace& space, const ViolationRing<MemorySpace>& ring) {
    auto rows = Kokkos::create_mirror_view(ring.rows);
    Kokkos::deep_copy(space, rows, ring.rows);
    std::int64_t count = 0, slot_runs = 0, kernel_runs = 0;
    const auto scalar = [&](const Kokkos::View<std::int64_t, MemorySpace>& device, std::int64_t& value) {
      Kokkos::deep_copy(space, Kokkos::View<std::int64_t, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(&value),
                        device);
    };
    scalar(ring.count, count);
    scalar(ring.slot_run_counter, slot_runs);
    scalar(ring.kernel_run_counter, kernel_runs);
    space.fence();
    const reference::ViolationRing snapshot =
        reference::ring_snapshot(rows.data(), ring.capacity(), count, slot_runs, kernel_runs);
    ViolationReport report = make_report(snapshot, already_reported_, options_);
    // Only the violations lost since the last read are new: the ring stays full once it is.
    report.newly_lost = std::max<std::int64_t>(0, count - std::max(last_count_, ring.capacity()));
    already_reported_ = report.next_row();
    last_count_ = count;
    deliver(report, options_);
    return report;
  }

  // After the engine zeroes the ring (count, rows) for a new run: report from its first row again.
  void restart() { already_reported_ = last_count_ = 0; }

  std::int64_t already_reported() const { return already_reported_; }

 private:
  ReportOptions options_;
  std::int64_t already_reported_ = 0;
  std::int64_t last_count_ = 0;
};

}  // namespace kvcanary

#endif
