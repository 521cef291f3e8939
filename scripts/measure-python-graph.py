#!/usr/bin/env python3
"""measure-python-graph.py — kvcanary from Python in a torch.cuda.graph against the C++ perf_tests' graphs.

    python3 scripts/measure-python-graph.py [--cpp-json PERF] [--workloads decode_bs1,decode_bs64|all]
    python3 scripts/measure-python-graph.py --device cpu     # eager dry run of the same code on torch CPU

On the device (torch with CUDA, the package built with CUDA Kokkos: scripts/gpu-check.sh python), after
`scripts/gpu-check.sh perf` so that PERF is that run's $REPORT_DIR/perf_cuda.json (default
build-gpu/report/; Google Benchmark JSON; its console log works too, with counters rounded to 5 digits). Per SPEC §7 workload, on CUDA torch tensors:
  verify_kv  kvcanary.verify of the K and V buffers in one call, algorithm 'portable'
             (C++: verify_kv/<workload>/portable/graph, perf_tests/perf_verify.hpp)
  step       kvcanary.Canary.before_forward = plan + head verify (K, V) + head write (K, V)
             (C++: step/<workload>/graph, perf_tests/perf_step.hpp)
timed as the C++ graphs are (perf_timing.hpp): 20 calls captured in one graph after a warm-up call on the
capture stream, 10 replays per trial (200 calls), median µs per call of 7 trials. The data: the C++
generator (perf_tests/workloads.hpp + canary_workloads.hpp) cannot be called from Python, so its shapes are
redrawn here with numpy (batch size, uniform prefix and extend ranges, pool rows a permutation, page table
and expected-token pool as large as max_reqs x max_seq_len, every used cell a distinct random slot in
[1, cells), the prefixes stamped by kvcanary.write from seed -1). With --cpp-json the prefix lengths are
nudged to the C++ run's entry count, so entries and bytes are equal and printed on both sides.
Checked before timing: the plan is clean and full, the eager verify reports nothing and counts 2 x entries
slots, a corrupted record is reported, the first graph replay is clean. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import kvcanary as kc

K = 1024
# perf_tests/workloads.hpp workload_shapes(), those without a sliding window:
#   name: (batch size, prefix min, prefix max, extend min, extend max, expected-token pool)
SHAPES = {
    "decode_bs1": (1, 1 * K, 1 * K, 1, 1, True),
    "decode_bs8": (8, 2 * K, 6 * K, 1, 1, True),
    "decode_bs64": (64, 512, 8 * K, 1, 1, True),
    "decode_bs256": (256, 4 * K, 32 * K, 1, 1, True),
    "long_context_bs4": (4, 128 * K, 128 * K, 1, 1, True),
    "prefill_bs32": (32, 0, 2 * K, 128, 2 * K, True),
    "decode_bs4096": (4096, 1, 256, 1, 1, True),
    "decode_bs64_nopool": (64, 512, 8 * K, 1, 1, False),
}
VOCAB = 151936
CALLS, REPLAYS, TRIALS = 20, 10, 7  # perf_timing.hpp: kCudaGraphCalls, kCudaGraphReplays; trials as its floors


def fit_total(lens: np.ndarray, lo: int, hi: int, total: int) -> np.ndarray:
    """`lens` moved, evenly and within [lo, hi], until they sum to `total`."""
    lens = lens.copy()
    while (diff := total - int(lens.sum())) != 0:
        room = (hi - lens) if diff > 0 else (lens - lo)
        movable = np.flatnonzero(room > 0)
        if movable.size == 0:
            sys.exit(f"measure-python-graph: {total} entries do not fit {lens.size} rows of [{lo}, {hi}]")
        step = np.minimum(room[movable], max(1, abs(diff) // movable.size))[: abs(diff)]
        lens[movable[: step.size]] += np.sign(diff) * step
    return lens


def build(name: str, seed: int, entries=None) -> dict:
    """A SPEC §7 workload with distinct slots, on the host (numpy)."""
    bs, pmin, pmax, emin, emax, pool = SHAPES[name]
    rng = np.random.default_rng(seed)
    max_reqs, max_seq = bs + 1, pmax + emax
    cells = max_reqs * max_seq
    rows = rng.permutation(bs).astype(np.int64) + 1  # row 0 is the padding row's
    prefix = rng.integers(pmin, pmax + 1, bs, dtype=np.int64)
    extend = rng.integers(emin, emax + 1, bs, dtype=np.int64)
    if entries is not None:
        prefix = fit_total(prefix, pmin, pmax, int(entries))
    table = rng.integers(0, cells, (max_reqs, max_seq), dtype=np.int32)
    used = prefix + extend  # every used cell a distinct slot of [1, cells): slot 0 is never verified
    cell_rows = np.repeat(rows, used)
    cell_pos = np.arange(int(used.sum())) - np.repeat(np.cumsum(used) - used, used)
    table[cell_rows, cell_pos] = rng.choice(cells - 1, int(used.sum()), replace=False).astype(np.int32) + 1
    tokens = rng.integers(0, VOCAB, (max_reqs, max_seq), dtype=np.int32) if pool else None

    def cells_of(first, last):  # each row's positions [first, last): pool rows, positions, slots, tokens
        n = last - first
        r, p = np.repeat(rows, n), np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(first, n)
        ids = tokens[r, p].astype(np.int64) if pool else (p * 7919 + r) % VOCAB
        return p, table[r, p].astype(np.int64), ids

    return dict(name=name, bs=bs, rows=rows, prefix=prefix, extend=extend, table=table, tokens=tokens,
                valid=prefix + extend if pool else None, entries=int(prefix.sum()), slots=min(cells, 2**31 - 1),
                max_reqs=max_reqs, max_seq=max_seq, stamp=cells_of(np.zeros(bs, np.int64), prefix),
                step=cells_of(prefix, prefix + extend))


class Bench:
    def __init__(self, device: torch.device):
        self.device, self.cuda = device, device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None

    def t(self, a):
        return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def stamped_buffers(self, w: dict):
        """K and V records as an engine's writes of every prefix leave them (canary_workloads.hpp)."""
        k = kc.CanaryBuffer.allocate(w["slots"], device=self.device)
        ring = kc.ViolationRing.allocate(16, device=self.device)
        pos, loc, ids = (self.t(a) for a in w["stamp"])
        plan = kc.WritePlan(write_offsets=self.t(np.concatenate([[0], np.cumsum(w["prefix"])])),
                            write_seed_slot_indices=self.t(np.full(w["bs"], -1, np.int64)),
                            write_num_valid_reqs=self.t(np.array([w["bs"]], np.int32)))
        kc.write(write_plan=plan, input_ids=ids, positions=pos, out_cache_loc=loc, buffer=k, ring=ring,
                 chain_position_assert=self.t(np.zeros(1, np.int32)))
        self.sync()
        expect(kc.read_report(ring).count == 0, w, "stamping the prefixes reported a violation")
        return k.records, k.records.clone()

    def time_calls(self, w: dict, call, check, calls: int, replays: int, trials: int) -> float:
        """µs per call: a torch.cuda.graph of `calls` calls replayed `replays` times per trial, median of
        `trials` (a first trial warms the graph); on the host, eager calls timed the same way.
        check(when, calls) checks the results of the `calls` calls made since the last check."""
        self.sync()  # the setup's copies and in-place fixes, made on the default stream, are done
        if not self.cuda:
            run = lambda: [call() for _ in range(calls * replays)]  # noqa: E731
        else:
            with torch.cuda.stream(self.stream):
                call()  # the warm-up on the capture stream
            self.stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=self.stream):
                for _ in range(calls):
                    call()
            with torch.cuda.stream(self.stream):
                graph.replay()
            self.stream.synchronize()
            check("first graph replay", 1 + calls)

            def run():
                with torch.cuda.stream(self.stream):
                    for _ in range(replays):
                        graph.replay()
        times = []
        for trial in range(trials + 1):
            self.sync()
            start = time.perf_counter()
            run()
            self.sync()
            if trial:
                times.append((time.perf_counter() - start) / (calls * replays))
        check("after the timed calls", (trials + 1) * calls * replays)
        return 1e6 * statistics.median(times)

    def verify_kv(self, w: dict, k, v, **timing) -> float:
        t, dev = self.t, self.device
        vp, wp = kc.VerifyPlan.allocate(w["entries"], device=dev), kc.WritePlan.allocate(w["bs"], device=dev)
        status = kc.PlanStatus.allocate(device=dev)
        kc.plan(req_pool_indices=t(w["rows"]), prefix_lens=t(w["prefix"]), extend_seq_lens=t(w["extend"]),
                req_to_token=t(w["table"]), verify_plan=vp, write_plan=wp, status=status,
                workspace=kc.PlanWorkspace.allocate(w["bs"], device=dev), req_to_verify_expected_tokens=t(w["tokens"]),
                req_to_verify_expected_tokens_valid_lens=t(w["valid"]))
        self.sync()
        expect(int(status.input_error_bits[0]) == 0 and int(vp.enable[0]) == 1
               and int(vp.verify_num_valid[0]) == w["entries"], w, "the plan is not clean and full")
        kinds = [kc.KernelKind.HEAD_K_FULL, kc.KernelKind.HEAD_V_FULL]
        buffers = [kc.CanaryBuffer(k), kc.CanaryBuffer(v)]  # bound once, as an engine does

        def verify(ring):
            kc.verify(verify_plan=vp, buffer=buffers, kernel_kind=kinds, ring=ring, algorithm="portable")

        ring = kc.ViolationRing.allocate(1024, device=dev)
        seen = [0, 0]  # kernel and slot runs so far

        def check(when, calls):
            self.sync()
            r = kc.read_report(ring)
            want = [seen[0] + 2 * calls, seen[1] + 2 * w["entries"] * calls]
            expect(r.count == 0 and [r.kernel_run_counter, r.slot_run_counter] == want, w,
                   f"{when}: {r.count} violations, runs {r.kernel_run_counter}/{r.slot_run_counter}, want 0, {want}")
            seen[:] = want

        verify(ring)
        check("eager verify", 1)
        slot = int(vp.verify_slot_indices[w["entries"] // 2])  # the C++ check: one corrupted record is seen
        v.view(torch.int64)[slot, 1] += 1
        bad = kc.ViolationRing.allocate(64, device=dev)
        verify(bad)
        self.sync()
        expect(kc.read_report(bad).count >= 1, w, f"a corrupted record (slot {slot}) went unreported")
        v.view(torch.int64)[slot, 1] -= 1
        return self.time_calls(w, lambda: verify(ring), check, **timing)

    def step(self, w: dict, k, v, **timing) -> float:
        t, pool = self.t, w["tokens"] is not None
        canary = kc.Canary(req_to_token=t(w["table"]), req_to_verify_expected_tokens=t(w["tokens"]),
                           target=kc.GroupArrays(k=k, v=v), stream=self.stream, report_mode="none",
                           health_check_every_n_steps=0, verify_token_assert=pool,
                           dimensions=kc.EngineDimensions(pool_slots=w["slots"], max_running_requests=w["max_reqs"],
                                                          max_context_len=w["max_seq"]),
                           capacities=kc.Capacities(verify_capacity=w["entries"], write_req_capacity=w["bs"]))
        pos, loc, ids = (t(a) for a in w["step"])
        batch = kc.ForwardBatch(req_pool_indices=t(w["rows"]), prefix_lens=t(w["prefix"]),
                                extend_seq_lens=t(w["extend"]), expected_tokens_valid_lens=t(w["valid"]),
                                tokens=kc.ForwardTokens(input_ids=ids, positions=pos, out_cache_loc=loc))

        def check(when, calls=1):
            self.sync()
            r = canary.flush()
            expect(r.count == 0 and not r.warnings and not r.health_errors, w,
                   f"{when}: {r.count} violations {r.lines[:1]} {r.warnings[:1]} {r.health_errors[:1]}")

        self.sync()
        with torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext():
            canary.before_forward(batch)
        check("eager step")
        return self.time_calls(w, lambda: canary.before_forward(batch), check, **timing)


def expect(ok: bool, w: dict, what: str) -> None:
    if not ok:
        sys.exit(f"measure-python-graph: {w['name']}: {what}")


def cpp_numbers(path: str) -> dict:
    """{'verify_kv/<w>/portable/graph' or 'step/<w>/graph': counters} from Google Benchmark JSON or console
    text; the median aggregate where the run has repetitions."""
    text, found = open(path).read(), {}
    try:
        rows = [(b["name"], b) for b in json.loads(text)["benchmarks"]]
    except ValueError:
        scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}
        rows = [(line.split()[0], {c: float(x) * scale[s] for c, x, s in
                                   re.findall(r"(\w+)=([-\d.]+)([kMG]?)\b", line)})
                for line in text.splitlines() if re.match(r"(verify_kv|step)/\S+\s", line)]
    for name, counters in rows:
        name = re.sub(r"/manual_time", "", name)
        if re.search(r"_(mean|stddev|cv)$", name):
            continue
        found[re.sub(r"_median$", "", name)] = counters
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda[:N] (default) or cpu: an eager dry run")
    parser.add_argument("--workloads", default="decode_bs1,decode_bs8,decode_bs64,decode_bs4096",
                        help="comma-separated SPEC §7 names, or all: " + ", ".join(SHAPES))
    parser.add_argument("--cpp-json", help="the C++ perf run (JSON or console text) to compare with")
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument("--calls", type=int, default=CALLS, help="calls captured in one graph (C++: 20)")
    parser.add_argument("--replays", type=int, default=REPLAYS, help="graph replays per trial (C++: 10)")
    parser.add_argument("--trials", type=int, default=TRIALS)
    args = parser.parse_args()
    device = torch.device(args.device)
    names = list(SHAPES) if args.workloads == "all" else args.workloads.split(",")
    if unknown := [n for n in names if n not in SHAPES]:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    cpp = cpp_numbers(args.cpp_json) if args.cpp_json else {}
    timing = dict(calls=args.calls, replays=args.replays, trials=args.trials) if device.type == "cuda" else \
        dict(calls=2, replays=1, trials=1)  # the dry run: every check, a few eager calls
    bench = Bench(device)
    # KVCANARY_COMMIT first, as gpu-check.sh: a copied tree may carry a stale .git of its own
    commit = os.environ.get("KVCANARY_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    where = torch.cuda.get_device_name(device) if bench.cuda else "cpu (eager dry run: not comparable)"
    print(f"kvcanary Python {'graph' if bench.cuda else 'eager'} timing, {time.strftime('%Y-%m-%d')}, commit "
          f"{commit or '?'}, {where}, torch {torch.__version__}; {timing['calls']} calls per graph, "
          f"{timing['replays']} replays per trial, median of {timing['trials']} trials\n")
    print(f"| stage / workload | entries | bytes | Python {'graph' if bench.cuda else 'eager'} µs per call "
          "| C++ graph µs per call | Python / C++ |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, name in enumerate(names):
        keys = (f"verify_kv/{name}/portable/graph", f"step/{name}/graph")
        cpp_entries = cpp.get(keys[0], {}).get("entries") or (cpp.get(keys[1], {}).get("bytes", 0) / 96 or None)
        w = build(name, args.seed + i, None if cpp_entries is None else round(cpp_entries))
        k, v = bench.stamped_buffers(w)
        results = (bench.verify_kv(w, k, v, **timing), bench.step(w, k.clone(), v.clone(), **timing))
        for key, us in zip(keys, results):
            other = cpp.get(key, {})
            cpp_us = other.get("us_per_call") or other.get("real_time")
            cpp_cell = "" if cpp_us is None else f"{cpp_us:.2f}"
            if other.get("entries") not in (None, w["entries"]):
                cpp_cell += f" ({other['entries']:.0f} entries)"
            ratio = "" if cpp_us is None else f"{us / cpp_us:.2f}"
            print(f"| {key} | {w['entries']} | {96 * w['entries']} | {us:.2f} | {cpp_cell} | {ratio} |")
        del k, v
    print("\nbytes: the C++ counter of both stages, 96 per entry (one 32-byte plan entry read, the K and V "
          "records gathered; GPU-FLOORS.md)")


if __name__ == "__main__":
    main()
