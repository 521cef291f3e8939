#!/usr/bin/env python3
"""Tables and a plot from the kvcanary perf drivers' Google Benchmark JSON.

    build/perf_tests/kvcanary_perf_cuda --benchmark_out=cuda.json --benchmark_out_format=json
    build/perf_tests/kvcanary_perf_openmp --benchmark_out=openmp.json --benchmark_out_format=json
    scripts/perf_report.py cuda.json openmp.json serial.json [-o report.md] [--plot perf.png]

Benchmark names (perf_tests/README.md):
    <stage>/<workload>/<serial|openmp>                      host backends
    <stage>/<workload>/<algorithm>/<stream|graph>           CUDA
with stage plan, verify, verify_kv (one call over the K and V buffers) or write; plan's algorithms are
portable and persistent, verify's portable, write's cuda (the raw kernel) and portable. The label is the regime ("latency", "bandwidth" or,
for prefill writes, "chain"). A row is the "median" aggregate when the run had repetitions (the drivers'
default), else the median of its iteration rows. The floors come from each file's context
(kvcanary_copy_GB_per_s, kvcanary_launch_us, kvcanary_chain_ns_per_token), measured in the same run; the
verify rows carry their own gather floor (gather_floor_us). The original system's verify and write times
are GPU-FLOORS.md's (H200, CUDA graph of 20 calls, 2026-12-03).
The plot needs matplotlib; without it the tables are still written and the plot is skipped.
"""

import argparse
import json
import statistics
import sys
from collections import OrderedDict

HOST_BACKENDS = ("serial", "openmp")
ALGORITHMS = ("portable", "persistent", "cuda")
WRITE_ALGORITHMS = ("cuda", "portable")
STAGES = ("plan", "verify", "verify_kv", "write")
MODES = ("graph", "stream")
MODE_TITLES = (("graph", "CUDA graph replay (20 calls per graph; µs per call)"),
               ("stream", "back-to-back stream launches (20 calls between fences; µs per call)"))
COUNTERS = ("us_per_call", "entries", "floor_us", "pct_of_floor", "GB_per_s", "bytes", "batch_size",
            "graph_nodes_per_call", "copy_floor_us", "gather_floor_us", "chain_floor_us", "tokens",
            "longest_request")

# The original system, µs per call on the H200 (GPU-FLOORS.md, "The original system on the same workloads":
# distinct slots, the expected-token check on, 20 calls in one CUDA graph, 2026-12-03).
ORIGINAL_VERIFY_US = {
    "decode_bs1": 3.22, "decode_bs8": 4.81, "decode_bs64": 13.33, "decode_bs256": 246.85,
    "long_context_bs4": 24.66, "prefill_bs32": 3.68, "swa_bs128": 28.34, "decode_bs4096": 28.73,
    "decode_bs64_nopool": 13.20,
}
ORIGINAL_WRITE_US = {
    "decode_bs1": 3.51, "decode_bs64": 3.54, "decode_bs256": 3.62, "decode_bs4096": 6.24,
    "prefill_bs32x2k_first_chunk": 512.7, "prefill_bs32x2k_next_chunk": 572.3,
    "prefill_bs1x8k_first_chunk": 2006.0, "prefill_bs1x8k_next_chunk": 2235.0,
}


def parse_name(run_name):
    """(stage, 'host', workload, backend, None) or (stage, 'gpu', workload, algorithm, mode), or None."""
    parts = run_name.split("/")
    if parts and parts[-1] == "manual_time":
        parts = parts[:-1]
    if not parts or parts[0] not in STAGES:
        return None
    if len(parts) == 3 and parts[2] in HOST_BACKENDS:
        return (parts[0], "host", parts[1], parts[2], None)
    if len(parts) == 4 and parts[2] in ALGORITHMS and parts[3] in MODES:
        return (parts[0], "gpu", parts[1], parts[2], parts[3])
    return None


