#!/usr/bin/env bash
# gpu-transformers.sh — kvcanary on HF transformers' continuous batching on a CUDA node (no network needed):
# random-weight Llama shapes (1B, 8B; bf16) on the node's torch + transformers, the canary on CUDA tensors.
#
#   scripts/gpu-transformers.sh [STAGE...]     default: install faults overhead-1b overhead-8b
#
# install      Kokkos 3.4.01 cuda (sm_90, PIC) from .deps/kokkos-src-3.4.01-patched.tar.xz (cached in
#              $KOKKOS_DEPS_PREFIX), then `pip install --no-build-isolation --no-deps .` into the node's python3
#              (torch, transformers, nanobind, scikit-build-core come from the image); skipped when the installed
#              kvcanary already lists the cuda backend and was built from this checkout's commit.
# faults       $FAULT_TRIALS trials (default 2) of each planted engine fault on the 1B shape, then $CLEAN_STEPS clean
#              engine steps (default 10000; 80% on a Llama of shape $CLEAN_SHAPE, default small = the 1B's KV geometry
#              in 4 layers, 20% on a tiny Qwen2 with sliding layers; traffic seed $SEED, default 1), stopped short
#              of the call's deadline.
# overhead-1b  1B shape, decode batches $BATCHES (default 1,16,64; the largest first) x contexts $CONTEXTS (default
#              1024,8192), at least $DECODE (default 16) full-batch decode steps a row: canary ms per decode step,
#              share of the model's step, tokens/s on/off. real-KV partial. Rows not started by its deadline are
#              skipped. $ROWS (e.g. 64x8192,16x1024) names the rows instead, in its order; $LABELS (off or on) runs
#              one half of each row (a row too long for one call: its halves in two calls on one warm machine).
#              $PREFILL (alone, default, or fifo): the rows' prefill steps hold the decoding requests back, or FIFO's
#              mixed steps (docs/transformers.md "Why a 64 x 8192 row takes minutes").
# overhead-8b  the same with the 8B shape. With both overhead stages in one call, the 1B gets $OVERHEAD_1B_SHARE
#              (default 0.35) of the time left, the 8B the rest.
# The call's limit is $CALL_SECONDS (default 540, the run tool's 600 less start-up): every stage finishes, or
# stops at a deadline, $DEADLINE_MARGIN s (default 25) before it; a stage's Python is also killed then (the rows
# it printed stay). Each stage writes $REPORT_DIR/transformers-<stage>.md (+ .json, .err) as it goes and prints
# it; REPORT_DIR defaults to $OUT/report when the run tool's $OUT is set (what is there comes back even from a
# call cut by its limit), else build-gpu/report. torch's cuDNN attention is off in these runs
# (docs/transformers.md, "Device run").
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
cd "$ROOT" || exit 1
STAGES=${*:-install faults overhead-1b overhead-8b}
START=$(date +%s)
DEADLINE=$(( START + ${CALL_SECONDS:-540} - ${DEADLINE_MARGIN:-25} ))
JOBS=${JOBS:-$(nproc)}
PY=${PYTHON:-python3}
REPORT_DIR=${REPORT_DIR:-${OUT:+$OUT/report}}
REPORT_DIR=${REPORT_DIR:-$ROOT/build-gpu/report}
mkdir -p "$REPORT_DIR"
has() { [[ " $STAGES " == *" $1 "* ]]; }
status=0

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
export KOKKOS_DEPS_PREFIX=${KOKKOS_DEPS_PREFIX:-$HOME/.cache/kokkos-deps}
bundle=$(ls "$ROOT"/.deps/kokkos-src-3.4.01-patched.tar.xz 2>/dev/null || true)
[ -n "$bundle" ] && export KOKKOS_SRC_BUNDLE=$bundle
commit=${KVCANARY_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}

if has install; then
  t0=$(date +%s)
  JOBS=$JOBS "$ROOT/scripts/deps/setup-kokkos.sh" cuda > "$REPORT_DIR/kokkos-build.log" 2>&1 \
    || { tail -30 "$REPORT_DIR/kokkos-build.log"; echo "FAILED: Kokkos build"; exit 1; }
  prefix=$KOKKOS_DEPS_PREFIX/kokkos-3.4.01-cuda-sm90
  CMAKE_PREFIX_PATH=$prefix CMAKE_ARGS="-DCMAKE_CXX_COMPILER=$prefix/bin/nvcc_wrapper" \
    CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$PY" -m pip install --no-build-isolation --no-deps "$ROOT" \
    > "$REPORT_DIR/python-install.log" 2>&1 || { tail -30 "$REPORT_DIR/python-install.log"; exit 1; }
  echo "install: $(( $(date +%s) - t0 )) s; backends: $("$PY" -c 'import kvcanary; print(kvcanary.backends())')"
fi

run() {  # stage, deadline, args...
  local stage=$1 deadline=$2; shift 2
  local t0 limit; t0=$(date +%s)
  # the deadline lets the script stop on its own; the timeout kills it a little after, keeping what it printed
  limit=$(( deadline - t0 + 15 )); [ "$limit" -ge 5 ] || limit=5
  timeout "$limit" "$PY" "$ROOT/scripts/transformers-canary-run.py" --device cuda \
    --json "$REPORT_DIR/transformers-$stage.json" --deadline "$deadline" "$@" \
    > "$REPORT_DIR/transformers-$stage.md" 2> "$REPORT_DIR/transformers-$stage.err"
  local rc=$?
  [ $rc -eq 0 ] || status=1
  { echo "<!-- commit $commit, $(date -u +%FT%TZ), $(( $(date +%s) - t0 )) s, rc=$rc: scripts/transformers-canary-run.py --device cuda --deadline <+$(( deadline - t0 )) s> $* -->"
    cat "$REPORT_DIR/transformers-$stage.md"; } | tee "$REPORT_DIR/transformers-$stage.md.tmp"
  mv "$REPORT_DIR/transformers-$stage.md.tmp" "$REPORT_DIR/transformers-$stage.md"
  [ $rc -eq 0 ] || tail -20 "$REPORT_DIR/transformers-$stage.err"
}

has faults && run faults "$DEADLINE" --shape 1b --clean-shape "${CLEAN_SHAPE:-small}" \
  --clean-steps "${CLEAN_STEPS:-10000}" --fault-trials "${FAULT_TRIALS:-2}" --seed "${SEED:-1}"
for shape in 1b 8b; do
  has "overhead-$shape" || continue
  deadline=$DEADLINE
  if [ "$shape" = 1b ] && has overhead-8b; then
    now=$(date +%s)
    deadline=$(awk -v n="$now" -v d="$DEADLINE" -v s="${OVERHEAD_1B_SHARE:-0.35}" 'BEGIN { printf "%d", n + s * (d - n) }')
  fi
  run "overhead-$shape" "$deadline" --shape "$shape" --clean-steps 0 --fault-trials 0 \
    --overhead "${BATCHES:-1,16,64}" --contexts "${CONTEXTS:-1024,8192}" --rows "${ROWS:-}" \
    --labels "${LABELS:-off,on}" --decode "${DECODE:-16}" --prefill "${PREFILL:-alone}"
done
# the run tool brings $OUT back (the reports are there already when REPORT_DIR is under it)
if [ -n "${OUT:-}" ] && [[ "$REPORT_DIR" != "$OUT"/* ]]; then cp -r "$REPORT_DIR" "$OUT/" 2>/dev/null; fi
exit $status
