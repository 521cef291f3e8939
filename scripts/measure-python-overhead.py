#!/usr/bin/env python3
"""measure-python-overhead.py — the host overhead of kvcanary's Python calls against the same C++ calls.

    build-py/venv/bin/python scripts/measure-python-overhead.py [--rounds N] [--calls N]

Run it with the check-python venv after scripts/check-python.sh (it reuses that build: build/py-*/ and its
Kokkos). The same tiny step on Kokkos::Serial (one decode token of one request over a 2-token prefix) is
timed in C++ (scripts/measure-python-overhead.cpp, compiled here against the same libkvcanary.a and Kokkos)
and from Python with numpy arrays and, when torch imports, torch CPU tensors: plan / verify / write of one
buffer with bound plan objects, the same with the bound objects made afresh every call, the import of one
array argument, and kvcanary.Canary's passes and step. Every number is the median over --rounds rounds of
the mean of --calls back-to-back calls, in microseconds. Prints a Markdown table (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import kvcanary as kc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_us(rounds: int, calls: int, f) -> float:
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(calls):
            f()
        per_call.append((time.perf_counter_ns() - start) / 1000 / calls)
    return statistics.median(per_call)


def cpp_numbers(rounds: int, calls: int) -> dict:
    builds = sorted(glob.glob(os.path.join(ROOT, "build", "py-*")))
    if not builds:
        sys.exit("measure-python-overhead: no build/py-*/ (run scripts/check-python.sh first)")
    build = builds[-1]
    cache = open(os.path.join(build, "CMakeCache.txt")).read()
    kokkos_dir = re.search(r"^Kokkos_DIR:PATH=(.*)$", cache, re.M).group(1)
    prefix = os.path.abspath(os.path.join(kokkos_dir, "..", "..", ".."))
    exe = os.path.join(build, "measure-python-overhead")
    source = os.path.join(ROOT, "scripts", "measure-python-overhead.cpp")
    subprocess.run(["g++", "-O3", "-DNDEBUG", "-std=c++17", "-fopenmp", "-I" + os.path.join(ROOT, "include"),
                    "-I" + os.path.join(build, "include"), "-isystem", os.path.join(prefix, "include"), source,
                    "-o", exe, os.path.join(build, "libkvcanary.a"), os.path.join(prefix, "lib", "libkokkoscore.a"),
                    "-ldl"], check=True)
    out = subprocess.run([exe, str(rounds), str(calls), "--kokkos-disable-warnings"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def python_numbers(rounds: int, calls: int, lib) -> dict:
    """The same step with arrays made by `lib` (numpy or torch)."""
    if lib is np:
        i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
        table = (8 * np.arange(2)[:, None] + np.arange(8)[None, :]).astype(np.int32)
        flag = np.ones(1, np.int32)
    else:
        i64 = lambda x: lib.tensor(x, dtype=lib.int64)  # noqa: E731
        table = (8 * lib.arange(2)[:, None] + lib.arange(8)[None, :]).to(lib.int32)
        flag = lib.ones(1, dtype=lib.int32)
    library = "numpy" if lib is np else "torch"
    vp = kc.VerifyPlan.allocate(48, library=library)
    wp = kc.WritePlan.allocate(2, library=library)
    st, ws = kc.PlanStatus.allocate(library=library), kc.PlanWorkspace.allocate(2, library=library)
    k, ring = kc.CanaryBuffer.allocate(16, library=library), kc.ViolationRing.allocate(64, library=library)
    rows = i64([1])
    kc.plan(req_pool_indices=rows, prefix_lens=i64([0]), extend_seq_lens=i64([2]), req_to_token=table,
            verify_plan=vp, write_plan=wp, status=st, workspace=ws, backend="serial")
    kc.write(write_plan=wp, input_ids=i64([7, 8]), positions=i64([0, 1]), out_cache_loc=i64([8, 9]), buffer=k,
             ring=ring, chain_position_assert=flag, backend="serial")
    prefix, extend, ids, pos, loc = i64([2]), i64([1]), i64([9]), i64([2]), i64([10])

    def plan(vp=vp, wp=wp, st=st, ws=ws):
        kc.plan(req_pool_indices=rows, prefix_lens=prefix, extend_seq_lens=extend, req_to_token=table,
                verify_plan=vp, write_plan=wp, status=st, workspace=ws, backend="serial")

    def plan_fresh():  # the bound objects made from their arrays again, every call
        plan(kc.VerifyPlan(verify_slot_indices=vp.verify_slot_indices, verify_expected_tokens=vp.verify_expected_tokens,
                           verify_expected_positions=vp.verify_expected_positions,
                           verify_prev_slot_indices=vp.verify_prev_slot_indices,
                           verify_num_valid=vp.verify_num_valid, enable=vp.enable),
             kc.WritePlan(write_offsets=wp.write_offsets, write_seed_slot_indices=wp.write_seed_slot_indices,
                          write_num_valid_reqs=wp.write_num_valid_reqs),
             kc.PlanStatus(input_error_bits=st.input_error_bits, first_bad_row=st.first_bad_row),
             kc.PlanWorkspace(verify_offsets=ws.verify_offsets))

    def verify():
        kc.verify(verify_plan=vp, buffer=k, ring=ring, backend="serial")

    def write():
        kc.write(write_plan=wp, input_ids=ids, positions=pos, out_cache_loc=loc, buffer=k, ring=ring,
                 chain_position_assert=flag, backend="serial")

    n = {}
    n["plan"] = median_us(rounds, calls, plan)
    n["plan, bound objects made afresh"] = median_us(rounds, calls, plan_fresh)
    n["verify"] = median_us(rounds, calls, verify)
    n["write"] = median_us(rounds, calls, write)
    three = median_us(rounds, calls, lambda: kc.ForwardTokens(input_ids=ids, positions=pos, out_cache_loc=loc))
    expected_ids, expected_pos = i64([9]), i64([2])  # distinct objects: each one imported on its own
    five = median_us(rounds, calls, lambda: kc.ForwardTokens(input_ids=ids, positions=pos, out_cache_loc=loc,
                                                             expected_input_ids=expected_ids,
                                                             expected_positions=expected_pos))
    n["one array argument (import + checks)"] = (five - three) / 2

    canary = kc.Canary(req_to_token=table, backend="serial", report_mode="raise", health_check_every_n_steps=0,
                       dimensions=kc.EngineDimensions(pool_slots=16, max_running_requests=2, max_context_len=8))
    prefill = kc.ForwardBatch(req_pool_indices=rows, prefix_lens=i64([0]), extend_seq_lens=i64([2]),
                              tokens=kc.ForwardTokens(input_ids=i64([7, 8]), positions=i64([0, 1]),
                                                      out_cache_loc=i64([8, 9])))
    batch = kc.ForwardBatch(req_pool_indices=rows, prefix_lens=prefix, extend_seq_lens=extend,
                            tokens=kc.ForwardTokens(input_ids=ids, positions=pos, out_cache_loc=loc))
    canary.before_forward(prefill)
    canary.end_step()

    def step():
        canary.before_forward(batch)
        canary.after_forward(batch)
        canary.end_step()

    def fresh_step():  # an eager engine: the batch's arrays change every step
        b = kc.ForwardBatch(req_pool_indices=rows, prefix_lens=prefix, extend_seq_lens=extend,
                            tokens=kc.ForwardTokens(input_ids=ids, positions=pos, out_cache_loc=loc))
        canary.before_forward(b)
        canary.after_forward(b)
        canary.end_step()

    n["canary.before_forward"] = median_us(rounds, calls, lambda: canary.before_forward(batch))
    n["canary.after_forward"] = median_us(rounds, calls, lambda: canary.after_forward(batch))
    n["canary.end_step"] = median_us(rounds, calls, lambda: canary.end_step(0))
    n["canary.step"] = median_us(rounds, calls, step)
    n["canary.step, batch made afresh"] = median_us(rounds, calls, fresh_step)
    canary.flush()  # raises on a violation: the timed steps were clean
    return n


ARGS = {"plan": 4, "plan, bound objects made afresh": 16, "verify": 0, "write": 4, "canary.before_forward": 0,
        "canary.after_forward": 0, "canary.end_step": 0, "canary.step": 0, "canary.step, batch made afresh": 6}
CPP = {"plan, bound objects made afresh": "plan", "canary.step, batch made afresh": "canary.step"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cpp = cpp_numbers(args.rounds, args.calls)
    columns = {"numpy": python_numbers(args.rounds, args.calls, np)}
    try:
        import torch

        columns["torch CPU"] = python_numbers(args.rounds, args.calls, torch)
    except ImportError:
        print("(torch does not import: numpy only)", file=sys.stderr)
    names = list(columns["numpy"])
    head = "| call | array args | C++ µs | " + " | ".join(f"Python {c} µs (overhead)" for c in columns) + " |"
    print(head)
    print("|" + "---|" * (3 + len(columns)))
    for name in names:
        base = cpp.get(CPP.get(name, name))
        cells = []
        for c in columns:
            value = columns[c][name]
            cells.append(f"{value:.2f}" if base is None else f"{value:.2f} (+{value - base:.2f})")
        args_cell = "" if name not in ARGS else str(ARGS[name])
        print(f"| {name} | {args_cell} | {'' if base is None else f'{base:.2f}'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
