#!/usr/bin/env bash
# gpu-check.sh — the GPU path checked with one command, on a CUDA node (no network needed).
#
#   scripts/gpu-check.sh [STAGE...]     stages, run in this order: build test perf sanitize python
#                                       (default: build test sanitize)
#
# build     Kokkos 3.4.01 + Kokkos Kernels (cuda flavour, sm_90) from the offline source bundle, then
#           kvcanary, its unit tests, CLI and perf tests, with $JOBS jobs (default: all cores), with
#           -lineinfo (no effect on the code; sanitizer and profiler reports get file:line).
# test      the CUDA unit tests (both entries algorithms), the CUDA-graph test, the runtime's and the simulator's.
# perf      the CUDA perf_tests, JSON to $REPORT_DIR/perf_cuda.json ($PERF_ARGS added).
# sanitize  compute-sanitizer memcheck on every CUDA unit test (all randomized differential cases) and
#           the graph and runtime tests; racecheck on the tests of $RACECHECK_FILTER, the graph and runtime tests
#           ($SANITIZER_TIMEOUT per run). $SANITIZE_ONLY=unit runs only the unit test's memcheck and racecheck,
#           and $MEMCHECK_FILTER narrows its memcheck; $SANITIZE_ONLY=runtime only the graph and runtime tests,
#           and $RUNTIME_SANITIZE_FILTER / $GRAPH_SANITIZE_FILTER narrow the runtime's and the graph test's
#           (gtest filters; for a short call on new tests).
# For a short call: $BUILD_TARGETS (cmake targets, default every GPU one) and $TESTS (default
# "unit graph runtime sim cli") narrow the build and the test stage.
# python    the Python package: `pip install --no-build-isolation .` against the cuda Kokkos (PIC) with
#           the node's python3 (nanobind, scikit-build-core, torch, pytest installed there), then
#           `pytest -m gpu unit_tests/python` (torch CUDA tensors, CuPy, streams, the graph test, and the
#           drop-in's differential suite on CUDA against the original's references from
#           .deps/sglang-0.5.23), then the same under compute-sanitizer memcheck ($PYTHON_SANITIZE_K
#           selects which, default "graph or plan"). $KVCANARY_DIFF_CASES cases per stage (default 200).
#
# Offline inputs (made on a networked machine by scripts/make-gpu-bundle.sh, carried in .deps/):
#   .deps/kokkos-src-3.4.01-patched.tar.xz   patched Kokkos + Kokkos Kernels sources
#   .deps/sysroot/                            Debian's GoogleTest, Google Benchmark, nlohmann-json, when
#                                             the node has none of its own
#   .deps/sglang-0.5.23/                      the original's kv_canary references and test helpers
# Prebuilt: with BUILD_DIR at a folder made by scripts/make-gpu-binaries.sh (a PREBUILT file in it), the
# stages after build run its executables (their libraries from its lib/), $TESTS defaults to the kinds it
# holds, and the summary names the tree they were built from; build and python are refused there.
# A summary goes to $REPORT_DIR/summary.txt (default build-gpu/report). Its commit is $KVCANARY_COMMIT, else
# the commit of this checkout when it is a git work tree of its own, else "unknown" (an exported copy
# inside some other repository does not take that repository's commit).
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)  # also through a symlink
cd "$ROOT"
STAGES=${*:-build test sanitize}
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
REPORT_DIR=${REPORT_DIR:-$BUILD/report}
mkdir -p "$REPORT_DIR"
SUMMARY=$REPORT_DIR/summary.txt
: > "$SUMMARY"
status=0
say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
export KOKKOS_DEPS_PREFIX=${KOKKOS_DEPS_PREFIX:-$HOME/.cache/kokkos-deps}  # outside the tree: carried folders are replaced
bundle=$(ls "$ROOT"/.deps/kokkos-src-3.4.01-patched.tar.xz 2>/dev/null || true)
[ -n "$bundle" ] && export KOKKOS_SRC_BUNDLE=$bundle
prefix_path=$KOKKOS_DEPS_PREFIX/kokkos-3.4.01-cuda-sm90
[ -d "$ROOT/.deps/sysroot/usr" ] && prefix_path="$prefix_path;$ROOT/.deps/sysroot/usr"

commit=${KVCANARY_COMMIT:-unknown}
prebuilt=$BUILD/PREBUILT
if [ -f "$prebuilt" ]; then
  if has build || has python; then
    say "$BUILD holds prebuilt executables (scripts/make-gpu-binaries.sh): build and python need a build folder"
    exit 2
  fi
  [ -n "${KVCANARY_COMMIT:-}" ] || commit="$(sed -n 's/^commit=//p' "$prebuilt") (prebuilt)"
  TESTS=${TESTS:-$(sed -n 's/^kinds=//p' "$prebuilt")}
  export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [ -z "${KVCANARY_COMMIT:-}" ] && [ "$(git -C "$ROOT" rev-parse --show-toplevel 2>/dev/null)" = "$ROOT" ]; then
  commit=$(git -C "$ROOT" rev-parse --short HEAD)
