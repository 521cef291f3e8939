#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-cuda-build.sh — compile and link everything for CUDA (sm_90) on a machine without a GPU.
#
#   scripts/check-cuda-build.sh
#
# Installs the cuda flavour of the dependencies (scripts/setup-deps.sh cuda: Kokkos 3.4.01 with
# Serial + CUDA for Hopper, built with nvcc; needs the CUDA toolkit in $CUDA_HOME, default /usr/local/cuda),
# configures build-cuda/ with that Kokkos' nvcc_wrapper as the C++ compiler and builds the library,
# the CUDA unit, graph, runtime and simulator tests, the CLI, the CUDA perf tests and the Python extension
# (kvcanary._core, linked against that PIC Kokkos; its build environment is build-py/venv, as for
# scripts/check-python.sh). Nothing is run: this proves the CUDA code compiles and
# links; running it needs a GPU (see docs/GPU.md). Host and device code are unoptimized here, so these
# executables are not the ones to run or time: scripts/make-gpu-binaries.sh and scripts/gpu-check.sh build those.
#
# Environment: KVCANARY_CUDA_BUILD_DIR (default: build-cuda), CUDA_HOME, JOBS.
set -euo pipefail
KV_SCRIPT=check-cuda-build
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink
BUILD=${KVCANARY_CUDA_BUILD_DIR:-$KV_ROOT/build-cuda}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] || kv_die "no nvcc in CUDA_HOME=$CUDA_HOME (install the CUDA toolkit or set CUDA_HOME)"
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"

KVCANARY_EXTRA_PACKAGES=$KV_PYTHON_PACKAGES kv_deps cuda
kv_python_env
# CMAKE_CXX_EXTENSIONS=OFF: the Kokkos CUDA installation forces it anyway (and warns when it has to).
# Host code at -O0 (CMAKE_CXX_FLAGS_RELEASE without -O3; device code too, below): nothing here runs,
# and the optimizer was ~15% of each CUDA unit's compile (2026-12-05).
kv_configure "$BUILD" -DCMAKE_CXX_COMPILER="$KOKKOS_PREFIX/bin/nvcc_wrapper" -DCMAKE_CXX_EXTENSIONS=OFF \
  -DCMAKE_CXX_FLAGS_RELEASE=-DNDEBUG \
  -DKVCanary_ENABLE_TESTS=ON -DKVCanary_ENABLE_CLI=ON -DKVCanary_ENABLE_BENCHMARKS=ON \
  -DKVCanary_ENABLE_PYTHON=ON -DPython_EXECUTABLE="$KV_PYTHON"
# The CUDA executables, the CLI and the Python extension; not the Serial/OpenMP test and perf executables,
# which run-tests.sh builds and runs (compiled here by nvcc they took ~180 s of CI's hour, 2026-12-05).
mapfile -t targets < <(kv_targets_except "$BUILD" '_(serial|openmp)$')
# Device code unoptimized too (NVVM and ptxas at -O0; nvcc_wrapper does not pass -Xcicc, so through nvcc's own
# NVCC_APPEND_FLAGS): what compiles and links does not depend on it, and cicc + ptxas were ~60% of a CUDA unit's
# compile (test_cuda_travel.cpp: 33 of 53 s, 2026-12-07).
export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-Xcicc -O0 -Xptxas -O0"
kv_build "$BUILD" "${targets[@]}"
kv_log "CUDA build complete (compile and link only, nothing run): ${targets[*]} and the libraries they link"
