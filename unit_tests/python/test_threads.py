"""kvcanary called from several Python threads and forked processes (docs/python.md, "Threads and
forks"): an engine's worker thread (HF transformers runs continuous batching in one) gets the same results
as the thread that started kvcanary; host calls from many threads at once are each right (they run one at
a time: Kokkos 3.4's host backends keep process-wide scratch; a race there is too rare to catch from
Python, so the lock is argued, not shown); OpenMP, which Kokkos 3.4 ties to the thread that started it, is
refused by name elsewhere instead of failing inside Kokkos; a process forked after kvcanary started
(engines fork workers) runs its host calls on Serial and exits without waiting for threads the fork did
not copy. Each test runs in a fresh interpreter, so that which thread started kvcanary is known."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import kvcanary as kc

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif("openmp" not in kc.backends() or "serial" not in kc.backends(),
                                reason="needs a build with the serial and OpenMP host backends")

PRELUDE = """
import threading
import numpy as np
import kvcanary as kc
import test_canary as tc
from test_api import bound_plan, good_plan_args

def on_worker(f):
    box = {}
    def run():
        try:
            box["value"] = f()
        except Exception as e:  # noqa: BLE001 - the test looks at it
            box["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")

def planned(rows, prefix, backend=None):
    vp, wp, st, ws = bound_plan(64, 4)
    kc.plan(**good_plan_args(req_pool_indices=np.array(rows, np.int64), prefix_lens=np.array(prefix, np.int64),
                             extend_seq_lens=np.ones(len(rows), np.int64), verify_plan=vp, write_plan=wp,
                             status=st, workspace=ws, backend=backend))
    n = int(vp.verify_num_valid[0])
    return vp.verify_slot_indices[:n].tolist(), wp.write_seed_slot_indices[:len(rows)].tolist()
