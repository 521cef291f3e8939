#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# run-demo.sh — build the kvcanary-plan tool and run its demo (the README's main command).
#
#   scripts/run-demo.sh [DEMO ARGS...]
#
# Installs the dependencies (scripts/setup-deps.sh cpu), configures build/ exactly as
# scripts/run-tests.sh does, builds only the kvcanary-plan target and runs
# `build/src/cli/kvcanary-plan demo`: a built-in synthetic batch planned on the default
# Kokkos backend, with what it did and how long it took.
#
# Environment: KVCANARY_BUILD_DIR (default: build), JOBS (default: nproc).
set -euo pipefail
KV_SCRIPT=run-demo
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# shellcheck disable=SC2119  # this script's arguments are not CMake arguments
kv_readme_configure
kv_log "build kvcanary-plan ($JOBS jobs)"
kv_build "$KV_BUILD_DIR" kvcanary-plan
tool=$KV_BUILD_DIR/src/cli/kvcanary-plan
[ -x "$tool" ] || kv_die "$tool was not built"
kv_log "$tool demo $*"
exec "$tool" demo "$@"