def load(paths):
    """results[(kind, workload, a, b)] = {counters..., 'label': ...}; floors[backend] = context dict; errors."""
    results, floors, errors, order = {}, {}, [], OrderedDict()
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = data.get("context", {})
        backend = context.get("kvcanary_backend", path)
        floors[backend] = {
            "copy_GB_per_s": float(context.get("kvcanary_copy_GB_per_s", "nan")),
            "launch_us": float(context.get("kvcanary_launch_us", "nan")),
            "copy_method": context.get("kvcanary_copy_method", "?"),
            "launch_method": context.get("kvcanary_launch_method", "?"),
            "chain_ns_per_token": float(context.get("kvcanary_chain_ns_per_token", "nan")),
            "chain_method": context.get("kvcanary_chain_method", "?"),
            "host": context.get("host_name", "?"),
            "date": context.get("date", "?"),
        }
        medians, iterations = {}, {}
        for bench in data.get("benchmarks", []):
            run_name = bench.get("run_name", bench["name"])
            key = parse_name(run_name)
            if key is None:
                continue
            if bench.get("error_occurred"):
                errors.append("%s (%s): %s" % (run_name, path, bench.get("error_message", "?")))
                continue
            order.setdefault(key[:3], bench.get("label", ""))
            row = {c: float(bench[c]) for c in COUNTERS if c in bench}
            row["label"] = bench.get("label", "")
            if bench.get("run_type") == "aggregate":
                if bench.get("aggregate_name") == "median":
                    medians[key] = row
            else:
                iterations.setdefault(key, []).append(row)
        for key, rows in iterations.items():
            if key in medians:
                continue
            merged = {c: statistics.median(r[c] for r in rows) for c in COUNTERS if all(c in r for r in rows)}
            merged["label"] = rows[0]["label"]
            medians[key] = merged
        for key, row in medians.items():
            if key in results:
                print("perf_report: %s given twice; keeping %s" % ("/".join(k for k in key if k), path),
                      file=sys.stderr)
            results[key] = row
    return results, floors, errors, order


def workloads_of(kind, order, stages=("plan",)):
    """Workloads of one kind and stage(s), latency ones first, in the order the drivers ran them."""
    names = []
    for (stage, k, w), label in order.items():
        if stage in stages and k == kind and w not in [n for n, _ in names]:
            names.append((w, label))
    return [w for w, label in names if label == "latency"] + [w for w, label in names if label != "latency"]


def fmt(value, digits=1):
    if value is None:
        return "–"
    if value >= 1000:
        return "{:,.0f}".format(value)
    return "{:.{}f}".format(value, digits)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def first_present(results, keys):
    """The row of the first key that has results, or None."""
    return next((results[k] for k in keys if k in results), None)


def present(results, workloads, keys_of):
    """(workload, keys, the first row present) for each workload with results under keys_of(workload)."""
    for w in workloads:
        keys = keys_of(w)
        row = first_present(results, keys.values() if isinstance(keys, dict) else keys)
        if row is not None:
            yield w, keys, row


def get(results, key, counter):
    row = results.get(key)
    return None if row is None or counter not in row else row[counter]


def gpu_tables(results, order):
    out = []
    workloads = workloads_of("gpu", order)
    if not workloads:
        return out
    for mode, title in MODE_TITLES:
        rows = []
        for w, keys, any_row in present(results, workloads,
                                        lambda w: {a: ("plan", "gpu", w, a, mode) for a in ALGORITHMS}):
            rows.append([
                w, any_row.get("label", ""), fmt(any_row.get("entries"), 0),
                fmt(get(results, keys["portable"], "us_per_call"), 2),
                fmt(get(results, keys["persistent"], "us_per_call"), 2),
                fmt(any_row.get("floor_us"), 2),
                fmt(get(results, keys["portable"], "pct_of_floor")),
                fmt(get(results, keys["persistent"], "pct_of_floor")),
                fmt(get(results, keys["portable"], "GB_per_s")),
                fmt(get(results, keys["persistent"], "GB_per_s")),
                " / ".join(fmt(get(results, keys[a], "graph_nodes_per_call"), 1) for a in ALGORITHMS)
                if mode == "graph" else "",
            ])
        header = ["workload", "regime", "entries", "µs portable", "µs persistent", "floor µs",
                  "% of floor portable", "% of floor persistent", "GB/s portable", "GB/s persistent"]
        if mode == "graph":
            header.append("graph nodes/call (portable / persistent)")
        else:
            rows = [r[:-1] for r in rows]
        if rows:
            out.append("### GPU: " + title + "\n\n" + table(header, rows))
    return out


def host_table(results, order):
    workloads = workloads_of("host", order)
    rows = []
    for w, (s, o), any_row in present(results, workloads, lambda w: [("plan", "host", w, b, None) for b in HOST_BACKENDS]):
        us_s, us_o = get(results, s, "us_per_call"), get(results, o, "us_per_call")
        ratio = us_s / us_o if us_s and us_o else None
        rows.append([
            w, any_row.get("label", ""), fmt(any_row.get("entries"), 0), fmt(us_s), fmt(us_o), fmt(ratio, 2),
            fmt(get(results, s, "floor_us")), fmt(get(results, o, "floor_us")),
            fmt(get(results, s, "pct_of_floor")), fmt(get(results, o, "pct_of_floor")),
            fmt(get(results, s, "GB_per_s"), 2), fmt(get(results, o, "GB_per_s"), 2),
        ])
    if not rows:
        return []
    header = ["workload", "regime", "entries", "µs serial", "µs openmp", "openmp speedup (µs serial / µs openmp)", "floor µs serial",
              "floor µs openmp", "% of floor serial", "% of floor openmp", "GB/s serial", "GB/s openmp"]
    return ["### Host backends (µs per call)\n\n" + table(header, rows)]


