#!/usr/bin/env bash
# gpu-profile.sh — Nsight Compute on the CUDA persistent path's kernels, one SPEC §7 workload at a time.
#
#   scripts/gpu-profile.sh [WORKLOAD...]     (default: every workload of perf_tests/workloads.hpp)
#
# Needs the build of `scripts/gpu-check.sh build` (build-gpu/). Profiles two kernel launches of the
# `plan/<workload>/persistent/stream` benchmark (full name: .../manual_time) after the warm-up, with
# warm caches and the clocks left alone (--cache-control none --clock-control none), so durations
# resemble back-to-back calls.
# Full reports go to $REPORT_DIR/ncu-<workload>.txt; the key lines are printed.
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)  # also through a symlink
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
REPORT_DIR=${REPORT_DIR:-$BUILD/report}
PERF=$BUILD/perf_tests/kvcanary_perf_cuda
[ -x "$PERF" ] || { echo "no $PERF: run scripts/gpu-check.sh build first" >&2; exit 1; }
mkdir -p "$REPORT_DIR"
WORKLOADS=${*:-decode_bs1 decode_bs8 decode_bs64 decode_bs256 long_context_bs4 prefill_bs32 swa_bs128 decode_bs4096 decode_bs64_nopool}
for w in $WORKLOADS; do
  report=$REPORT_DIR/ncu-$w.txt
  ncu --clock-control none --cache-control none -k 'regex:fused_plan_kernel|rows_kernel|entries_kernel' \
      --launch-skip 2 --launch-count 2 --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
      "$PERF" --benchmark_filter="^plan/$w/persistent/stream/" --benchmark_min_time=0.05 > "$report" 2>&1
  echo "== $w (ncu rc=$?)"
  # Kernel lines, then the key metrics of each ("    Duration   us   3.68").
  grep -E '_kernel<|^ +(Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|Registers Per Thread|Achieved Occupancy|Warp Cycles Per Issued Instruction|Issued Warp Per Scheduler|No Eligible|Executed Ipc Active) ' "$report" \
    | sed -E 's/^ *(void )?kvcanary::Impl::CudaPersistent::([a-z_]+)<.*\) \(([0-9, ]+)\)x\(([0-9, ]+)\).*/  \2 grid (\3) block (\4)/; s/ +/ /g' | cut -c1-160
  grep -q '_kernel<' "$report" || tail -5 "$report"
done
