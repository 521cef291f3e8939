#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-sanitizers.sh — build the unit tests and the CLI with AddressSanitizer + UndefinedBehaviorSanitizer
# and run every ctest test, stopping at the first error.
#
#   scripts/check-sanitizers.sh
#
# Only kvcanary's own code is instrumented (CMAKE_CXX_FLAGS / linker flags of this build, into
# build-asan/); Kokkos and Kokkos Kernels are the usual cpu installation from scripts/setup-deps.sh.
# Backends: Serial and OpenMP (1 and 2 threads), as in scripts/run-tests.sh, except two runs that repeat
# others (CI's 60-minute budget is spent where a new class of error can show): the simulator's OpenMP run
# (sim_tests.openmp, 150 s of the 400 s under ASan; sim_tests.serial drives the same scenarios through the
# same code, the OpenMP stage kernels run instrumented in unit_tests.openmp.*) and the Serial unit tests
# (the same tests as unit_tests.openmp.1_threads, ~150 s of build); neither is built here (the simulator's
# OpenMP executable was ~120 s of the build, 2026-12-07), and run-tests.sh runs both uninstrumented.
# ctest runs $JOBS tests at a time; the OpenMP ones reserve their threads (PROCESSORS).
#
# Runtime options: the first error of any kind ends the test with a non-zero status.
#   ASAN_OPTIONS   halt_on_error=1, detect_leaks=1 (LeakSanitizer stays on: with g++ 12's libgomp and
#                  Kokkos 3.4's OpenMP backend it reports nothing, so no suppression is needed),
#                  detect_stack_use_after_return, init-order and strict string checks;
#   UBSAN_OPTIONS  halt_on_error=1, print_stacktrace=1 (the code is also built with -fno-sanitize-recover=all).
#
# Environment: KVCANARY_ASAN_BUILD_DIR (default: build-asan), JOBS.
set -euo pipefail
KV_SCRIPT=check-sanitizers
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink
BUILD=${KVCANARY_ASAN_BUILD_DIR:-$KV_ROOT/build-asan}

SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

kv_deps cpu
# -O1 -g1 without -DNDEBUG: assertions stay on, the Kokkos-heavy tests stay fast and compiling is quicker than
# -O2 (the usual ASan trade-off); -g1 keeps the line tables the reports' frames show (file:line) without the
# variables' debug information, ~20% of a unit's compile here (canary_commands.cpp: 52 against 66 s, 2026-12-07).
kv_configure "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DKVCanary_ENABLE_TESTS=ON -DKVCanary_ENABLE_CLI=ON -DKVCanary_ENABLE_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS="$SAN_FLAGS" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
# All but the Serial unit tests (unit_tests.openmp.1_threads runs the same tests through the same library
# code, nothing in include/ or src/ is Serial-only, and is instrumented; run-tests.sh runs the Serial ones) and
# the simulator's OpenMP executable, whose run ctest skips below.
mapfile -t targets < <(kv_targets_except "$BUILD" '^kvcanary_(unit_tests_serial|sim_tests_openmp)$')
kv_build "$BUILD" "${targets[@]}"

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1:print_summary=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1"
kv_log "ASAN_OPTIONS=$ASAN_OPTIONS"
kv_log "UBSAN_OPTIONS=$UBSAN_OPTIONS"
cd "$BUILD"
ctest --output-on-failure -j "$JOBS" -E '^(sim_tests[.]openmp|unit_tests[.]serial)$'
