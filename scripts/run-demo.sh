#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# run-demo.sh — build the kvcanary tool and run its demo (the README's main command).
#
#   scripts/run-demo.sh [DEMO ARGS...]     e.g. --backend serial, --algorithm portable, --iterations 50
#   scripts/run-demo.sh --help             this text (the tool's own: build/src/cli/kvcanary --help)
#
# Installs the dependencies (scripts/setup-deps.sh cpu), configures build/ exactly as
# scripts/run-tests.sh does, builds only the kvcanary-cli target (the executable `kvcanary`) and runs
# `build/src/cli/kvcanary demo`: a built-in synthetic batch planned on the default
# Kokkos backend, with what it did and how long it took. Only that report goes to stdout; the
# dependency, CMake and build logs go to stderr.
#
# Environment: KVCANARY_BUILD_DIR (default: build), JOBS (default: nproc).
set -euo pipefail
KV_SCRIPT=run-demo
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink


for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done  # at once, before any build

# shellcheck disable=SC2119  # this script's arguments are not CMake arguments
kv_readme_configure
kv_log "build kvcanary ($JOBS jobs)"
kv_build "$KV_BUILD_DIR" kvcanary-cli
tool=$KV_BUILD_DIR/src/cli/kvcanary
[ -x "$tool" ] || kv_die "$tool was not built"
kv_log "$tool demo $*"
exec "$tool" demo "$@"
