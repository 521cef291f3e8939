#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-scripts.sh — regression checks of the newcomer's scripts themselves (issue 10, item 8).
#
#   scripts/check-scripts.sh
#
# 1. `scripts/run-demo.sh --help`, `scripts/run-tests.sh --help` and `scripts/measure-sim-overhead.sh --help`
#    print the script's own usage at once (under 5 s), and create no build directory;
# 2. the scripts work when called through a symlink from another directory (they find lib/common.sh and
#    the tree from their real location);
# 3. `scripts/run-demo.sh` (through a symlink) writes only the report to stdout: the same lines as
#    `kvcanary simulate` run directly, numbers aside; dependency, CMake and build logs go to stderr.
# 4. scripts/gpu-check.sh on a folder of executables built elsewhere (scripts/make-gpu-binaries.sh): refuses
#    `build` (exit 2), and `test` runs the kinds the folder holds, with its lib/ and its commit (a stand-in
#    executable: no GPU needed).
# Step 3 builds kvcanary (target kvcanary-cli) in the README build dir (a no-op after scripts/run-tests.sh).
#
# Environment: KVCANARY_BUILD_DIR (default: build), JOBS.
set -euo pipefail
KV_SCRIPT=check-scripts
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink

work=$(mktemp -d "${TMPDIR:-/tmp}/kvcanary-check-scripts.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
failures=0
fail() { kv_log "FAILED: $*"; failures=$((failures + 1)); }
pass() { kv_log "ok: $*"; }

# --- 1 + 2. usage at once, directly and through a symlink ---------------------------------------------
for script in run-demo run-tests measure-sim-overhead; do
  ln -s "$KV_ROOT/scripts/$script.sh" "$work/bin/$script"
  for how in direct symlink; do
    exe=$KV_ROOT/scripts/$script.sh
    [ "$how" = symlink ] && exe=$work/bin/$script
    missing_build=$work/no-build-$script-$how
    start=$(date +%s%N)
    if (cd "$work" && KVCANARY_BUILD_DIR=$missing_build "$exe" --help > "$work/help.out" 2> "$work/help.err"); then
      ms=$(( ($(date +%s%N) - start) / 1000000 ))
      if ! grep -q "^$script.sh — " "$work/help.out"; then fail "$script --help ($how) did not print its usage: $(head -c 300 "$work/help.out")"
      elif [ "$ms" -ge 5000 ]; then fail "$script --help ($how) took $ms ms"
      elif [ -e "$missing_build" ]; then fail "$script --help ($how) created $missing_build"
      else pass "$script --help ($how): usage in $ms ms, no build directory"; fi
    else
      fail "$script --help ($how) exited non-zero: $(head -c 300 "$work/help.err")"
    fi
  done
done

# --- 3. the demo's stdout is the report alone ---------------------------------------------------------
ln -s "$KV_ROOT/scripts/run-demo.sh" "$work/bin/kvcanary-demo"
if (cd "$work" && "$work/bin/kvcanary-demo" --steps 200 --seed 5 > "$work/demo.out" 2> "$work/demo.err"); then
  tool=$KV_BUILD_DIR/src/cli/kvcanary
  "$tool" simulate --steps 3000 --swa 64 --spec-decode --steps 200 --seed 5 > "$work/tool.out" 2> /dev/null || fail "$tool simulate failed"
  # numbers masked, runs of spaces squeezed (a number of another width shifts a padded column)
  mask() { sed -E -e 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/N/g' -e 's/ +/ /g' "$1"; }
  if ! diff <(mask "$work/tool.out") <(mask "$work/demo.out") > "$work/demo.diff"; then
    fail "run-demo.sh's stdout is not just the report (diff, numbers masked: tool < > script):"
    head -20 "$work/demo.diff" >&2
  elif ! grep -q '^kvcanary simulate: ' "$work/demo.out"; then
    fail "run-demo.sh printed no report"
  else
    pass "run-demo.sh (through a symlink): stdout is the report alone ($(wc -l < "$work/demo.out") lines), $(wc -l < "$work/demo.err") log lines on stderr"
  fi
else
  fail "run-demo.sh through a symlink failed: $(tail -n 5 "$work/demo.err")"
fi

# --- 4. gpu-check.sh on executables built elsewhere (scripts/make-gpu-binaries.sh's folder) -------------
# A stand-in runtime test that reports where its libraries come from; no GPU or CUDA needed.
prebuilt=$work/gpu-bin
mkdir -p "$prebuilt/lib" "$prebuilt/unit_tests/runtime"
printf 'commit=abc1234+changes\nkinds=runtime\n' > "$prebuilt/PREBUILT"
cat > "$prebuilt/unit_tests/runtime/kvcanary_runtime_tests_cuda" <<'STUB'
#!/bin/sh
echo "library path: $LD_LIBRARY_PATH"
echo "[  PASSED  ] 1 test."
STUB
chmod +x "$prebuilt/unit_tests/runtime/kvcanary_runtime_tests_cuda"
if (BUILD_DIR=$prebuilt "$KV_ROOT/scripts/gpu-check.sh" build > "$work/gpu-build.out" 2>&1); then
  fail "gpu-check.sh build on a prebuilt folder did not refuse"
elif [ $? -ne 2 ] || ! grep -q 'holds prebuilt executables' "$work/gpu-build.out"; then
  fail "gpu-check.sh build on a prebuilt folder: not exit 2 with its line: $(head -c 300 "$work/gpu-build.out")"
elif ! (BUILD_DIR=$prebuilt "$KV_ROOT/scripts/gpu-check.sh" test > "$work/gpu-test.out" 2>&1); then
  fail "gpu-check.sh test on a prebuilt folder failed: $(tail -n 5 "$work/gpu-test.out")"
elif ! grep -q '^kvcanary gpu-check .*, commit abc1234+changes (prebuilt)$' "$work/gpu-test.out" \
  || ! grep -q '^kvcanary_runtime_tests_cuda: rc=0 \[  PASSED  \] 1 test' "$work/gpu-test.out" \
  || grep -q 'kvcanary_unit_tests_cuda\|^cli' "$work/gpu-test.out" \
  || ! grep -q "^library path: $prebuilt/lib" "$prebuilt/report/kvcanary_runtime_tests_cuda.log"; then
  fail "gpu-check.sh test on a prebuilt folder: not its commit, kinds and libraries: $(head -c 600 "$work/gpu-test.out")"
else
  pass "gpu-check.sh on a prebuilt folder: build refused (exit 2); test runs its kinds with its lib/ and commit"
fi

[ "$failures" -eq 0 ] || kv_die "$failures script check(s) failed"
kv_log "script checks passed"
