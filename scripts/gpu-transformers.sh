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
# faults       1B shape: $CLEAN_STEPS clean engine steps (default 10000; 80% on the 1B Llama, 20% on a tiny Qwen2
#              with sliding layers) and $FAULT_TRIALS trials (default 2) of each planted engine fault.
# overhead-1b  1B shape, decode batches $BATCHES (default 1,16,64) x contexts $CONTEXTS (default 1024,8192):
#              canary ms per decode step, share of the model's step, tokens/s on/off. real-KV partial.
# overhead-8b  the same with the 8B shape.
# Each stage writes build-gpu/report/transformers-<stage>.md (+ .json) and prints it.
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
cd "$ROOT" || exit 1
STAGES=${*:-install faults overhead-1b overhead-8b}
JOBS=${JOBS:-$(nproc)}
PY=${PYTHON:-python3}
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

run() {  # stage, args...
  local stage=$1; shift
  local t0; t0=$(date +%s)
  "$PY" "$ROOT/scripts/transformers-canary-run.py" --device cuda --json "$REPORT_DIR/transformers-$stage.json" "$@" \
    > "$REPORT_DIR/transformers-$stage.md" 2> "$REPORT_DIR/transformers-$stage.err"
  local rc=$?
  [ $rc -eq 0 ] || status=1
  { echo "<!-- commit $commit, $(date -u +%FT%TZ), $(( $(date +%s) - t0 )) s, rc=$rc: scripts/transformers-canary-run.py --device cuda $* -->"
    cat "$REPORT_DIR/transformers-$stage.md"; } | tee "$REPORT_DIR/transformers-$stage.md.tmp"
  mv "$REPORT_DIR/transformers-$stage.md.tmp" "$REPORT_DIR/transformers-$stage.md"
  [ $rc -eq 0 ] || tail -20 "$REPORT_DIR/transformers-$stage.err"
}

has faults && run faults --shape 1b --clean-steps "${CLEAN_STEPS:-10000}" --fault-trials "${FAULT_TRIALS:-2}"
for shape in 1b 8b; do
  has "overhead-$shape" && run "overhead-$shape" --shape "$shape" --clean-steps 0 --fault-trials 0 \
    --overhead "${BATCHES:-1,16,64}" --contexts "${CONTEXTS:-1024,8192}"
done
[ -n "${OUT:-}" ] && cp -r "$REPORT_DIR" "$OUT/" 2>/dev/null  # the run tool brings $OUT back
exit $status
