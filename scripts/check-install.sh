#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-install.sh — install kvcanary and build a downstream project against the installed tree.
#
#   scripts/check-install.sh
#
# 1. configures kvcanary ONCE, from scratch, exactly as the README tells a user to
#    (`cmake -S . -B <tmp>/build -G Ninja -DCMAKE_PREFIX_PATH=<kokkos>`, nothing else, no cache from an
#    earlier configure: a second configure can hide a bug of the first, e.g. an install path read before
#    GNUInstallDirs set it), builds what gets installed (the library and the kvcanary tool) and installs it
#    with `cmake --install <tmp>/build --prefix <tmp>/install`;
# 2. checks the package files are there (KVCanaryConfig.cmake, KVCanaryConfigVersion.cmake, targets,
#    headers, library);
# 3. builds and runs cmake/consumer (find_package(KVCanary <installed version>), KVCanary::kvcanary)
#    with CMAKE_PREFIX_PATH="<install>;<kokkos>", the documented way;
# 4. moves the install tree elsewhere and does it again with CMAKE_PREFIX_PATH="<moved install>" only:
#    the installed config must be relocatable and re-find Kokkos / Kokkos Kernels by itself
#    (through the hint to the installation kvcanary was built with);
# 5. runs the installed kvcanary tool (when the build has the CLI) with `check` on a small case;
# 6. checks that asking for the next major version fails (SameMajorVersion).
# Nothing is taken from the environment or the CMake package registries. Exit 0 when all hold.
#
# Environment: JOBS, KEEP_INSTALL_CHECK=1 keeps the temporary tree.
set -euo pipefail
KV_SCRIPT=check-install
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink

kv_log "dependencies"
kv_deps cpu

work=$(mktemp -d "${TMPDIR:-/tmp}/kvcanary-install-check.XXXXXX")
if [ "${KEEP_INSTALL_CHECK:-0}" = 1 ]; then kv_log "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi

# A clean environment: no Kokkos_DIR/Kokkos_ROOT/CMAKE_PREFIX_PATH, no package registries.
clean_cmake() {
  env -u CMAKE_PREFIX_PATH -u Kokkos_DIR -u Kokkos_ROOT -u KokkosKernels_DIR -u KokkosKernels_ROOT \
      -u KVCanary_DIR -u KVCanary_ROOT cmake "$@"
}

# --- 1. the user's build: one configure, from scratch ---------------------------------------------
build=$work/build
kv_log "cmake -S $KV_ROOT -B $build -G Ninja -DCMAKE_PREFIX_PATH=$KOKKOS_PREFIX (once, from scratch)"
clean_cmake -S "$KV_ROOT" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$KOKKOS_PREFIX" > "$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; kv_die "configuring $build failed"; }
has_cli=0
grep -qx 'KVCanary_ENABLE_CLI:BOOL=ON' "$build/CMakeCache.txt" && has_cli=1
installed_targets=(kvcanary)
[ "$has_cli" = 1 ] && installed_targets+=(kvcanary-cli)
kv_log "build ${installed_targets[*]} ($JOBS jobs)"
cmake --build "$build" -j "$JOBS" --target "${installed_targets[@]}" > "$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; kv_die "building $build failed"; }

prefix=$work/install
kv_log "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; kv_die "install failed"; }

# --- 2. the installed package ---------------------------------------------------------------------
config_dir=$(find "$prefix" -path '*/cmake/KVCanary' -type d | head -n 1)
[ -n "$config_dir" ] || kv_die "no <libdir>/cmake/KVCanary under $prefix"
missing=0
for f in "$config_dir/KVCanaryConfig.cmake" "$config_dir/KVCanaryConfigVersion.cmake" \
         "$config_dir/KVCanaryTargets.cmake" "$prefix/include/kvcanary/kvcanary.hpp" \
         "$prefix/include/kvcanary/version.hpp" "$(dirname "$(dirname "$config_dir")")/libkvcanary.a"; do
  if [ -f "$f" ]; then kv_log "installed: ${f#"$prefix"/}"; else kv_log "MISSING: ${f#"$prefix"/}"; missing=1; fi
done
[ "$missing" = 0 ] || kv_die "the install tree is incomplete"
for tree in "$KV_ROOT/" "$build/"; do
  if grep -rqF "$tree" "$config_dir"; then
    kv_die "the installed package files name the source or build tree ($tree): $(grep -rlF "$tree" "$config_dir" | tr '\n' ' ')"
  fi