def times_faster(original, us):
    return fmt(original / us, 2) + "×" if original and us else "–"


def verify_tables(results, order):
    """verify and verify_kv: CUDA (graph, stream) and host tables, against max(copy, gather, launch) floors."""
    out = []
    workloads = workloads_of("gpu", order, ("verify", "verify_kv"))
    for mode, title in MODE_TITLES:
        rows = []
        for w, (one, kv), any_row in present(results, workloads,
                                             lambda w: [(st, "gpu", w, "portable", mode) for st in ("verify", "verify_kv")]):
            row = [w, any_row.get("label", ""), fmt(any_row.get("entries"), 0)]
            for key in (one, kv):
                row += [fmt(get(results, key, "us_per_call"), 2), fmt(get(results, key, "GB_per_s")),
                        fmt(get(results, key, "copy_floor_us"), 2), fmt(get(results, key, "gather_floor_us"), 2),
                        fmt(get(results, key, "pct_of_floor"))]
            if mode == "graph":
                original = ORIGINAL_VERIFY_US.get(w)
                row += [fmt(original, 2), times_faster(original, get(results, one, "us_per_call"))]
            rows.append(row)
        header = ["workload", "regime", "entries"]
        for what in ("K", "K+V"):
            header += ["µs " + what, "GB/s " + what, "copy floor µs " + what, "gather floor µs " + what,
                       "% of floor " + what]
        if mode == "graph":
            header += ["original µs (K)", "× faster than the original (K)"]
        if rows:
            out.append("### GPU verify: " + title + "\n\n" + table(header, rows))
    rows = []
    for w, keys, any_row in present(results, workloads_of("host", order, ("verify", "verify_kv")),
                                    lambda w: [(st, "host", w, b, None) for st in ("verify", "verify_kv") for b in HOST_BACKENDS]):
        row = [w, any_row.get("label", ""), fmt(any_row.get("entries"), 0)]
        row += [fmt(get(results, k, "us_per_call")) for k in keys]
        row += [fmt(get(results, k, "gather_floor_us")) for k in keys]
        row += [fmt(get(results, k, "pct_of_floor")) for k in keys]
        rows.append(row)
    if rows:
        names = ["%s %s" % ("K" if stage == "verify" else "K+V", b) for stage in ("verify", "verify_kv")
                 for b in HOST_BACKENDS]
        header = (["workload", "regime", "entries"] + ["µs " + n for n in names] +
                  ["gather floor µs " + n for n in names] + ["% of floor " + n for n in names])
        out.append("### Host verify (µs per call)\n\n" + table(header, rows))
    return out


def write_tables(results, order):
    """write: CUDA (graph, stream) and host tables, against max(copy, launch, longest request × chain step)."""
    out = []
    for mode, title in MODE_TITLES:
        rows = []
        for w in workloads_of("gpu", order, ("write",)):
            for algorithm in WRITE_ALGORITHMS:
                r = results.get(("write", "gpu", w, algorithm, mode))
                if r is None:
                    continue
                row = [w, algorithm, r.get("label", ""), fmt(r.get("tokens"), 0), fmt(r.get("longest_request"), 0),
                       fmt(r.get("us_per_call"), 2), fmt(r.get("GB_per_s")), fmt(r.get("chain_floor_us"), 2),
                       fmt(r.get("floor_us"), 2), fmt(r.get("pct_of_floor"))]
                if mode == "graph":
                    original = ORIGINAL_WRITE_US.get(w)
                    row += [fmt(original, 2), times_faster(original, r.get("us_per_call"))]
                rows.append(row)
        header = ["case", "algorithm", "regime", "tokens", "longest request", "µs", "GB/s", "chain floor µs",
                  "floor µs", "% of floor"]
        if mode == "graph":
            header += ["original µs", "× faster than the original"]
        if rows:
            out.append("### GPU write: " + title + "\n\n" + table(header, rows))
    rows = []
    for w, keys, r in present(results, workloads_of("host", order, ("write",)),
                              lambda w: [("write", "host", w, b, None) for b in HOST_BACKENDS]):
        row = [w, r.get("label", ""), fmt(r.get("tokens"), 0), fmt(r.get("longest_request"), 0)]
        row += [fmt(get(results, k, "us_per_call")) for k in keys]
        row += [fmt(get(results, k, "chain_floor_us")) for k in keys]
        row += [fmt(get(results, k, "pct_of_floor")) for k in keys]
        rows.append(row)
    if rows:
        header = (["case", "regime", "tokens", "longest request"] + ["µs " + b for b in HOST_BACKENDS] +
                  ["chain floor µs " + b for b in HOST_BACKENDS] + ["% of floor " + b for b in HOST_BACKENDS])
        out.append("### Host write (µs per call)\n\n" + table(header, rows))
    return out


