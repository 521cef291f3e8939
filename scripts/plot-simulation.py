#!/usr/bin/env python3
"""plot-simulation.py — plot a `kvcanary simulate --json` report.

    scripts/plot-simulation.py REPORT.json OUT.png

Left: per fault class, injected / detectable / detected / missed / not covered. Middle: per class, the
detection latency in steps after the injection (median, with the min-max range). Right: canary
microseconds per step against the live batch size: the mean over all steps, and the medians of the
decode-only steps and of the steps with a prefill chunk (reports that have them). Needs matplotlib
(Debian: apt-get install python3-matplotlib, then run it with /usr/bin/python3 if another python3 comes
first on PATH).
"""
import json
import sys


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    with open(argv[1]) as f:
        report = json.load(f)
    try:
        import matplotlib
    except ImportError:
        print(f"plot-simulation.py: no matplotlib for {sys.executable} (Debian: apt-get install python3-matplotlib, "
              "and run this script with /usr/bin/python3)", file=sys.stderr)
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = [(name, c) for name, c in report["classes"].items() if c["injected"] > 0]
    fig, (counts, latency, batch) = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1.5, 1.1, 1.1]})

    keys = ["injected", "detectable", "detected", "missed", "not_covered"]
    width = 0.16
    for k, key in enumerate(keys):
        counts.bar([i + (k - 2) * width for i in range(len(classes))], [c[key] for _, c in classes], width,
                   label=key.replace("_", " "))
    top = max([c["injected"] for _, c in classes], default=1)
    counts.set_ylim(0, top * 1.25 + 0.5)  # room for the legend above the bars
    counts.set_xticks(range(len(classes)))
    counts.set_xticklabels([name for name, _ in classes], rotation=30, ha="right")
    counts.set_ylabel("faults")
    counts.set_title("faults per class")
    counts.legend(fontsize=8, ncol=5, loc="upper center", handlelength=1.2, columnspacing=1.0)

    lat = [(i, c["latency_steps"]) for i, (_, c) in enumerate(classes) if c["latency_steps"]["median"] >= 0]
    if lat:
        latency.errorbar([i for i, _ in lat], [l["median"] for _, l in lat],
                         yerr=[[l["median"] - l["min"] for _, l in lat], [l["max"] - l["median"] for _, l in lat]],
                         fmt="o", capsize=4, label="median (min-max)")
        for i, l in lat:
            latency.annotate(str(l["median"]), (i, l["median"]), textcoords="offset points", xytext=(6, 0),
                             va="center", fontsize=8)
        latency.legend(fontsize=8, loc="upper left")
    for i, (_, c) in enumerate(classes):
        if c["latency_steps"]["median"] < 0:
            latency.annotate("none\ndetected", (i, 0), ha="center", va="bottom", fontsize=7)
    latency.set_xticks(range(len(classes)))
    latency.set_xticklabels([name for name, _ in classes], rotation=30, ha="right")
    latency.set_xlim(-0.6, len(classes) - 0.4)
    latency.set_ylim(bottom=-0.5)
    latency.set_ylabel("steps after injection")
    latency.set_title("detection latency per class")

    points = report["canary_us_by_batch_size"]
    batch.plot([p["batch_size"] for p in points], [p["canary_us"] for p in points], "o-", label="all steps, mean")
    for kind, style, label in (("decode_only", "s--", "decode-only steps, median"),
                               ("with_prefill", "^:", "steps with a prefill chunk, median")):
        series = [(p["batch_size"], p[kind]["canary_us_median"]) for p in points if p.get(kind, {}).get("steps", 0) > 0]
        if series:
            batch.plot([b for b, _ in series], [us for _, us in series], style, label=label)
    batch.set_xlabel("live batch size (requests)")
    batch.set_ylabel("canary µs per step")
    batch.set_ylim(bottom=0)
    batch.legend(fontsize=8, loc="upper left")
    batch.set_title(f"{report['backend']}: {report['canary_us_per_step']:.1f} µs/step, "
                    f"{report['steps_per_second']:.0f} steps/s")

    options = [f"max batch {report['max_batch']}" + (" (kept full)" if report.get("full_batch") else ""),
               f"page size {report['page_size']}", f"SWA {report['swa'] or 'off'}",
               "spec decode " + ("on" if report["spec_decode"] else "off"), f"real-KV {report['real_kv']}"]
    fig.suptitle(f"kvcanary simulate: {report['steps']} steps, seed {report['seed']}, {', '.join(options)}; "
                 f"false positives {report['false_positives']}, missed {report['missed']}")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