fi
say "kvcanary gpu-check $(date -u +%Y-%m-%dT%H:%MZ), commit $commit"
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
say "nvcc: $("$NVCC" --version | tail -1)"

if has build; then
  t0=$(date +%s)
  JOBS=$JOBS "$ROOT/scripts/deps/setup-kokkos.sh" cuda > "$REPORT_DIR/kokkos-build.log" 2>&1 \
    || { tail -30 "$REPORT_DIR/kokkos-build.log"; say "FAILED: Kokkos build"; exit 1; }
  t1=$(date +%s)
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_COMPILER="$KOKKOS_DEPS_PREFIX/kokkos-3.4.01-cuda-sm90/bin/nvcc_wrapper" \
        -DCMAKE_CXX_FLAGS=-lineinfo -DCMAKE_PREFIX_PATH="$prefix_path" > "$REPORT_DIR/configure.log" 2>&1 \
    || { tail -30 "$REPORT_DIR/configure.log"; say "FAILED: configure"; exit 1; }
  # The GPU's targets only: the host backends' tests run in CI.
  # shellcheck disable=SC2086  # BUILD_TARGETS is a list of target names
  cmake --build "$BUILD" -j "$JOBS" --target ${BUILD_TARGETS:-kvcanary_unit_tests_cuda kvcanary_unit_tests_cuda_graph \
        kvcanary_runtime_tests_cuda kvcanary-cli kvcanary_perf_cuda kvcanary_sim_tests_cuda} > "$REPORT_DIR/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$REPORT_DIR/build.log" | head -30; say "FAILED: build"; exit 1; }
  say "build: Kokkos $((t1 - t0)) s, kvcanary + tests + perf $(( $(date +%s) - t1 )) s"
fi

unit=$BUILD/unit_tests/kvcanary_unit_tests_cuda
graph=$BUILD/unit_tests/cuda_graph/kvcanary_unit_tests_cuda_graph
# shellcheck disable=SC2034  # read as ${!kind} by the test stage
sim=$BUILD/unit_tests/sim/kvcanary_sim_tests_cuda
runtime=$BUILD/unit_tests/runtime/kvcanary_runtime_tests_cuda

gtest_line() {  # gtest_line NAME LOG RC
  local counts; counts=$(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$2" | tr '\n' ' ')
  say "$1: rc=$3 ${counts}"
}

if has test; then
  TESTS=${TESTS:-unit graph runtime sim cli}
  for kind in unit graph runtime sim; do
    [[ " $TESTS " == *" $kind "* ]] || continue
    exe=${!kind}
    name=$(basename "$exe")
    "$exe" --gtest_output="xml:$REPORT_DIR/$name.xml" > "$REPORT_DIR/$name.log" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    gtest_line "$name" "$REPORT_DIR/$name.log" $rc
    grep -E '^\[ +graph +\]|FAILED|Failure|what\(\)|Expected|Which is|Actual' "$REPORT_DIR/$name.log" | head -24 | tee -a "$SUMMARY"
  done
  # The CLI end to end, on the CUDA backend among others.
  if [[ " $TESTS " == *" cli "* ]]; then
    (cd "$BUILD" && ctest -R '^cli' -j 8 > "$REPORT_DIR/cli.log" 2>&1)
    rc=$?; [ $rc -eq 0 ] || status=1
    say "cli (ctest -R cli): rc=$rc $(grep -E 'tests passed' "$REPORT_DIR/cli.log")"
  fi
fi

if has perf; then
  perf=$BUILD/perf_tests/kvcanary_perf_cuda
  "$perf" --benchmark_out="$REPORT_DIR/perf_cuda.json" --benchmark_out_format=json ${PERF_ARGS:-} \
    > "$REPORT_DIR/perf_cuda.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  # One benchmark is one name: its repetitions and aggregate rows (_mean, _median, _stddev, _cv) count once.
  benchmarks=$(awk '$1 ~ /^[a-z_]+\// {print $1}' "$REPORT_DIR/perf_cuda.log" | sed -E 's/_(mean|median|stddev|cv)$//' | sort -u | wc -l)
  say "perf: rc=$rc ($benchmarks benchmarks)"
fi

if has sanitize; then
  # memcheck: the whole suite, every randomized differential case (100 per algorithm took under 0.2 s);
  # racecheck (much slower) on the tests that launch every kernel with shared memory over every shape
  # class, and the graph test.
  [ -n "${SANITIZER_TIMEOUT:-}" ] && SAN_TIMEOUT="timeout $SANITIZER_TIMEOUT" || SAN_TIMEOUT=
  RACE_FILTER=${RACECHECK_FILTER:-*Facts*:*BadRow*:*WriteRules*:*LargeBatch*:*LongWrites*/Cuda:*ManyRequestWrites*/Cuda}
  sanitize() {  # sanitize TOOL LOGNAME EXE [ARGS...]
    local tool=$1 log=$REPORT_DIR/$2.$1.log; shift 2
    $SAN_TIMEOUT compute-sanitizer --tool "$tool" --error-exitcode 99 "$@" > "$log" 2>&1
    local rc=$?; [ $rc -eq 0 ] || status=1
    say "$tool $(basename "$1") ${*:2}: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$log" | tr '\n' ' ')"
    # The first hazards or errors, with file:line (the build has -lineinfo).
    [ $rc -eq 0 ] || grep -m 12 -E '(Error|Warning|WARNING|ERROR).*(access|hazard|Race)|^=+ +and (Write|Read) ' "$log" \
      | cut -c1-400 | tee -a "$SUMMARY"
  }
  if [ "${SANITIZE_ONLY:-}" != runtime ]; then
    sanitize memcheck unit "$unit" ${MEMCHECK_FILTER:+--gtest_filter="$MEMCHECK_FILTER"}
    sanitize racecheck unit "$unit" --gtest_filter="$RACE_FILTER"
  fi
  if [ "${SANITIZE_ONLY:-}" != unit ]; then
    sanitize memcheck graph "$graph" --gtest_filter="${GRAPH_SANITIZE_FILTER:-*}"
    sanitize racecheck graph "$graph" --gtest_filter="${GRAPH_SANITIZE_FILTER:-*}"
    # Without the test whose cudaMalloc must fail (memcheck counts that API error: 2 errors, 2026-12-05).
    sanitize memcheck runtime "$runtime" \
      --gtest_filter="${RUNTIME_SANITIZE_FILTER:-*}-Runtime.AConfigTooLargeForTheHostThrowsInsteadOfAllocating"
    # racecheck runs every kernel ~100x slower: the 10,000-step health-check test alone outlasts 150 s (cut
    # at 50 and 150 s on 2026-12-04); its passes are the other runtime tests' passes repeated.
    sanitize racecheck runtime "$runtime" \
      --gtest_filter="${RUNTIME_SANITIZE_FILTER:-*}-Runtime.HealthCheckQuietOnTenThousandCleanSteps"
  fi
