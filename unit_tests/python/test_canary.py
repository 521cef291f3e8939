"""kvcanary.Canary (docs/python.md, "The runtime") on the host backends: the same steps through the Canary
and through kvcanary.plan / verify / write give the same records and ring rows; the config mirrors the C++
one; report modes, sinks and the health check; every bad input raises TypeError / ValueError naming it."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kvcanary as kc
from conftest import host_backends

BACKENDS = host_backends()
POOL, REQS, CTX = 64, 4, 16
# (pool rows, prefix lengths, extend lengths) of three forwards: prefill, decode, decode + a new request
# (pool row 0 is the engine's padding row).
STEPS = [([1, 2], [0, 0], [3, 2]), ([1, 2], [3, 2], [1, 1]), ([1, 2, 3], [4, 3, 0], [1, 1, 4])]


def req_to_token():
    return (CTX * np.arange(REQS)[:, None] + np.arange(CTX)[None, :]).astype(np.int32)


def step_arrays(table, rows, prefix, extend):
    """The batch of one forward: int64 arrays of the plan's batch and of the step's tokens."""
    ids, pos, loc = [], [], []
    for r, p, e in zip(rows, prefix, extend):
        for q in range(p, p + e):
            ids.append(100 * r + q + 7)
            pos.append(q)
            loc.append(table[r, q])
    i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return dict(req_pool_indices=i64(rows), prefix_lens=i64(prefix), extend_seq_lens=i64(extend)), \
        dict(input_ids=i64(ids), positions=i64(pos), out_cache_loc=i64(loc))


def forward_batch(table, step, swa=False, draft=False):
    batch, tokens = step_arrays(table, *step)
    extra = {}
    if swa:
        extra["swa_tokens"] = kc.ForwardTokens(**tokens)  # an identity full -> SWA mapping
    if draft:
        extra["draft_tokens"] = kc.ForwardTokens(**tokens)
    return kc.ForwardBatch(**batch, tokens=kc.ForwardTokens(**tokens), **extra)


def dims():
    return kc.EngineDimensions(pool_slots=POOL, max_running_requests=REQS, max_context_len=CTX)


def corrupt(records, slot):
    records.view(np.int64)[slot, 0] += 1  # the record's token


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_canary_equals_the_same_steps_through_plan_verify_write(backend):
    table = req_to_token()
    k_rec, v_rec = np.zeros((POOL, 32), np.uint8), np.zeros((POOL, 32), np.uint8)
    canary = kc.Canary(req_to_token=table, target=kc.GroupArrays(k=k_rec, v=v_rec), backend=backend,
                       report_mode="none", dimensions=dims())
    assert canary.capacities == kc.Capacities(3 * POOL, REQS, REQS) and canary.groups == ("target",)

    vp, wp = kc.VerifyPlan.allocate(3 * POOL), kc.WritePlan.allocate(REQS)
    st, ws = kc.PlanStatus.allocate(), kc.PlanWorkspace.allocate(REQS)
    k, v, ring = kc.CanaryBuffer.allocate(POOL), kc.CanaryBuffer.allocate(POOL), kc.ViolationRing.allocate(1024)
    kinds = [kc.KernelKind.HEAD_K_FULL, kc.KernelKind.HEAD_V_FULL]
    flag = np.ones(1, np.int32)
    rows, lines = [], []
    for n, step in enumerate(STEPS):
        if n == 2:  # a stale record under request 1's prefix, in both
            corrupt(k_rec, table[1, 1])
            corrupt(k.records, table[1, 1])
        canary.before_forward(forward_batch(table, step))
        report = canary.end_step()  # the previous step's rows
        rows += report.rows
        lines += report.lines
        batch, tokens = step_arrays(table, *step)
        kc.plan(**batch, req_to_token=table, verify_plan=vp, write_plan=wp, status=st, workspace=ws, backend=backend)
        kc.verify(verify_plan=vp, buffer=[k, v], kernel_kind=kinds, ring=ring, check_expected_token=False,
                  backend=backend)
        kc.write(write_plan=wp, **tokens, buffer=[k, v], kernel_kind=kinds, ring=ring, chain_position_assert=flag,
                 backend=backend)
        assert np.array_equal(k_rec, k.records) and np.array_equal(v_rec, v.records), f"step {n}"
        assert k_rec.any()
    report = canary.flush()
    rows += report.rows
    lines += report.lines
    expected = kc.read_report(ring)
    assert rows == expected.rows and lines == expected.lines and len(rows) == 1
    # the stale token breaks the chain hash of the next record of the prefix
    assert rows[0][:2] == (int(kc.KernelKind.HEAD_K_FULL), table[1, 2])
    assert report.row_groups == ["target"] and report.count == expected.count == 1
    assert canary.steps == 3 and canary.last_report == report


def test_swa_and_draft_groups_report_their_own_rows():
    table = req_to_token()
    swa_k, swa_v = np.zeros((POOL, 32), np.uint8), np.zeros((POOL, 32), np.uint8)
    canary = kc.Canary(req_to_token=table, full_to_swa_index_mapping=np.arange(POOL, dtype=np.int64),
                       swa=kc.GroupArrays(k=swa_k, v=swa_v), swa_group=True, swa_window=4, draft_group=True,
                       report_mode="none", dimensions=dims())
    assert canary.groups == ("target", "swa", "draft")
    for n, step in enumerate(STEPS):
        if n == 2:
            corrupt(swa_k, table[1, 1])  # inside request 1's window
        canary.before_forward(forward_batch(table, step, swa=True, draft=True))
        canary.end_step()
    report = canary.flush()
    assert report.row_groups == ["swa"] and report.rows[0][:2] == (int(kc.KernelKind.HEAD_K_SWA), table[1, 2])


def test_a_sweep_verifies_the_cached_prefixes():
    table = req_to_token()
    k_rec, v_rec = np.zeros((POOL, 32), np.uint8), np.zeros((POOL, 32), np.uint8)
    canary = kc.Canary(req_to_token=table, target=kc.GroupArrays(k=k_rec, v=v_rec), sweep_interval=1,
                       report_mode="none", dimensions=dims())
    canary.before_forward(forward_batch(table, STEPS[0]))
    cached = kc.CachedPrefixes(pool_rows=np.array([1, 2], np.int64), lengths=np.array([3, 2], np.int64))
    canary.sweep(cached)
    assert canary.flush().rows == [] and canary.sweeps == 1
    corrupt(v_rec, table[2, 0])
    canary.sweep(cached)
    report = canary.flush()
    assert [row[0] for row in report.rows] == [int(kc.KernelKind.SWEEP_V_FULL)] and canary.sweeps == 2
    with pytest.raises(ValueError, match="sweep_req_capacity is 4"):
        canary.sweep(kc.CachedPrefixes(pool_rows=np.ones(5, np.int64), lengths=np.ones(5, np.int64)))


def test_write_input_assert_checks_the_expected_tokens():
    table = req_to_token()
    canary = kc.Canary(req_to_token=table, write_input_assert=True, report_mode="none", dimensions=dims())
    batch, tokens = step_arrays(table, *STEPS[0])
    with pytest.raises(ValueError, match="write_input_assert is on but expected_input_ids"):
        canary.before_forward(kc.ForwardBatch(**batch, tokens=kc.ForwardTokens(**tokens)))
    expected = tokens["input_ids"].copy()
    expected[1] += 1  # the engine's sampled token and the one written disagree
    canary.before_forward(kc.ForwardBatch(**batch, tokens=kc.ForwardTokens(
        **tokens, expected_input_ids=expected, expected_positions=tokens["positions"])))
    rows = canary.flush().rows
    assert [(r[0], r[1], r[7]) for r in rows] == [(int(kind), table[1, 1], int(kc.FailReason.WRITE_TOKEN))
                                                  for kind in (kc.KernelKind.HEAD_K_FULL, kc.KernelKind.HEAD_V_FULL)]


def test_the_tail_pass_fingerprints_the_real_kv_bytes():
    table = req_to_token()
    kv_k, kv_v = np.zeros((POOL, 16), np.uint8), np.zeros((POOL, 16), np.uint8)
    real = kc.GroupArrays(real_kv_k=[kc.RealKvSource(kv_k)], real_kv_v=[kc.RealKvSource(kv_v)])
    canary = kc.Canary(req_to_token=table, target=real, real_kv_mode="all", tail_pass=True, report_mode="none",
                       dimensions=dims())
    for n, step in enumerate(STEPS):
        if n == 2:
            kv_v[table[1, 0], 3] ^= 1  # a bit of request 1's cached V flips
        batch = forward_batch(table, step)
        canary.before_forward(batch)
        _, tokens = step_arrays(table, *step)
        for slot in tokens["out_cache_loc"]:  # the model writes the step's KV
            kv_k[slot] = kv_v[slot] = slot % 251 + 1
        canary.after_forward(batch)
    rows = canary.flush().rows
    assert {(r[0], r[1], r[7]) for r in rows} == {
        (int(kind), table[1, 0], int(kc.FailReason.VERIFY_REAL_KV_HASH))
        for kind in (kc.KernelKind.HEAD_V_FULL, kc.KernelKind.TAIL_V_FULL)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_prefix_cache_hit_across_identities_fails_every_pass_that_verifies_it(backend):
    # SPEC-CANARY §11.7: request A (pool row 1, identity 5) writes positions 0-3; request B (pool row 2)
    # maps its prefix of 4 to A's slots and extends by one; the sweep checks A's cached prefix.
    table = req_to_token()
    canary = kc.Canary(req_to_token=table, request_identities=True, sweep_interval=1, report_mode="none",
                       dimensions=dims(), backend=backend)
    i64 = lambda x: np.array(x, np.int64)  # noqa: E731
    a, tokens = step_arrays(table, [1], [0], [4])
    canary.before_forward(kc.ForwardBatch(**a, tokens=kc.ForwardTokens(**tokens), identities=i64([5])))
    canary.sweep(kc.CachedPrefixes(pool_rows=i64([1]), lengths=i64([4]), identities=i64([5])))
    assert canary.flush().rows == []
    table[2, :4] = table[1, :4]  # the hit (the Canary reads the engine's table in place)
    b, tokens = step_arrays(table, [2], [4], [1])
    for reader, hit in ((6, True), (5, False), (0, True)):
        canary.before_forward(kc.ForwardBatch(**b, tokens=kc.ForwardTokens(**tokens), identities=i64([reader])))
        canary.sweep(kc.CachedPrefixes(pool_rows=i64([1]), lengths=i64([4]), identities=i64([reader])))
        rows = canary.flush().rows
        kinds = [kc.KernelKind.HEAD_K_FULL, kc.KernelKind.HEAD_V_FULL, kc.KernelKind.SWEEP_K_FULL,
                 kc.KernelKind.SWEEP_V_FULL]
        expected = sorted((int(kind), slot) for kind in kinds for slot in table[1, :4]) if hit else []
        assert sorted(r[:2] for r in rows) == expected, f"reader identity {reader}"
        assert all(r[7] == kc.FailReason.VERIFY_CHAIN_HASH for r in rows)
        canary.rearm()


def test_identity_zero_is_the_canary_without_identities():
    records = []
    for config in (dict(), dict(request_identities=True)):
        table = req_to_token()
        k_rec, v_rec = np.zeros((POOL, 32), np.uint8), np.zeros((POOL, 32), np.uint8)
        canary = kc.Canary(req_to_token=table, target=kc.GroupArrays(k=k_rec, v=v_rec), report_mode="none",
                           dimensions=dims(), **config)
        for step in STEPS:
            batch, tokens = step_arrays(table, *step)
            ids = np.zeros(len(step[0]), np.int64) if config else None
            canary.before_forward(kc.ForwardBatch(**batch, tokens=kc.ForwardTokens(**tokens), identities=ids))
        records.append((k_rec.tobytes(), v_rec.tobytes()))
    assert records[0] == records[1] and any(records[0][0])


def test_bad_identities_of_the_canary_raise_naming_the_argument():
    table = req_to_token()
    batch, tokens = step_arrays(table, *STEPS[0])
    forward = lambda **extra: kc.ForwardBatch(**batch, tokens=kc.ForwardTokens(**tokens), **extra)  # noqa: E731
    with pytest.raises(TypeError, match=r"config\.request_identities must be a bool"):
        kc.Canary(req_to_token=table, dimensions=dims(), request_identities=1)
    with pytest.raises(TypeError, match=r"kvcanary\.ForwardBatch: identities must have dtype int64, got int32"):
        forward(identities=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match=r"kvcanary\.ForwardBatch: identities has 1 entries"):
        forward(identities=np.zeros(1, np.int64))
    with pytest.raises(ValueError, match=r"kvcanary\.CachedPrefixes: identities has 3 entries"):
        kc.CachedPrefixes(pool_rows=np.ones(2, np.int64), lengths=np.ones(2, np.int64),
                          identities=np.zeros(3, np.int64))
    canary = kc.Canary(req_to_token=table, dimensions=dims(), report_mode="none", request_identities=True)
    with pytest.raises(ValueError, match="request_identities is on but batch.identities is absent"):
        canary.before_forward(forward())
    with pytest.raises(ValueError, match="request_identities is on but cached.identities is absent"):
        canary.sweep(kc.CachedPrefixes(pool_rows=np.ones(2, np.int64), lengths=np.ones(2, np.int64)))
    plain = kc.Canary(req_to_token=table, dimensions=dims(), report_mode="none")
    with pytest.raises(ValueError, match="request_identities is off but batch.identities is given"):
        plain.before_forward(forward(identities=np.zeros(2, np.int64)))
    assert canary.steps == plain.steps == 0


def test_the_python_config_mirrors_the_cpp_defaults():
    defaults = kc._core.canary_config_defaults()
    c = kc.CanaryConfig()
    assert defaults.pop("report_mode") == 1 and c.report_mode == "log"
    assert defaults.pop("multi_line") is False and c.report_format == "one-line"
    assert defaults.pop("real_kv_mode") == 0 and c.real_kv_mode == "none"
    assert defaults.pop("plan_algorithm") == 0 and c.plan_algorithm == "default"
    assert defaults.pop("canary_algorithm") == 0 and c.canary_algorithm == "default"
    assert defaults.pop("pump_snapshot") == 0 and c.pump_snapshot == "default"
    assert defaults.pop("head_verify") == 0 and c.head_verify == "default"
    assert defaults.pop("kv_records") == 0 and c.kv_records == "default"
    for part in (c.capacities, c.dimensions):
        for f in dataclasses.fields(part):
            assert getattr(part, f.name) == defaults.pop(f.name), f.name
    for name, value in defaults.items():
        assert getattr(c, name) == value, name


def run_with_violation(**config):
    table = req_to_token()
    k_rec, v_rec = np.zeros((POOL, 32), np.uint8), np.zeros((POOL, 32), np.uint8)
    canary = kc.Canary(req_to_token=table, target=kc.GroupArrays(k=k_rec, v=v_rec), dimensions=dims(), **config)
    for n, step in enumerate(STEPS[:2]):
        if n == 1:
            corrupt(k_rec, table[1, 0])
        canary.before_forward(forward_batch(table, step))
        canary.end_step()
    return canary


def test_raise_mode_raises_canary_violation_with_the_report():
    canary = run_with_violation(report_mode="raise")
    with pytest.raises(kc.CanaryViolation) as caught:
        canary.flush()
    assert caught.value.report.row_groups == ["target"] and len(caught.value.rows) == 1
    assert canary.last_report.rows == caught.value.rows
    assert canary.flush().rows == []  # reported once


@pytest.mark.parametrize("route", ["side-stream-copies", "kernel", "in-graph", "beside-forward", "with-next-plan"])
def test_each_pump_route_reports_the_same_row_once(route):
    expected = run_with_violation(report_mode="none").flush()
    canary = run_with_violation(report_mode="none", pump_snapshot=route)
    # The in-graph route reads the step's own snapshot: the row comes with the last end_step(), not flush().
    rows = canary.last_report.rows + canary.flush().rows
    assert rows == expected.rows and len(rows) == 1 and canary.flush().rows == []
    with pytest.raises(ValueError, match="config.pump_snapshot must be one of"):
        run_with_violation(pump_snapshot="events")


def test_interleaved_records_the_canary_owns_report_what_separate_ones_do():
    # Owned records (no GroupArrays), a first forward that reads never-written slots and a write that repeats
    # them: the same rows and counters with the K and V records in one allocation as in two.
    def run(kv_records):
        table = req_to_token()
        canary = kc.Canary(req_to_token=table, dimensions=dims(), report_mode="none", keep_never_written=True,
                           kv_records=kv_records)
        rows = []
        for step in (STEPS[1], STEPS[2]):
            canary.before_forward(forward_batch(table, step))
            rows += canary.end_step().rows
        report = canary.flush()
        return rows + report.rows, (report.slot_run_counter, report.kernel_run_counter)

    separate, interleaved = run("separate"), run("interleaved")
    assert separate[0] and interleaved == separate
    with pytest.raises(ValueError, match="config.kv_records must be one of"):
        run("packed")


@pytest.mark.parametrize("route", ["from-plan", "from-inputs", "from-inputs-after-plan"])
def test_each_head_verify_route_reports_the_same_row(route):
    expected = run_with_violation(report_mode="none").flush()
    canary = run_with_violation(report_mode="none", head_verify=route)
    report = canary.flush()
    assert report.rows == expected.rows and len(report.rows) == 1
    counters = (report.slot_run_counter, report.kernel_run_counter)
    assert counters == (expected.slot_run_counter, expected.kernel_run_counter)
    assert report.slot_run_counter > 0
    with pytest.raises(ValueError, match="config.head_verify must be one of"):
        run_with_violation(head_verify="fused")


def test_log_mode_goes_to_a_callable_or_to_the_kvcanary_logger(caplog):
    lines = []
    run_with_violation(sink=lines.append).flush()
    assert len(lines) == 1 and lines[0].startswith("kv_canary violation:")
    with caplog.at_level(logging.INFO, logger="kvcanary"):
        run_with_violation(stats_every_n_steps=1).flush()
    levels = {r.getMessage().split(" ")[0]: r.levelno for r in caplog.records if r.name == "kvcanary"}
    assert levels["kv_canary"] == logging.WARNING and levels["[canary]"] == logging.INFO


def test_a_step_that_ran_fewer_forwards_than_told_is_canary_not_running():
    table = req_to_token()
    canary = kc.Canary(req_to_token=table, dimensions=dims(), report_mode="raise", health_check_every_n_steps=1)
    batch = forward_batch(table, STEPS[0])
    canary.before_forward(batch)
    canary.end_step()
    canary.end_step(forwards=2)  # nothing ran
    with pytest.raises(kc.CanaryNotRunningError, match="canary not running") as caught:
        canary.end_step()
    assert caught.value.report.health_errors


@pytest.mark.parametrize("override, error, match", [
    (dict(ring_capacity="8"), TypeError, r"config\.ring_capacity must be an int"),
    (dict(tail_pass=1), TypeError, r"config\.tail_pass must be a bool"),
    (dict(report_mode="loud"), ValueError, r"config\.report_mode must be one of"),
    (dict(sink=42), TypeError, r"config\.sink"),
    (dict(ring_capacitty=8), TypeError, r"unknown config field\(s\) ring_capacitty"),
    (dict(dimensions=kc.EngineDimensions(pool_slots=POOL, max_running_requests=REQS, max_context_len=-1)),
     ValueError, r"max_context_len"),
    (dict(ring_capacity=-1), ValueError, r"ring_capacity"),
    (dict(ring_capacity=2**40), ValueError, r"its buffers need \d+ bytes of host memory .*this machine has \d+"),
    (dict(ring_capacity=2**64), ValueError, r"config\.ring_capacity is 18446744073709551616, outside int64"),
    (dict(sweep_interval=-2**63 - 1), ValueError, r"config\.sweep_interval is -9223372036854775809, outside int64"),
    (dict(dimensions=kc.EngineDimensions(pool_slots=2**70, max_running_requests=REQS, max_context_len=CTX)),
     ValueError, r"config\.dimensions\.pool_slots is 1180591620717411303424, outside int64"),
    (dict(swa_group=True, swa_window=4), ValueError, r"full_to_swa_index_mapping"),
    (dict(device="cuda"), ValueError, r"kvcanary\.Canary: device is 'cuda' but req_to_token is on cpu"),
])
def test_bad_config_raises_before_anything_runs(override, error, match):
    config = dict(dimensions=dims())
    config.update(override)
    with pytest.raises(error, match=match):
        kc.Canary(req_to_token=req_to_token(), **config)


def test_bad_batches_raise_naming_the_argument():
    table = req_to_token()
    canary = kc.Canary(req_to_token=table, dimensions=dims(), report_mode="none")
    batch, tokens = step_arrays(table, *STEPS[0])
    with pytest.raises(TypeError, match=r"kvcanary\.ForwardTokens: input_ids must have dtype int64, got int32"):
        kc.ForwardTokens(**dict(tokens, input_ids=tokens["input_ids"].astype(np.int32)))
    with pytest.raises(ValueError, match=r"kvcanary\.ForwardBatch: prefix_lens has 1 entries"):
        kc.ForwardBatch(**dict(batch, prefix_lens=batch["prefix_lens"][:1]), tokens=kc.ForwardTokens(**tokens))
    with pytest.raises(TypeError, match=r"kvcanary\.Canary\.before_forward: batch must be a kvcanary\.ForwardBatch"):
        canary.before_forward(batch)
    with pytest.raises(ValueError, match="swa_tokens is given"):
        canary.before_forward(forward_batch(table, STEPS[0], swa=True))
    big = ([1, 2, 3, 1, 2], [0] * 5, [1] * 5)
    with pytest.raises(ValueError, match="write_req_capacity is 4"):
        canary.before_forward(forward_batch(table, big))
    with pytest.raises(ValueError, match="forwards is -1"):
        canary.end_step(-1)
    assert canary.steps == 0


def test_a_canary_after_finalize_raises_and_the_process_exits_cleanly():
    code = textwrap.dedent("""
        import numpy as np, kvcanary as kc
        c = kc.Canary(req_to_token=np.zeros((2, 4), np.int32), dimensions=kc.EngineDimensions(
            pool_slots=8, max_running_requests=2, max_context_len=4))
        kc.finalize()
        try:
            c.flush()
        except RuntimeError as e:
            print("raised:", e)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "raised: kvcanary: Canary used after kvcanary.finalize()" in result.stdout and result.stderr == ""
