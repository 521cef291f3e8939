#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# measure-sim-overhead.sh — the canary's overhead per engine step, measured with the simulator: decode
# batches of 1, 64 and 256 requests and a mixed prefill/decode batch of 64 (docs/PERFORMANCE.md).
#
#   scripts/measure-sim-overhead.sh KVCANARY BACKEND OUT_DIR
#   scripts/measure-sim-overhead.sh --help      this text
#
# KVCANARY is a built `kvcanary` executable (e.g. build/src/cli/kvcanary; scripts/gpu-check.sh build puts
# it in $BUILD_DIR/src/cli/kvcanary), BACKEND serial | openmp | cuda | default. Builds nothing. Each case is
# one `kvcanary simulate --json --faults none --full-batch` run (docs/simulator.md): the batch is kept at
# --max-batch requests, a finished request replaced at once, and the report times the steps whose batch
# only decoded apart from those with a prefill chunk, by live batch size. On CUDA the canary's head and
# tail are CUDA-graph replays (one graph per batch-size bucket, captured at the bucket's first step).
#
#   decode_bs1, decode_bs64, decode_bs256   --max-batch B --output-tokens $OUTPUT_TOKENS: the decode-only
#                                           steps with B live requests (every request writes one token;
#                                           contexts: a prompt of 24-192 tokens + up to $OUTPUT_TOKENS)
#   mixed_bs64                              --max-batch 64, outputs drawn (median 24 tokens): the steps of
#                                           64 live requests with at least one prefill chunk
#
# Writes OUT_DIR/<case>.json (the reports), OUT_DIR/commands.txt (the exact command lines) and
# OUT_DIR/summary.md, and prints the summary: per case the steps measured, the canary's µs per step
# (head + tail + prefix-cache sweep calls, each fenced; median and mean over those steps), its share of the
# whole simulated step (means) and the steps/s of those steps (1e6 / mean step µs; a step also holds the
# engine model on the host, the uploads and the ring read). The summary needs python3 (stdlib only).
#
# Environment: STEPS (steps per case, default 3000), OUTPUT_TOKENS (decode cases, default 512),
# SEED (default 1), OMP_NUM_THREADS etc. as for kvcanary.
set -euo pipefail
KV_SCRIPT=measure-sim-overhead
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink

for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done  # at once
[ $# -eq 3 ] || { kv_usage >&2; kv_die "expected KVCANARY BACKEND OUT_DIR, got $# argument(s)"; }
tool=$1 backend=$2 out=$3
[ -x "$tool" ] || kv_die "$tool is not an executable (build it: scripts/run-demo.sh, or scripts/gpu-check.sh build)"
command -v python3 > /dev/null || kv_log "WARNING: no python3: the runs' JSON reports only, no summary table"
STEPS=${STEPS:-3000}
OUTPUT_TOKENS=${OUTPUT_TOKENS:-512}
SEED=${SEED:-1}
mkdir -p "$out"

# name | batch size | which steps ("decode_only" or "with_prefill") | extra simulate options
cases=(
  "decode_bs1|1|decode_only|--output-tokens $OUTPUT_TOKENS"
  "decode_bs64|64|decode_only|--output-tokens $OUTPUT_TOKENS"
  "decode_bs256|256|decode_only|--output-tokens $OUTPUT_TOKENS"
  "mixed_bs64|64|with_prefill|"
)

{
  echo "# kvcanary simulate overhead runs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $("$tool" --version 2>&1 | head -n 1), backend $backend, host $(uname -n)"
} > "$out/commands.txt"
rows=()
for spec in "${cases[@]}"; do
  IFS='|' read -r name batch kind extra <<< "$spec"
  # shellcheck disable=SC2206  # $extra is a list of options
  args=(simulate --backend "$backend" --faults none --full-batch --max-batch "$batch" --steps "$STEPS" --seed "$SEED" $extra --json)
  echo "$tool ${args[*]} > $out/$name.json" >> "$out/commands.txt"
  kv_log "$name: $tool ${args[*]}"
  start=$(date +%s%N)
  "$tool" "${args[@]}" > "$out/$name.json" || kv_die "$name: kvcanary simulate failed (exit $?)"
  secs=$(( ($(date +%s%N) - start) / 1000000 ))
  kv_log "$name: $((secs / 1000)).$(printf %03d $((secs % 1000))) s"
  rows+=("$name|$batch|$kind|$secs")
done

command -v python3 > /dev/null || { kv_log "no python3: reports and command lines in $out"; exit 0; }
python3 - "$out" "$backend" "${rows[@]}" > "$out/summary.md" <<'EOF'
import json, sys
out, backend, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"| case ({backend}) | live batch | steps measured | canary µs/step median | canary µs/step mean "
      "| share of step | steps/s | run steps/s | run s |")
print("|---|---|---|---|---|---|---|---|---|")
for row in rows:
    name, batch, kind, ms = row.split("|")
    report = json.load(open(f"{out}/{name}.json"))
    entry = next((b for b in report["canary_us_by_batch_size"] if b["batch_size"] == int(batch)), None)
    t = entry[kind] if entry else {"steps": 0}
    label = f"{name} ({kind.replace('_', ' ')})"
    if t["steps"] == 0:
        print(f"| {label} | {batch} | 0 | - | - | - | - | {report['steps_per_second']:.0f} | {int(ms) / 1000:.1f} |")
        continue
    share = 100 * t["canary_us"] / t["step_us"] if t["step_us"] > 0 else 0
    print(f"| {label} | {batch} | {t['steps']} of {report['steps']} | {t['canary_us_median']:.1f} | {t['canary_us']:.1f} "
          f"| {share:.1f}% | {1e6 / t['step_us']:.0f} | {report['steps_per_second']:.0f} | {int(ms) / 1000:.1f} |")
EOF
cat "$out/summary.md"
kv_log "reports, command lines and summary in $out"
