#!/usr/bin/env bash
# setup-sglang-original.sh — the original system (sglang 0.5.23 from PyPI) for the Python differential
# tests: downloads the wheel once (no dependencies), keeps only its kv_canary kernels and test helpers,
# and prints the root to pass as KVCANARY_SGLANG_ROOT. A second run is a no-op.
#
#   setup-sglang-original.sh [PIP]     PIP: the pip to download with (default: python3 -m pip)
#
# Environment: KVCANARY_DEPS_CACHE (default: $HOME/.cache/kvcanary-deps).
# Read for facts and tested against; nothing of it is copied into kvcanary.
set -euo pipefail
VERSION=0.5.23
ROOT=${KVCANARY_DEPS_CACHE:-$HOME/.cache/kvcanary-deps}/sglang-$VERSION
PIP=${1:-python3 -m pip}
if [ -f "$ROOT/.complete" ]; then echo "$ROOT"; exit 0; fi
rm -rf "$ROOT" "$ROOT.download"
mkdir -p "$ROOT.download"
# shellcheck disable=SC2086  # PIP may be "python3 -m pip"
$PIP download --quiet --no-deps "sglang==$VERSION" -d "$ROOT.download" >&2
wheel=$(ls "$ROOT.download"/sglang-"$VERSION"-*.whl)
python3 - "$wheel" "$ROOT" <<'PY'
import sys, zipfile
wheel, root = sys.argv[1:]
keep = ("sglang/kernels/ops/kv_canary/", "sglang/test/kernels/kv_canary/")
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(keep)]
    if not any(n.endswith("verify_ref.py") for n in names):
        sys.exit(f"{wheel} has no sglang/kernels/ops/kv_canary/verify_ref.py")
    z.extractall(root, names)
PY
rm -rf "$ROOT.download"
touch "$ROOT/.complete"
echo "$ROOT"