"""


def run_fresh(body: str) -> str:
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="2")
    result = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], cwd=HERE, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_a_worker_thread_gets_the_starting_threads_results_and_openmp_is_refused_by_name():
    out = run_fresh("""
        main = planned([1, 2, 3], [3, 5, 2])                 # starts kvcanary on this thread (OpenMP)
        assert main == planned([1, 2, 3], [3, 5, 2], "openmp")
        assert on_worker(lambda: planned([1, 2, 3], [3, 5, 2])) == main           # None: serial there
        assert on_worker(lambda: planned([1, 2, 3], [3, 5, 2], "serial")) == main
        try:
            on_worker(lambda: planned([1, 2, 3], [3, 5, 2], "openmp"))
        except ValueError as e:
            print("refused:", e)
        assert planned([1, 2, 3], [3, 5, 2], "openmp") == main                    # this thread still can
    """)
    assert "refused: kvcanary: backend 'openmp' runs on OpenMP, which only the thread that started" in out
    assert "backend='serial' (backend=None picks serial where OpenMP cannot run)" in out


def test_a_worker_that_starts_kvcanary_leaves_the_main_thread_a_working_default():
    run_fresh("""
        first = on_worker(lambda: planned([2], [4]))          # the worker starts kvcanary, then ends
        assert planned([2], [4]) == first and first[0] == [16, 17, 18, 19]
    """)


def test_many_threads_at_once_each_get_their_own_right_answer():
    run_fresh("""
        expected = {(r, p): planned([r], [p], "serial") for r in (1, 2, 3) for p in (1, 4, 7)}
        wrong = []
        def hammer(seed, backend):
            for n in range(150):
                key = ((seed + n) % 3 + 1, (1, 4, 7)[(seed * 7 + n) % 3])
                if planned([key[0]], [key[1]], backend) != expected[key]:
                    wrong.append((seed, n))
        threads = [threading.Thread(target=hammer, args=(s, b)) for s in range(3) for b in (None, "serial")]
        for t in threads: t.start()
        hammer(9, None)                                       # and the starting thread, on OpenMP
        for t in threads: t.join()
        assert not wrong, wrong[:5]
    """)


def test_a_canary_runs_from_a_worker_on_serial_and_an_openmp_canary_says_why_not():
    out = run_fresh("""
        table = tc.req_to_token()
        def steps(canary):
            rows = []
            for step in tc.STEPS:
                canary.before_forward(tc.forward_batch(table, step))
                rows += canary.end_step().rows
            return rows + canary.flush().rows, canary.steps
        serial = kc.Canary(req_to_token=table, backend="serial", report_mode="none", dimensions=tc.dims())
        assert on_worker(lambda: steps(serial)) == ([], 3)
        built_on_worker = on_worker(lambda: kc.Canary(req_to_token=table, report_mode="none", dimensions=tc.dims()))
        assert on_worker(lambda: steps(built_on_worker)) == ([], 3)    # None on a worker: serial
        openmp = kc.Canary(req_to_token=table, report_mode="none", dimensions=tc.dims())
        try:
            on_worker(lambda: steps(openmp))
        except ValueError as e:
            print("refused:", e)
        assert steps(openmp) == ([], 3)
    """)
    assert "refused: kvcanary.Canary: this Canary runs on OpenMP" in out
    assert "build it with backend='serial' to drive it from any thread or process" in out


def test_a_serial_canary_runs_from_a_worker_on_every_pump_route():
    # The mailbox routes' host buffers were zeroed by a Kokkos fill on the default host space, which OpenMP refuses
    # on a thread other than the one that started it: a RuntimeError on a worker until 2026-12-07.
    out = run_fresh("""
        planned([1, 2, 3], [3, 5, 2])                        # starts kvcanary on this thread (OpenMP)
        table = tc.req_to_token()
        def steps(route):
            canary = kc.Canary(req_to_token=table, backend="serial", report_mode="none", dimensions=tc.dims(),
                               pump_snapshot=route)
            rows = []
            for step in tc.STEPS:
                canary.before_forward(tc.forward_batch(table, step))
                rows += canary.end_step().rows
            return rows + canary.flush().rows, canary.steps
        for route in ("side-stream-copies", "kernel", "in-graph", "beside-forward", "with-next-plan"):
            assert on_worker(lambda: steps(route)) == ([], 3), route
            print("ran on a worker:", route)
    """)
    assert out.count("ran on a worker:") == 5, out


def test_a_child_forked_after_kvcanary_started_runs_on_serial_and_exits():
    # Before: the child's first OpenMP launch, and its exit (Kokkos::finalize), waited forever for the
    # parent's OpenMP threads, which a fork does not copy; and so did the parent, waiting for the child.
    out = run_fresh("""
        import os, sys
        main = planned([1, 2, 3], [3, 5, 2])                   # the parent starts kvcanary (OpenMP)
        table = tc.req_to_token()
        parents = kc.Canary(req_to_token=table, report_mode="none", dimensions=tc.dims())   # on OpenMP
        pid = os.fork()
        if pid == 0:
            assert planned([1, 2, 3], [3, 5, 2]) == main       # None: serial in the child
            try:
                planned([1, 2, 3], [3, 5, 2], "openmp")
            except ValueError as e:
                print("refused:", e, flush=True)
            try:
                parents.before_forward(tc.forward_batch(table, tc.STEPS[0]))
            except ValueError as e:
                print("canary refused:", e, flush=True)
            own = kc.Canary(req_to_token=table, report_mode="none", dimensions=tc.dims())    # serial here
            own.before_forward(tc.forward_batch(table, tc.STEPS[0]))
            assert own.flush().rows == []
            sys.exit(0)                                         # atexit: kvcanary.finalize() in the child
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert planned([1, 2, 3], [3, 5, 2], "openmp") == main  # the parent is unharmed
        parents.before_forward(tc.forward_batch(table, tc.STEPS[0]))
        print("parent ok", flush=True)
    """)
    assert "refused: kvcanary: backend 'openmp' runs on OpenMP, whose threads did not survive the fork" in out
    assert "canary refused: kvcanary.Canary: this Canary runs on OpenMP, whose threads did not survive" in out
    assert "parent ok" in out