done
# The exported target carries the installed include directory (a consumer needs nothing else).
grep -qF 'INTERFACE_INCLUDE_DIRECTORIES "${_IMPORT_PREFIX}/include"' "$config_dir/KVCanaryTargets.cmake" \
  || kv_die "KVCanary::kvcanary exports no \${_IMPORT_PREFIX}/include include directory: $(grep INTERFACE_INCLUDE_DIRECTORIES "$config_dir/KVCanaryTargets.cmake")"
# The CLI is installed too when the build has it: it must run from the (relocated) tree; checked below.
if [ "$has_cli" = 1 ]; then
  [ -x "$prefix/bin/kvcanary" ] || kv_die "MISSING: bin/kvcanary (the build has the CLI)"
  kv_log "installed: bin/kvcanary"
fi
version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$config_dir/KVCanaryConfigVersion.cmake")
[ -n "$version" ] || kv_die "cannot read PACKAGE_VERSION from KVCanaryConfigVersion.cmake"
kv_log "installed KVCanary $version"

# --- 3.-6. the consumer ---------------------------------------------------------------------------
consumer() {  # consumer NAME PREFIX_PATH [CMAKE ARGS...]: configure, build and run cmake/consumer
  local name=$1 prefix_path=$2; shift 2
  local dir=$work/consumer-$name
  kv_log "consumer [$name]: CMAKE_PREFIX_PATH=$prefix_path"
  clean_cmake -S "$KV_ROOT/cmake/consumer" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix_path" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF "$@" > "$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; kv_die "consumer [$name]: configure failed"; }
  grep 'consumer: KVCanary' "$dir.configure.log" >&2 || true
  cmake --build "$dir" -j "$JOBS" > "$dir.build.log" 2>&1 \
    || { cat "$dir.build.log"; kv_die "consumer [$name]: build failed"; }
  OMP_PROC_BIND=false "$dir/kvcanary_consumer" || kv_die "consumer [$name]: run failed"
}

consumer documented "$prefix;$KOKKOS_PREFIX" -DKVCANARY_REQUIRED_VERSION="$version"

moved=$work/moved-install
mv "$prefix" "$moved"
consumer kvcanary-prefix-only "$moved" -DKVCANARY_REQUIRED_VERSION="$version"
found_kokkos=$(sed -n 's/^Kokkos_DIR:PATH=//p' "$work/consumer-kvcanary-prefix-only/CMakeCache.txt")
[ "$found_kokkos" = "$KOKKOS_PREFIX/lib/cmake/Kokkos" ] \
  || kv_die "with only the kvcanary prefix, Kokkos was found at '$found_kokkos', not $KOKKOS_PREFIX/lib/cmake/Kokkos"
kv_log "with only the kvcanary prefix, the config re-found Kokkos at $found_kokkos"

if [ "$has_cli" = 1 ]; then
  # SPEC §6 "aggregate" as a kvcanary plan case: `check` exits 0 only when library and reference agree.
  rows=()
  for rp in 0 1 2 3; do rows+=("[$(seq -s, $((rp * 32)) $((rp * 32 + 31)))]"); done
  case_json=$work/aggregate.json
  printf '{"req_pool_indices": [1, 2, 3, 1], "prefix_lens": [0, 3, 8, 15], "extend_seq_lens": [4, 1, 1, 1],
 "req_to_token": [%s], "verify_capacity": 128, "write_req_capacity": 8}\n' "$(IFS=,; echo "${rows[*]}")" > "$case_json"
  kv_log "installed kvcanary check (relocated tree)"
  OMP_PROC_BIND=false "$moved/bin/kvcanary" check "$case_json" || kv_die "the installed kvcanary check failed"
fi

next_major=$(( ${version%%.*} + 1 )).0
if clean_cmake -S "$KV_ROOT/cmake/consumer" -B "$work/consumer-next-major" -G Ninja \
     -DCMAKE_PREFIX_PATH="$moved;$KOKKOS_PREFIX" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
     -DKVCANARY_REQUIRED_VERSION="$next_major" > "$work/consumer-next-major.log" 2>&1; then
  kv_die "find_package(KVCanary $next_major) accepted version $version"
fi
kv_log "find_package(KVCanary $next_major) rejects $version, as SameMajorVersion should"
kv_log "install check passed"
