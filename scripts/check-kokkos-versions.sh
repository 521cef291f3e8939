#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-kokkos-versions.sh — kvcanary built and tested against the newer Kokkos that users have.
#
#   scripts/check-kokkos-versions.sh [VERSION...]     (default: 4.5.1 5.0.2 5.2.2)
#
# Kokkos from Debian's sid / experimental binary packages (scripts/deps/debian-kokkos.sh, cached in
# ~/.cache/kokkos-debian), run on Debian 12 through sid's runtime loader:
#   4.5.1 + Kokkos Kernels 4.5.1, Serial, C++17, deprecated code (4) on
#   5.0.2 + Kokkos Kernels 5.0.2, Serial, C++20, deprecated code (5) on
#   5.2.2 without Kokkos Kernels,  OpenMP, C++20, deprecated code (5) on
# For each version, in build-kokkos-<version>/:
# 1. configure (Release at -O1: run-tests.sh tests the -O3 build, and -O1 halved a unit's compile here,
#    test_serial_v2.cpp 22 against 40 s on 2026-12-07) and build the library, the unit tests and the CLI
#    (the perf tests are configured, their host units syntax-checked in step 4, and built and run in
#    run-tests.sh); check that Kokkos Kernels was used exactly when the version has it
#    (KVCANARY_HAVE_KOKKOSKERNELS);
# 2. ctest: the unit tests on the packaged backend (OpenMP at 1 and 2 threads) and the CLI tests;
# 3. install and build + run cmake/consumer against the install (find_package(KVCanary) must re-find
#    Kokkos, and Kokkos Kernels only where the build used it);
# 4. syntax check (-fsyntax-only) of every host translation unit (src/, unit_tests/, perf_tests/, both
#    Serial and OpenMP drivers) with Serial + OpenMP turned on in a copy of the packaged config header and
#    every KOKKOS_ENABLE_DEPRECATED_CODE_* macro removed (as a Kokkos configured with
#    -DKokkos_ENABLE_DEPRECATED_CODE_4/5=OFF), for the versions in NODEP_VERSIONS (default 5.2.2, the newest:
#    what Kokkos 4 deprecated is gone from 5.x, which the 5.x builds compile against, and 5.0.2's CUDA compile in
#    step 5 is without deprecated code too; 4.5.1's and 5.0.2's ~85 s each went to CI's hour on 2026-12-05).
#    No Kokkos without deprecated code is linked or run. (The
#    same check with deprecated code as packaged was dropped on 2026-12-05 to keep CI within its hour: step 1
#    already compiles every unit with it on the packaged backend, and no unit ever failed only there);
# 5. CUDA compile (nvcc -c for sm_90, device code included, nothing linked or run) of the CUDA translation
#    units (unit tests, graph test, perf driver) with Serial + CUDA turned on in a copy of the packaged
#    config header and deprecated code removed, for the versions in CUDA_VERSIONS (default 5.0.2, the
#    newest with Kokkos Kernels, so its CUDA path is compiled too; ~220 s per version on 2 cores, so CI
#    compiles one; CUDA_VERSIONS="5.0.2 5.2.2" adds the newest Kokkos); skipped when there is no nvcc ($CUDA_HOME/bin/nvcc),
#    and for Kokkos 4.x with CUDA 13 (Kokkos 4.x's own CUDA headers do not compile with CUDA 13).
#
# Environment: JOBS, KOKKOS_DEB_HOME (default ~/.cache/kokkos-debian), CUDA_VERSIONS, NODEP_VERSIONS
# (space-separated).
set -euo pipefail
KV_SCRIPT=check-kokkos-versions
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink

for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done
if [ $# -gt 0 ]; then VERSIONS=("$@"); else VERSIONS=(4.5.1 5.0.2 5.2.2); fi
CUDA_VERSIONS=${CUDA_VERSIONS:-5.0.2}
NODEP_VERSIONS=${NODEP_VERSIONS:-5.2.2}

kv_log "dependencies (apt packages for the host build)"
"$KV_ROOT/scripts/setup-deps.sh" cpu > /dev/null

# make_overlay KOKKOS_INCLUDE OUT BACKENDS [nodep]: Kokkos' generated config headers, put first on the
# include path, with other backends enabled than the package's (which has one; every backend's headers
# are installed): BACKENDS is "SERIAL OPENMP" or "SERIAL CUDA" (CUDA for Hopper, desul's CUDA atomics
# on); nodep also removes the KOKKOS_ENABLE_DEPRECATED_CODE_* macros (a Kokkos configured without them).
make_overlay() {
  local include=$1 out=$2 backends=$3 mode=${4:-} backend config=$2/KokkosCore_config.h
  rm -rf "$out"; mkdir -p "$out/desul/atomics"
  sed -E -e '/^#define KOKKOS_ENABLE_ATOMICS_BYPASS/d' -e '/^#define KOKKOS_IMPL_BUILD_SHARED_LIBS/d' \
      -e 's@^#define KOKKOS_ENABLE_(SERIAL|OPENMP|CUDA)$@/* #undef KOKKOS_ENABLE_\1 */@' \
      "$include/KokkosCore_config.h" > "$config"
  for backend in $backends; do sed -i "s|^/\* #undef KOKKOS_ENABLE_$backend \*/|#define KOKKOS_ENABLE_$backend|" "$config"; done
  cp "$include/desul/atomics/Config.hpp" "$out/desul/atomics/Config.hpp"
  if [[ " $backends " == *" CUDA "* ]]; then
    sed -i -E 's@^/\* #undef (KOKKOS_ARCH_HOPPER|KOKKOS_ARCH_HOPPER90) \*/@#define \1@' "$config"
    sed -i 's|^/\* #undef DESUL_ATOMICS_ENABLE_CUDA \*/|#define DESUL_ATOMICS_ENABLE_CUDA|' "$out/desul/atomics/Config.hpp"
    grep -q '^#define KOKKOS_ARCH_HOPPER90' "$config" || kv_die "overlay: could not set KOKKOS_ARCH_HOPPER90"
  fi
  [ "$mode" = nodep ] && sed -i -E '/^#define KOKKOS_ENABLE_DEPRECATED_CODE_[0-9]/d' "$config"
  for backend in $backends; do
    grep -q "^#define KOKKOS_ENABLE_$backend\$" "$config" || kv_die "overlay: could not enable $backend"
  done
  local kind name dir guard
  for kind in Declare:decl:DECLARE Fwd:fwd:FWD; do
    IFS=: read -r name dir guard <<< "$kind"
    { echo "#ifndef KOKKOS_${guard}_HPP_"; echo "#define KOKKOS_${guard}_HPP_"
      for backend in $backends; do
        [ -f "$include/$dir/Kokkos_${name}_$backend.hpp" ] || kv_die "overlay: no $dir/Kokkos_${name}_$backend.hpp"
        echo "#include <$dir/Kokkos_${name}_$backend.hpp>"
      done
      echo "#endif"; } > "$out/KokkosCore_Config_${name}Backend.hpp"
  done
  { echo "#ifndef KOKKOS_SETUP_HPP_"; echo "#define KOKKOS_SETUP_HPP_"
    [[ " $backends " == *" CUDA "* ]] && echo "#include <setup/Kokkos_Setup_Cuda.hpp>"
    echo "#endif"; } > "$out/KokkosCore_Config_SetupBackend.hpp"
}

# Every host translation unit (what a Serial + OpenMP build compiles), and every CUDA one.
mapfile -t HOST_SOURCES < <(cd "$KV_ROOT" && find src unit_tests perf_tests -name '*.cpp' ! -name '*cuda*' | sort)
mapfile -t CUDA_SOURCES < <(cd "$KV_ROOT" && find unit_tests perf_tests -name '*cuda*.cpp' | sort)
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc

failed=()
check_version() {  # check_version VERSION: steps 1-4; returns non-zero at the first failed step
  local version=$1 env_file build work
  env_file=$("$KV_ROOT/scripts/deps/debian-kokkos.sh" "$version" | tail -n 1) || return 1
  # shellcheck source=/dev/null
  source "$env_file"
  build=$KV_ROOT/build-kokkos-$version
  local kk_args=(-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  [ -n "$KOKKOSKERNELS_DIR" ] && kk_args+=(-DKokkosKernels_DIR="$KOKKOSKERNELS_DIR")

  kv_log "[$version] 1. configure + build $build"
  # (subshells: kv_configure and kv_build end the script on failure; here the next version still runs)
  mkdir -p "$build"
  (KOKKOS_PREFIX=$KOKKOS_PREFIX kv_configure "$build" -DKokkos_DIR="$KOKKOS_DIR" "${kk_args[@]}" \
    -DCMAKE_EXE_LINKER_FLAGS="$KOKKOS_LINK_FLAGS" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DKVCanary_ENABLE_TESTS=ON -DKVCanary_ENABLE_CLI=ON -DKVCanary_ENABLE_BENCHMARKS=ON > "$build/kvcanary-configure.log" 2>&1) \
    || { tail -30 "$build/kvcanary-configure.log" >&2; return 1; }
  grep '^-- kvcanary' "$build/kvcanary-configure.log" >&2
  # The perf tests are configured (step 4 takes their compile commands) but not built.
  local targets
  mapfile -t targets < <(kv_targets_except "$build" '^kvcanary_perf_')
  (kv_build "$build" "${targets[@]}") || return 1
  local want_kk=OFF have_kk=OFF
  [ -n "$KOKKOSKERNELS_DIR" ] && want_kk=ON
  grep -q 'KVCANARY_HAVE_KOKKOSKERNELS' "$build/compile_commands.json" && have_kk=ON
  [ "$have_kk" = "$want_kk" ] || { kv_log "[$version] built with Kokkos Kernels: $have_kk, expected $want_kk"; return 1; }
  local std
  std=$(grep -m1 -oE -- '-std=[a-z+0-9]+' "$build/compile_commands.json" || echo "no -std flag (the compiler's default)")
  kv_log "[$version] built; Kokkos Kernels: $have_kk; $std"

  kv_log "[$version] 2. ctest"
  (cd "$build" && ctest --output-on-failure -j "$JOBS") || return 1

  kv_log "[$version] 3. install + consumer"
  work=$build/install-check
  rm -rf "$work"
  cmake --install "$build" --prefix "$work/install" > /dev/null || return 1
  grep -q "set(KVCanary_WITH_KOKKOSKERNELS $want_kk)" "$work/install/lib/cmake/KVCanary/KVCanaryConfig.cmake" \
    || { kv_log "[$version] the installed config does not say KVCanary_WITH_KOKKOSKERNELS $want_kk"; return 1; }
  env -u CMAKE_PREFIX_PATH -u Kokkos_DIR -u Kokkos_ROOT -u KokkosKernels_DIR -u KokkosKernels_ROOT \
    cmake -S "$KV_ROOT/cmake/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/install" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      -DCMAKE_EXE_LINKER_FLAGS="$KOKKOS_LINK_FLAGS" > "$work/consumer.log" 2>&1 \
    && cmake --build "$work/consumer" >> "$work/consumer.log" 2>&1 \
    || { tail -30 "$work/consumer.log" >&2; kv_log "[$version] consumer configure/build failed"; return 1; }
  OMP_NUM_THREADS=2 OMP_PROC_BIND=false "$work/consumer/kvcanary_consumer" || return 1

  if [[ " $NODEP_VERSIONS " != *" $version "* ]]; then
    kv_log "[$version] 4. syntax check without deprecated code: not asked (NODEP_VERSIONS=$NODEP_VERSIONS)"
  else
    kv_log "[$version] 4. syntax check, Serial + OpenMP, deprecated code removed"
    make_overlay "$KOKKOS_INCLUDE" "$build/overlay-nodep" "SERIAL OPENMP" nodep
    (cd "$KV_ROOT" && python3 scripts/lib/syntax_check.py host "$build" "$build/overlay-nodep" "$JOBS" "${HOST_SOURCES[@]}") \
      || return 1
  fi

  if [[ " $CUDA_VERSIONS " != *" $version "* ]]; then
    kv_log "[$version] 5. CUDA compile: not asked (CUDA_VERSIONS=$CUDA_VERSIONS)"
    return 0
  fi
  if [ ! -x "$NVCC" ]; then
    kv_log "[$version] 5. CUDA compile: SKIPPED (no nvcc at $NVCC)"
    return 0
  fi
  local cuda_major
  cuda_major=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  if [ "${version%%.*}" -lt 5 ] && [ "${cuda_major:-0}" -ge 13 ]; then
    # Kokkos 4.x's own CUDA headers fail with CUDA 13 (cudaGraphAddDependencies, cudaMemPrefetchAsync).
    kv_log "[$version] 5. CUDA compile: SKIPPED (Kokkos $version's CUDA backend predates CUDA 13; nvcc here: $cuda_major)"
    return 0
  fi
  kv_log "[$version] 5. CUDA compile (nvcc, sm_90, no link), Serial + CUDA, deprecated code removed"
  make_overlay "$KOKKOS_INCLUDE" "$build/overlay-cuda-nodep" "SERIAL CUDA" nodep
  (cd "$KV_ROOT" && python3 scripts/lib/syntax_check.py "cuda:$NVCC" "$build" "$build/overlay-cuda-nodep" "$JOBS" \
     "${CUDA_SOURCES[@]}") || return 1
}

for version in "${VERSIONS[@]}"; do
  start=$(date +%s)
  if check_version "$version"; then
    kv_log "[$version] passed in $(( $(date +%s) - start )) s"
  else
    kv_log "[$version] FAILED after $(( $(date +%s) - start )) s"
    failed+=("$version")
  fi
done
[ ${#failed[@]} -eq 0 ] || kv_die "failed for Kokkos ${failed[*]}"
kv_log "Kokkos ${VERSIONS[*]}: all passed"