def floors_section(floors):
    rows = [[b, fmt(f["copy_GB_per_s"], 1), fmt(f["launch_us"], 3), fmt(f["chain_ns_per_token"], 2),
             f["copy_method"], f["launch_method"], f["chain_method"], f["host"], f["date"]] for b, f in floors.items()]
    return "### Floors measured in the same runs\n\n" + table(
        ["backend", "copy GB/s", "launch µs", "write chain ns/token", "copy measured by", "launch measured by",
         "chain measured by", "host", "date"], rows)


def report(results, floors, errors, order):
    parts = ["## kvcanary plan performance",
             "floor = max(SPEC §7 bytes / measured copy bandwidth, one kernel launch); "
             "% of floor = 100 × floor / time (100 = at the floor). Medians.",
             floors_section(floors)]
    parts += gpu_tables(results, order)
    parts += host_table(results, order)
    canary = verify_tables(results, order) + write_tables(results, order)
    if canary:
        parts.append("## kvcanary verify and write performance\n\n"
                     "verify floor = max(bytes / copy bandwidth, the gather floor, one launch): bytes = 32 per entry "
                     "(plan) + 32 per entry and buffer (records; a window's predecessor once more); the gather floor "
                     "is a bare kernel with that traffic on the benchmark's own data (GPU-FLOORS.md: page-size-1 "
                     "random slots are bound by it). write floor = max(bytes / copy bandwidth, one launch, "
                     "longest request × one dependent mix3 step). % of floor = 100 × floor / time. Medians.")
        parts += canary
    if errors:
        parts.append("### Benchmarks that failed\n\n" + "\n".join("* " + e for e in errors))
    return "\n\n".join(parts) + "\n"


def plot(results, order, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("perf_report: matplotlib is not installed; skipping the plot %s" % path, file=sys.stderr)
        return False
    panels = []
    results = {k[1:]: v for k, v in results.items() if k[0] == "plan"}
    order = OrderedDict((k, v) for k, v in order.items() if k[0] == "plan")
    if any(k[0] == "gpu" for k in results):
        panels.append(("GPU (CUDA)", [((a, m), "%s / %s" % (a, m)) for m in MODES for a in ALGORITHMS], "gpu"))
    if any(k[0] == "host" for k in results):
        panels.append(("Host", [((b, None), b) for b in HOST_BACKENDS], "host"))
    if not panels:
        print("perf_report: nothing to plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5.5), squeeze=False)
    for ax, (title, series, kind) in zip(axes[0], panels):
        workloads = workloads_of(kind, order)
        for (a, b), label in series:
            points = sorted((results[(kind, w, a, b)]["entries"], results[(kind, w, a, b)]["us_per_call"])
                            for w in workloads if (kind, w, a, b) in results)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], "o", alpha=0.8, label=label)
        # The floor of each workload (per backend on the host: their copy bandwidths differ).
        floor_series = [(None, "floor")] if kind == "gpu" else [(b, "floor " + b) for b in HOST_BACKENDS]
        for backend, label in floor_series:
            points = []
            for w in workloads:
                rows = [results[k] for k in results if k[0] == kind and k[1] == w and (backend is None or k[2] == backend)]
                if rows:
                    points.append((rows[0]["entries"], rows[0]["floor_us"]))
            if points:
                points.sort()
                ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none", color="black" if backend != "openmp" else "gray",
                        marker="x", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("verify entries")
        ax.set_ylabel("µs per plan() call")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("perf_report: wrote %s" % path, file=sys.stderr)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="Google Benchmark JSON files (--benchmark_out_format=json)")
    parser.add_argument("-o", "--output", help="write the markdown here instead of stdout")
    parser.add_argument("--plot", help="write a PNG plot (µs vs entries, log-log) here")
    args = parser.parse_args()

    results, floors, errors, order = load(args.json)
    text = report(results, floors, errors, order)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print("perf_report: wrote %s" % args.output, file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.plot:
        plot(results, order, args.plot)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
