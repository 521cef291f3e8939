# shellcheck shell=bash disable=SC2034  # the variables set here are used by the scripts that source it
# common.sh — helpers shared by the scripts/ entry points (sourced, not run).
#
#   kv_deps FLAVOUR            installs the dependencies (scripts/setup-deps.sh cpu|cuda) and sets
#                              KOKKOS_PREFIX to the Kokkos + Kokkos Kernels prefix it prints last
#   kv_configure DIR ARGS...   configures kvcanary into DIR with Ninja, Release (unless ARGS say
#                              otherwise) and CMAKE_PREFIX_PATH=$KOKKOS_PREFIX
#   kv_build DIR [TARGET...]   builds DIR (everything, or the given targets) with $JOBS jobs
#   kv_readme_configure ARGS   kv_deps cpu + kv_configure of the README build ($KV_BUILD_DIR)
#   kv_python_env              a venv over Debian's python3 in build-py/venv (--system-site-packages) with
#                              nanobind and scikit-build-core, for building the Python extension; sets
#                              KV_PYTHON to its python (apt: KV_PYTHON_PACKAGES, through kv_deps)
#   kv_pip_install_self PIP    `pip install --no-build-isolation .` of this checkout with PIP, against
#                              $KOKKOS_PREFIX (the extension builds in build/py-*/)
#   kv_usage                   prints the calling script's header comment (its usage) to stdout
# CMake's and the build's output go to stderr: stdout is kept for what a script reports (the demo).
#
# Environment understood by every script:
#   JOBS   parallel build jobs (default: nproc)

KV_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
JOBS=${JOBS:-$(nproc)}
export JOBS

kv_usage() {  # the comment block after the shebang, without "# " and shellcheck directives
  sed -n -e '1d' -e '/^#/!q' -e '/^# shellcheck/d' -e 's/^# \{0,1\}//p' "$(readlink -f "$0")"
}

kv_log() { printf '[%s %s] %s\n' "${KV_SCRIPT:-kvcanary}" "$(date +%T)" "$*" >&2; }
kv_die() { kv_log "ERROR: $*"; exit 1; }

kv_deps() {
  local flavour=$1 out
  out=$("$KV_ROOT/scripts/setup-deps.sh" "$flavour") || kv_die "scripts/setup-deps.sh $flavour failed"
  KOKKOS_PREFIX=$(printf '%s\n' "$out" | tail -n 1)
  [ -f "$KOKKOS_PREFIX/lib/cmake/Kokkos/KokkosConfig.cmake" ] \
    || kv_die "no Kokkos installation at '$KOKKOS_PREFIX' (scripts/setup-deps.sh $flavour)"
  export KOKKOS_PREFIX
}

kv_configure() {
  local dir=$1; shift
  # A build directory made by another generator cannot be re-used by Ninja: start that one afresh.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt"; then
    kv_log "$dir was configured with another generator; reconfiguring it from scratch"
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
  cmake -S "$KV_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$KOKKOS_PREFIX" "$@" >&2 \
    || kv_die "configuring $dir failed"
}

kv_build() {  # kv_build DIR [TARGET...]
  local dir=$1; shift
  local targets=()
  [ $# -eq 0 ] || targets=(--target "$@")
  cmake --build "$dir" -j "$JOBS" "${targets[@]}" >&2 || kv_die "building $dir ${*:-(all)} failed"
}

# kv_targets_except DIR REGEX: the configured build's executables and modules whose target name does not
# match REGEX (for building all but some; the libraries they link come along).
kv_targets_except() {
  (cd "$1" && ninja -t targets all) \
    | sed -n -E 's/^[^:]+: CXX_(EXECUTABLE|MODULE_LIBRARY)_LINKER__(.+)_[A-Za-z]+$/\2/p' | grep -v -E "$2" | sort -u
}

# Debian's packages the Python extension and its tests need (passed to kv_deps by its callers).
KV_PYTHON_PACKAGES="python3-venv python3-dev python3-numpy python3-pytest python3-torch"

kv_pip_install_self() {
  kv_log "pip install . (Kokkos: $KOKKOS_PREFIX)"
  CMAKE_PREFIX_PATH=$KOKKOS_PREFIX CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    "$1" install --quiet --disable-pip-version-check --no-build-isolation "$KV_ROOT" >&2 \
    || kv_die "pip install . failed"
}

kv_python_env() {
  local venv=$KV_ROOT/build-py/venv
  if [ ! -x "$venv/bin/python" ]; then
    kv_log "virtual environment $venv (Debian's python3)"
    /usr/bin/python3 -m venv --system-site-packages "$venv" || kv_die "python3 -m venv failed"
  fi
  "$venv/bin/python" -c "import nanobind, scikit_build_core" 2>/dev/null \
    || "$venv/bin/pip" install --quiet --disable-pip-version-check nanobind==3.1.0 scikit-build-core==1.1.2 >&2 \
    || kv_die "installing nanobind and scikit-build-core failed"
  KV_PYTHON=$venv/bin/python
}

# The README build: build/ (or $KVCANARY_BUILD_DIR), configured the same way by run-tests.sh,
# run-demo.sh and check-install.sh so that none of them reconfigures what another one built.
KV_BUILD_DIR=${KVCANARY_BUILD_DIR:-$KV_ROOT/build}
KV_README_OPTIONS=(-DKVCanary_ENABLE_TESTS=ON -DKVCanary_ENABLE_CLI=ON -DKVCanary_ENABLE_BENCHMARKS=ON)

kv_readme_configure() {  # kv_readme_configure [EXTRA CMAKE ARGS...]: cpu dependencies + the README build
  kv_log "dependencies"
  kv_deps cpu
  kv_log "configure $KV_BUILD_DIR (Kokkos: $KOKKOS_PREFIX)"
  kv_configure "$KV_BUILD_DIR" "${KV_README_OPTIONS[@]}" "$@"
}