fi

if has python; then
  PY=${PYTHON:-python3}
  t0=$(date +%s)
  JOBS=$JOBS "$ROOT/scripts/deps/setup-kokkos.sh" cuda > "$REPORT_DIR/kokkos-build.log" 2>&1 \
    || { tail -30 "$REPORT_DIR/kokkos-build.log"; say "FAILED: Kokkos build"; exit 1; }
  CMAKE_PREFIX_PATH="$KOKKOS_DEPS_PREFIX/kokkos-3.4.01-cuda-sm90" \
    CMAKE_ARGS="-DCMAKE_CXX_COMPILER=$KOKKOS_DEPS_PREFIX/kokkos-3.4.01-cuda-sm90/bin/nvcc_wrapper" \
    CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$PY" -m pip install --no-build-isolation --no-deps "$ROOT" \
    > "$REPORT_DIR/python-install.log" 2>&1
  rc=$?; [ $rc -eq 0 ] || status=1
  say "python install: rc=$rc in $(( $(date +%s) - t0 )) s"
  if [ $rc -eq 0 ]; then
    export KVCANARY_SGLANG_ROOT=${KVCANARY_SGLANG_ROOT:-$ROOT/.deps/sglang-0.5.23} KVCANARY_DIFF_CASES=${KVCANARY_DIFF_CASES:-200}
    (cd "$ROOT/unit_tests/python" && "$PY" -m pytest -q -p no:cacheprovider -m gpu . > "$REPORT_DIR/python-gpu.log" 2>&1)
    rc=$?; [ $rc -eq 0 ] || status=1
    say "pytest -m gpu: rc=$rc $(tail -1 "$REPORT_DIR/python-gpu.log")"
    grep -E '^(FAILED|ERROR)|Error:' "$REPORT_DIR/python-gpu.log" | head -20 | tee -a "$SUMMARY"
    (cd "$ROOT/unit_tests/python" && KVCANARY_DIFF_CASES=20 compute-sanitizer --tool memcheck --error-exitcode 99 \
       --target-processes all "$PY" -m pytest -q -p no:cacheprovider -m gpu -k "${PYTHON_SANITIZE_K:-graph or plan}" . \
       > "$REPORT_DIR/python-gpu.memcheck.log" 2>&1)
    rc=$?; [ $rc -eq 0 ] || status=1
    say "memcheck pytest -m gpu: rc=$rc, $(grep -E 'ERROR SUMMARY' "$REPORT_DIR/python-gpu.memcheck.log" | tail -1)"
  fi
fi

say "gpu-check: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
