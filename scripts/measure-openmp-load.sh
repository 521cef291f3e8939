#!/usr/bin/env bash
# measure-openmp-load.sh — docs/openmp.md's table: wall time of `kvcanary simulate --steps 3000` on Serial,
# on OpenMP with the tool's defaults and on OpenMP with 2 threads, three interleaved rounds, with two
# `yes > /dev/null` processes loading the host (started 20 s before, killed at the end).
#
#   scripts/measure-openmp-load.sh [TOOL]      (default: build/src/cli/kvcanary)
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
TOOL=${1:-$ROOT/build/src/cli/kvcanary}
yes > /dev/null & Y1=$!
yes > /dev/null & Y2=$!
trap 'kill $Y1 $Y2 2> /dev/null' EXIT
sleep 20
echo "start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg), $TOOL"
seconds_since() { echo "$(date +%s.%N) - $1" | bc; }
for round in 1 2 3; do
  t=$(date +%s.%N); env -u OMP_NUM_THREADS "$TOOL" simulate --steps 3000 --backend serial > /dev/null
  echo "$round serial $(seconds_since "$t") load $(cut -d' ' -f1 /proc/loadavg)"
  t=$(date +%s.%N); env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY "$TOOL" simulate --steps 3000 --backend openmp > /dev/null
  echo "$round openmp-defaults $(seconds_since "$t") load $(cut -d' ' -f1 /proc/loadavg)"
  t=$(date +%s.%N); env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$TOOL" simulate --steps 3000 --backend openmp > /dev/null
  echo "$round openmp-2-threads $(seconds_since "$t") load $(cut -d' ' -f1 /proc/loadavg)"
done
