#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# make-gpu-binaries.sh — build the CUDA test and perf executables here (no GPU needed) for a CUDA node to run
# at once, without its own build.
#
#   scripts/make-gpu-binaries.sh [KIND...]      kinds: unit graph runtime sim perf (default: unit graph runtime perf)
#
# Builds them like scripts/gpu-check.sh's build stage (Kokkos 3.4.01 cuda flavour for sm_90, Release, -lineinfo)
# in build-gpu-bin/, then copies them into .gpu-bin/ (git-ignored) in the build tree's layout, with the shared
# libraries they load that a node may lack (the CUDA runtime, Google Benchmark, libstdc++) in .gpu-bin/lib/ and
# a PREBUILT file naming the tree they were built from (commit, and "+changes" if the work tree differed from
# it) and the kinds held; then packs the folder into .gpu-bin.tar.xz (~18 MB for the default kinds, against
# 47-62 MB unpacked: a device call carries at most 64 MiB). Carry .gpu-bin.tar.xz and run
# `tar -xJf .gpu-bin.tar.xz && BUILD_DIR=$PWD/.gpu-bin scripts/gpu-check.sh test perf` (any stage but build and
# python); a node whose C library is older than this machine's cannot run them, and gpu-check then says so on
# its first test (docs/GPU.md). A device call's start is the scarce thing: a build on the node took 120-190 s.
#
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS.
set -euo pipefail
KV_SCRIPT=make-gpu-binaries
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink
BUILD=$KV_ROOT/build-gpu-bin
OUT=$KV_ROOT/.gpu-bin
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] || kv_die "no nvcc in CUDA_HOME=$CUDA_HOME (install the CUDA toolkit or set CUDA_HOME)"
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"

declare -A executable=(
  [unit]=unit_tests/kvcanary_unit_tests_cuda
  [graph]=unit_tests/cuda_graph/kvcanary_unit_tests_cuda_graph
  [runtime]=unit_tests/runtime/kvcanary_runtime_tests_cuda
  [sim]=unit_tests/sim/kvcanary_sim_tests_cuda
  [perf]=perf_tests/kvcanary_perf_cuda
)
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(unit graph runtime perf)
for kind in "${kinds[@]}"; do
  [ -n "${executable[$kind]:-}" ] || kv_die "unknown kind '$kind' (kinds: ${!executable[*]})"
done

kv_deps cuda
kv_configure "$BUILD" -DCMAKE_CXX_COMPILER="$KOKKOS_PREFIX/bin/nvcc_wrapper" -DCMAKE_CXX_FLAGS=-lineinfo
targets=()
for kind in "${kinds[@]}"; do targets+=("$(basename "${executable[$kind]}")"); done
kv_build "$BUILD" "${targets[@]}"

rm -rf "$OUT"
mkdir -p "$OUT/lib"
for kind in "${kinds[@]}"; do
  mkdir -p "$OUT/$(dirname "${executable[$kind]}")"
  cp "$BUILD/${executable[$kind]}" "$OUT/${executable[$kind]}"
  # The libraries a node may lack or hold older: not the C library's own (a node has its own, and a newer one
  # is what the executables need).
  ldd "$BUILD/${executable[$kind]}" | awk '$3 ~ /^\// {print $3}' \
    | grep -E '/lib(cudart|benchmark|stdc\+\+|gcc_s)[^/]*$' | xargs -r cp -L -t "$OUT/lib"
done
tree=$(git -C "$KV_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$KV_ROOT" diff --quiet HEAD 2>/dev/null || tree="$tree+changes"
printf 'commit=%s\nkinds=%s\nbuilt=%s\n' "$tree" "${kinds[*]}" "$(date -u +%Y-%m-%dT%H:%MZ)" > "$OUT/PREBUILT"
tar -C "$KV_ROOT" -cf - .gpu-bin | xz -3 -T "$JOBS" > "$OUT.tar.xz"
kv_log "$(du -sh "$OUT" | cut -f1) in $OUT, $(du -sh "$OUT.tar.xz" | cut -f1) packed ($tree: ${kinds[*]}); carry"
kv_log ".gpu-bin.tar.xz and run: tar -xJf .gpu-bin.tar.xz && BUILD_DIR=\$PWD/.gpu-bin scripts/gpu-check.sh test perf"
