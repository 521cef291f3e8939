#!/usr/bin/env python3
"""plot-simulation.py — plot a `kvcanary simulate --json` report.

    scripts/plot-simulation.py REPORT.json OUT.png

Left: per fault class, injected / detectable / detected / missed / not covered, with the median
detection latency (steps) above each class. Right: canary microseconds per step against the live batch
size. Needs matplotlib (python3-matplotlib).
"""
import json
import sys


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    with open(argv[1]) as f:
        report = json.load(f)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = [(name, c) for name, c in report["classes"].items() if c["injected"] > 0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    keys = ["injected", "detectable", "detected", "missed", "not_covered"]
    width = 0.16
    for k, key in enumerate(keys):
        left.bar([i + (k - 2) * width for i in range(len(classes))], [c[key] for _, c in classes], width, label=key)
    for i, (_, c) in enumerate(classes):
        median = c["latency_steps"]["median"]
        if median >= 0:
            left.annotate(f"{median} st", (i, c["injected"]), ha="center", va="bottom", fontsize=8)
    left.set_xticks(range(len(classes)))
    left.set_xticklabels([name for name, _ in classes], rotation=30, ha="right")
    left.set_title("faults per class (median detection latency, steps)")
    left.legend(fontsize=8)

    points = report["canary_us_by_batch_size"]
    right.plot([p["batch_size"] for p in points], [p["canary_us"] for p in points], "o-")
    right.set_xlabel("live batch size")
    right.set_ylabel("canary µs per step")
    right.set_title(f"{report['backend']}: {report['canary_us_per_step']:.1f} µs/step, "
                    f"{report['steps_per_second']:.0f} steps/s")
    fig.suptitle(f"kvcanary simulate: {report['steps']} steps, seed {report['seed']}, "
                 f"false positives {report['false_positives']}, missed {report['missed']}")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
