"""kvcanary's Python API on numpy, on every host backend: the SPEC facts (the CLI's fact cases, shared with
the C++ tests), the boundary rules (every dtype / rank / shape / contiguity / writability / alignment rule
with its error), zero-copy, and the lifecycle."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kvcanary as kc
from conftest import host_backends

CASES = Path(__file__).resolve().parents[1] / "cli" / "cases"
BACKENDS = host_backends()
ANCHOR_HASH = -2414019407054260458  # splitmix64(0xC0FFEE1234567890) as int64 (SPEC-CANARY §2)


def bound_plan(vcap, wcap, max_bs=64, with_identities=False):
    return (kc.VerifyPlan.allocate(vcap, with_identities=with_identities),
            kc.WritePlan.allocate(wcap, with_identities=with_identities), kc.PlanStatus.allocate(),
            kc.PlanWorkspace.allocate(max_bs))


def matrix(rows, dtype=np.int32):
    return np.array(rows, dtype=dtype).reshape(len(rows), -1) if rows else np.zeros((0, 0), dtype)


def run_plan_case(case, backend, algorithm="default", plans=None):
    vp, wp, st, ws = plans or bound_plan(case["verify_capacity"], case["write_req_capacity"],
                                         max(len(case["req_pool_indices"]), 1), "req_identities" in case)
    opt = lambda key, f: None if case.get(key) is None else f(case[key])  # noqa: E731
    kc.plan(req_pool_indices=np.array(case["req_pool_indices"], np.int64),
            prefix_lens=np.array(case["prefix_lens"], np.int64),
            extend_seq_lens=np.array(case["extend_seq_lens"], np.int64),
            req_to_token=matrix(case["req_to_token"]), verify_plan=vp, write_plan=wp, status=st, workspace=ws,
            swa_window_size=case.get("swa_window_size") or 0,
            full_to_swa_index_mapping=opt("full_to_swa_index_mapping", lambda v: np.array(v, np.int64)),
            req_to_verify_expected_tokens=opt("req_to_verify_expected_tokens", matrix),
            req_to_verify_expected_tokens_valid_lens=opt("req_to_verify_expected_tokens_valid_lens",
                                                         lambda v: np.array(v, np.int64)),
            kv_token_id_vs_position_offset=case.get("kv_token_id_vs_position_offset") or 0,
            req_identities=opt("req_identities", lambda v: np.array(v, np.int64)),
            algorithm=algorithm, backend=backend)
    return vp, wp, st, ws


def plan_output(vp, wp, st, bs):
    n, enable = int(vp.verify_num_valid[0]), int(vp.enable[0])
    head = (lambda a: a[:n].tolist()) if enable == 1 else (lambda a: [])
    out = {"verify_plan": {"verify_num_valid": n, "enable": enable,
                           "verify_slot_indices": head(vp.verify_slot_indices),
                           "verify_expected_tokens": head(vp.verify_expected_tokens),
                           "verify_expected_positions": head(vp.verify_expected_positions),
                           "verify_prev_slot_indices": head(vp.verify_prev_slot_indices)},
           "write_plan": {"write_offsets": wp.write_offsets.tolist(),
                          "write_seed_slot_indices": wp.write_seed_slot_indices[:bs].tolist(),
                          "write_num_valid_reqs": int(wp.write_num_valid_reqs[0])},
           "status": {"input_error_bits": int(st.input_error_bits[0]), "first_bad_row": int(st.first_bad_row[0])}}
    if vp.verify_identities is not None:  # SPEC-CANARY §11.7, as the CLI prints them
        out["verify_plan"]["verify_identities"] = head(vp.verify_identities)
        out["write_plan"]["write_identities"] = wp.write_identities[:bs].tolist()
    return out


def subset(expected, actual):
    """The keys a fact names, compared (a fact may leave some out)."""
    for key, value in expected.items():
        if isinstance(value, dict):
            subset(value, actual[key])
        else:
            assert actual[key] == value, f"{key}: {actual[key]} != {value}"


# huge_verify_capacity_is_not_preallocated names a capacity no test machine can allocate (the CLI case
# checks it without allocating); every other fact runs here.
PLAN_FACTS = sorted(p for p in CASES.glob("facts/*.json") if p.stem != "huge_verify_capacity_is_not_preallocated")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("algorithm", ["default", "portable"])
@pytest.mark.parametrize("path", PLAN_FACTS, ids=lambda p: p.stem)
def test_plan_facts(path, algorithm, backend):
    case = json.loads(path.read_text())
    steps = case.get("steps", [case])
    plans = None
    for step in steps:
        if plans is None:
            plans = bound_plan(step["verify_capacity"], step["write_req_capacity"], 64)
        run_plan_case(step, backend, algorithm, plans)
        expected = step.get("_expected", case["_expected"] if step is case else None)
        if expected is not None:
            subset(expected, plan_output(*plans[:3], len(step["req_pool_indices"])))


# ---- SPEC-CANARY facts: the CLI's canary cases through write / verify / read_report ----

def records(rows, stride_bytes=32):
    buf = kc.CanaryBuffer.allocate(len(rows), stride_bytes=stride_bytes)
    view = buf.records.view(np.int64)
    for s, r in enumerate(rows):
        view[s, :4] = r
    return buf


def real_kv_of(spec):
    if not spec:
        return None
    mode = {"none": 0, "partial": 1, "all": 2}[spec.get("mode", "none")]
    sources = [kc.RealKvSource(array=np.array(s["rows"], np.uint8), page_size=s["page_size"],
                               bytes_per_token=s["bytes_per_token"], read_bytes=s["read_bytes"])
               for s in spec.get("sources", [])]
    return kc.RealKv(mode=mode, sources=sources)


def verify_plan_of(spec):
    n = len(spec["verify_slot_indices"])
    vp = kc.VerifyPlan.allocate(n, with_identities="verify_identities" in spec)
    for key in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                "verify_prev_slot_indices", "verify_identities"):
        if key in spec:
            getattr(vp, key)[:] = spec[key]
    vp.verify_num_valid[0], vp.enable[0] = spec["verify_num_valid"], spec["enable"]
    return vp


def write_plan_of(spec):
    wp = kc.WritePlan.allocate(len(spec["write_offsets"]) - 1, with_identities="write_identities" in spec)
    wp.write_offsets[:] = spec["write_offsets"]
    seeds = spec["write_seed_slot_indices"]
    wp.write_seed_slot_indices[:len(seeds)] = seeds
    if "write_identities" in spec:
        wp.write_identities[:len(spec["write_identities"])] = spec["write_identities"]
    wp.write_num_valid_reqs[0] = spec["write_num_valid_reqs"]
    return wp


def run_canary_case(case, backend):
    buf = records(case["canary_buffer"])
    ring = kc.ViolationRing.allocate(case.get("ring_capacity", 1024))
    kind = case.get("kernel_kind", "HEAD_K_FULL")
    real_kv = real_kv_of(case.get("real_kv"))
    command = case["_command"]
    if command == "step":
        vp, wp, st, ws = run_plan_case(case, backend)
    if command in ("verify", "step"):
        if command == "verify":
            vp = verify_plan_of(case["verify_plan"])
        kc.verify(verify_plan=vp, buffer=buf, ring=ring, kernel_kind=kind, real_kv=real_kv,
                  check_expected_token=case.get("check_expected_token", True),
                  check_slot_zero=case.get("check_slot_zero", False), check_freed=case.get("check_freed", False),
                  backend=backend)
    if command in ("write", "step"):
        if command == "write":
            wp = write_plan_of(case["write_plan"])
        dtype = np.int64
        expected = {}
        if "expected_input_ids" in case:
            expected = dict(expected_input_ids=np.array(case["expected_input_ids"], dtype),
                            expected_positions=np.array(case["expected_positions"], dtype))
        kc.write(write_plan=wp, input_ids=np.array(case["input_ids"], dtype),
                 positions=np.array(case["positions"], dtype), out_cache_loc=np.array(case["out_cache_loc"], dtype),
                 buffer=buf, ring=ring, kernel_kind=kind, real_kv=real_kv,
                 chain_position_assert=np.array([case.get("chain_position_assert", 1)], np.int32), backend=backend,
                 **expected)
    report = kc.read_report(ring)
    return buf, ring, report


CANARY_FACTS = sorted(p for p in CASES.glob("canary/*.json") if json.loads(p.read_text()).get("_command"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", CANARY_FACTS, ids=lambda p: p.stem)
def test_canary_facts(path, backend):
    case = json.loads(path.read_text())
    buf, ring, report = run_canary_case(case, backend)
    expected = case["_expected"]
    if "ring" in expected:
        assert report.count == expected["ring"]["count"]
        all_rows = sorted(tuple(r) for r in ring.rows[:min(report.count, ring.capacity)].tolist())
        assert all_rows == sorted(tuple(r) for r in expected["ring"]["rows"])
    if "kernel_run_counter" in expected:
        assert report.kernel_run_counter == expected["kernel_run_counter"]
    if "slot_run_counter" in expected:
        assert report.slot_run_counter == expected["slot_run_counter"]
    if "report" in expected:
        assert sorted(report.lines) == sorted(expected["report"])
        assert report.dropped == expected.get("report_dropped", 0)
    if "canary_buffer" in expected:
        assert buf.records.view(np.int64)[:, :4].tolist() == expected["canary_buffer"]


# ---- the boundary rules (SPEC item 2 of issue 21): each with its error, naming the argument ----

def good_plan_args(**override):
    vp, wp, st, ws = bound_plan(16, 4)
    args = dict(req_pool_indices=np.array([1], np.int64), prefix_lens=np.array([3], np.int64),
                extend_seq_lens=np.array([1], np.int64), req_to_token=np.arange(32, dtype=np.int32).reshape(4, 8),
                verify_plan=vp, write_plan=wp, status=st, workspace=ws)
    args.update(override)
    return args


@pytest.mark.parametrize("name", ["req_pool_indices", "prefix_lens", "extend_seq_lens"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.float64, np.int16])
def test_wrong_dtype_is_a_type_error_naming_the_argument(name, dtype):
    args = good_plan_args()
    args[name] = args[name].astype(dtype)
    with pytest.raises(TypeError, match=rf"kvcanary\.plan: {name} must have dtype int64, got"):
        kc.plan(**args)


def test_req_to_token_must_be_int32():
    with pytest.raises(TypeError, match=r"kvcanary\.plan: req_to_token must have dtype int32, got int64"):
        kc.plan(**good_plan_args(req_to_token=np.zeros((4, 8), np.int64)))


def test_int32_array_for_an_int64_output_raises_and_is_never_filled():
    # Regression: an implicit conversion would fill a temporary and leave the caller's array untouched.
    out = np.full(16, 7, np.int32)
    with pytest.raises(TypeError, match=r"verify_slot_indices must have dtype int64, got int32"):
        kc.VerifyPlan(verify_slot_indices=out, verify_expected_tokens=np.zeros(16, np.int64),
                      verify_expected_positions=np.zeros(16, np.int64), verify_prev_slot_indices=np.zeros(16, np.int64),
                      verify_num_valid=np.zeros(1, np.int32), enable=np.zeros(1, np.int32))
    assert (out == 7).all()


@pytest.mark.parametrize("value", [[1], (1,), 1, "abc", None, object()])
def test_not_an_array_is_a_type_error(value):
    with pytest.raises(TypeError, match=r"kvcanary\.plan: req_pool_indices (must be an array|is required)"):
        kc.plan(**good_plan_args(req_pool_indices=value))


def test_wrong_rank_strides_and_shapes_are_value_errors():
    with pytest.raises(ValueError, match=r"prefix_lens must be 1-D, got shape \(1, 1\)"):
        kc.plan(**good_plan_args(prefix_lens=np.zeros((1, 1), np.int64)))
    with pytest.raises(ValueError, match=r"req_pool_indices must be contiguous"):
        kc.plan(**good_plan_args(req_pool_indices=np.zeros(4, np.int64)[::2]))
    with pytest.raises(ValueError, match=r"req_to_token must be 2-D"):
        kc.plan(**good_plan_args(req_to_token=np.zeros(8, np.int32)))
    with pytest.raises(ValueError, match=r"req_to_token must have contiguous rows"):
        kc.plan(**good_plan_args(req_to_token=np.zeros((8, 4), np.int32).T))
    with pytest.raises(ValueError, match=r"verify_num_valid must be a scalar"):
        kc.VerifyPlan(verify_slot_indices=np.zeros(4, np.int64), verify_expected_tokens=np.zeros(4, np.int64),
                      verify_expected_positions=np.zeros(4, np.int64), verify_prev_slot_indices=np.zeros(4, np.int64),
                      verify_num_valid=np.zeros(2, np.int32), enable=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match=r"verify_prev_slot_indices has 3 entries"):
        kc.VerifyPlan(verify_slot_indices=np.zeros(4, np.int64), verify_expected_tokens=np.zeros(4, np.int64),
                      verify_expected_positions=np.zeros(4, np.int64), verify_prev_slot_indices=np.zeros(3, np.int64),
                      verify_num_valid=np.zeros(1, np.int32), enable=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match=r"write_offsets has 4 entries, must be"):
        kc.WritePlan(write_offsets=np.zeros(4, np.int64), write_seed_slot_indices=np.zeros(4, np.int64),
                     write_num_valid_reqs=np.zeros(1, np.int32))


def test_a_padded_page_table_is_taken_in_place():
    table = np.zeros((4, 12), np.int32)
    table[:, :8] = np.arange(32, dtype=np.int32).reshape(4, 8)
    vp, wp, st, ws = bound_plan(16, 4)
    kc.plan(**good_plan_args(req_to_token=table[:, :8], verify_plan=vp, write_plan=wp, status=st, workspace=ws))
    assert vp.verify_slot_indices[:3].tolist() == [8, 9, 10]


def test_scalars_are_accepted_as_shape_0_and_1():
    vp = kc.VerifyPlan(verify_slot_indices=np.zeros(4, np.int64), verify_expected_tokens=np.zeros(4, np.int64),
                       verify_expected_positions=np.zeros(4, np.int64), verify_prev_slot_indices=np.zeros(4, np.int64),
                       verify_num_valid=np.zeros((), np.int32), enable=np.zeros((1,), np.int32))
    wp, st, ws = kc.WritePlan.allocate(4), kc.PlanStatus.allocate(), kc.PlanWorkspace.allocate(4)
    kc.plan(**good_plan_args(verify_plan=vp, write_plan=wp, status=st, workspace=ws))
    assert int(vp.verify_num_valid) == 3 and int(vp.enable[0]) == 1


def test_read_only_outputs_are_refused_but_read_only_inputs_are_fine():
    ro = np.zeros(1, np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"kvcanary\.PlanStatus: input_error_bits is read-only"):
        kc.PlanStatus(input_error_bits=ro, first_bad_row=np.zeros(1, np.int32))
    rpi = np.array([1], np.int64)
    rpi.flags.writeable = False
    kc.plan(**good_plan_args(req_pool_indices=rpi))


def test_canary_buffer_rules():
    with pytest.raises(ValueError, match=r"records rows hold 24 bytes, a record needs 32"):
        kc.CanaryBuffer(np.zeros((4, 24), np.uint8))
    with pytest.raises(ValueError, match=r"rows are 36 bytes apart"):
        kc.CanaryBuffer(np.zeros((4, 36), np.uint8))
    raw = np.zeros(4 * 32 + 8, np.uint8)
    with pytest.raises(ValueError, match=r"8-byte aligned"):
        kc.CanaryBuffer(raw[1:1 + 128].reshape(4, 32))
    # An engine's own wider rows (any dtype): records at the start of each row.
    engine = np.zeros((8, 16), np.float32)
    buf = kc.CanaryBuffer(engine)
    assert (buf.num_slots, buf.stride_bytes) == (8, 64)


def test_host_arrays_with_a_stream_or_a_bad_backend_are_refused():
    with pytest.raises(ValueError, match=r"kvcanary\.plan: stream is only for CUDA arrays"):
        kc.plan(**good_plan_args(stream=1))
    with pytest.raises(ValueError, match=r"backend must be None, 'serial', 'openmp' or 'cuda'"):
        kc.plan(**good_plan_args(backend="gpu"))


def test_library_host_errors_are_value_errors_before_anything_is_written():
    vp, wp, st, ws = bound_plan(16, 1)
    wp.write_offsets[:] = 5
    with pytest.raises(ValueError, match="write_req_capacity"):
        kc.plan(**good_plan_args(req_pool_indices=np.array([1, 2], np.int64), prefix_lens=np.array([1, 1], np.int64),
                                 extend_seq_lens=np.array([1, 1], np.int64), verify_plan=vp, write_plan=wp, status=st,
                                 workspace=ws))
    assert (wp.write_offsets == 5).all()
    with pytest.raises(ValueError, match="swa_window_size"):
        kc.plan(**good_plan_args(swa_window_size=4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_copy_results_land_in_the_callers_arrays(backend):
    vp, wp, st, ws = bound_plan(16, 4)
    pointers = [a.ctypes.data for a in (vp.verify_slot_indices, wp.write_offsets, st.first_bad_row)]
    args = good_plan_args(verify_plan=vp, write_plan=wp, status=st, workspace=ws, backend=backend)
    kc.plan(**args)
    assert vp.verify_slot_indices[:3].tolist() == [8, 9, 10] and wp.write_seed_slot_indices[0] == 10
    assert [a.ctypes.data for a in (vp.verify_slot_indices, wp.write_offsets, st.first_bad_row)] == pointers
    buf, ring = kc.CanaryBuffer.allocate(64), kc.ViolationRing.allocate(8)
    kc.write(write_plan=wp, input_ids=np.array([5], np.int32), positions=np.array([3], np.int32),
             out_cache_loc=np.array([11], np.int32), buffer=buf, ring=ring,
             chain_position_assert=np.zeros(1, np.int32), backend=backend)
    assert buf.records.view(np.int64)[11].tolist()[:2] == [5, 3]


def test_token_arrays_must_share_one_dtype():
    wp, buf, ring = kc.WritePlan.allocate(1), kc.CanaryBuffer.allocate(4), kc.ViolationRing.allocate(4)
    with pytest.raises(TypeError, match=r"kvcanary\.write: positions must have dtype int32, got int64"):
        kc.write(write_plan=wp, input_ids=np.zeros(1, np.int32), positions=np.zeros(1, np.int64),
                 out_cache_loc=np.zeros(1, np.int32), buffer=buf, ring=ring,
                 chain_position_assert=np.zeros(1, np.int32))


def test_read_report_raise_mode_and_position_fact():
    buf = records([[0, 0, 0, 0]] * 5 + [[33, 0, ANCHOR_HASH, 0]])
    vp = verify_plan_of({"verify_num_valid": 1, "enable": 1, "verify_slot_indices": [5], "verify_expected_tokens": [-1],
                         "verify_expected_positions": [99], "verify_prev_slot_indices": [-1]})
    ring = kc.ViolationRing.allocate(4)
    kc.verify(verify_plan=vp, buffer=buf, ring=ring)
    with pytest.raises(kc.CanaryViolation) as caught:
        kc.read_report(ring, mode="raise")
    assert caught.value.rows == [(0, 5, 0, 33, -1, ANCHOR_HASH, ANCHOR_HASH, 2)]
    assert "fail_reason=verify_position slot_idx=5" in caught.value.lines[0]
    assert kc.read_report(ring).rows == []  # continues after the last read


# ---- SPEC-CANARY §11.7: request identities ----

def i64(values):
    return np.array(values, np.int64)


def tokens_of(table, rows, prefix, extend):
    """A step's tokens: request r's position q holds token 100 r + q + 7 in slot table[r, q]."""
    steps = [(100 * r + q + 7, q, table[r, q]) for r, p, e in zip(rows, prefix, extend) for q in range(p, p + e)]
    ids, pos, loc = zip(*steps)
    return dict(input_ids=i64(ids), positions=i64(pos), out_cache_loc=i64(loc),
                chain_position_assert=np.ones(1, np.int32))


def test_the_plan_copies_each_rows_identity_and_leaves_the_rest_alone():
    poison = -77
    batch = dict(req_pool_indices=i64([1, 0, 2, 3]), prefix_lens=i64([3, 9, 2, 40]),  # a padding row, a bad row
                 extend_seq_lens=i64([1, 1, 0, 1]), req_to_token=np.arange(128, dtype=np.int32).reshape(4, 32),
                 req_identities=i64([11, 12, -13, 14]))
    for vcap, wcap, verify_ids, write_ids in ((8, 6, [11, 11, 11, -13, -13], [11, 12, -13, 14]),
                                              (4, 4, [], [11, 12, -13, 14])):  # 4: overflow, no verify array touched
        vp, wp, st, ws = bound_plan(vcap, wcap, with_identities=True)
        vp.verify_identities[:] = wp.write_identities[:] = poison
        kc.plan(**batch, verify_plan=vp, write_plan=wp, status=st, workspace=ws)
        assert vp.verify_identities.tolist() == verify_ids + [poison] * (vcap - len(verify_ids))
        assert wp.write_identities.tolist() == write_ids + [poison] * (wcap - 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_prefix_cache_hit_across_identities_fails_verify(backend):
    # SPEC-CANARY §11.7's fact (vLLM #38606, SGLang #24568): request A (pool row 1, identity 5) writes
    # positions 0-3; request B (pool row 2) maps its prefix of 4 to A's slots and extends by one.
    table = np.arange(64, dtype=np.int32).reshape(4, 16)
    vp, wp, st, ws = bound_plan(64, 4, 4, with_identities=True)
    plans = dict(req_to_token=table, verify_plan=vp, write_plan=wp, status=st, workspace=ws, backend=backend)
    cache, ring = kc.CanaryBuffer.allocate(64), kc.ViolationRing.allocate(16)
    kc.plan(req_pool_indices=i64([1]), prefix_lens=i64([0]), extend_seq_lens=i64([4]), req_identities=i64([5]),
            **plans)
    kc.write(write_plan=wp, **tokens_of(table, [1], [0], [4]), buffer=cache, ring=ring, backend=backend)
    table[2, :4] = table[1, :4]  # the hit
    for reader, expected_rows in ((6, 4), (0, 4), (5, 0)):
        kc.plan(req_pool_indices=i64([2]), prefix_lens=i64([4]), extend_seq_lens=i64([1]),
                req_identities=i64([reader]), **plans)
        assert vp.verify_identities[:4].tolist() == [reader] * 4
        kc.verify(verify_plan=vp, buffer=cache, ring=ring, backend=backend)
        rows = kc.read_report(ring).rows
        assert sorted(r[1] for r in rows) == list(range(16, 16 + expected_rows)), f"reader identity {reader}"
        assert all(r[7] == kc.FailReason.VERIFY_CHAIN_HASH for r in rows)


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_zero_is_byte_equal_to_no_identities(backend):
    table = np.arange(64, dtype=np.int32).reshape(4, 16)
    runs = []
    for identities in (None, i64([0, 0, 0])):
        vp, wp, st, ws = bound_plan(64, 4, 4, with_identities=identities is not None)
        buf, ring = kc.CanaryBuffer.allocate(64), kc.ViolationRing.allocate(32)
        plans = []
        for n, (prefix, extend) in enumerate((([0, 0, 0], [3, 2, 4]), ([3, 2, 4], [1, 1, 1]))):
            if n == 1:
                buf.records.view(np.int64)[table[2, 0], 0] += 1  # a stale token: rows to compare
            step = (i64([1, 2, 3]), i64(prefix), i64(extend))
            kc.plan(req_pool_indices=step[0], prefix_lens=step[1], extend_seq_lens=step[2], req_to_token=table,
                    verify_plan=vp, write_plan=wp, status=st, workspace=ws, req_identities=identities,
                    backend=backend)
            plans.append(plan_output(vp, wp, st, 3))
            kc.verify(verify_plan=vp, buffer=buf, ring=ring, backend=backend)
            kc.write(write_plan=wp, **tokens_of(table, [1, 2, 3], prefix, extend), buffer=buf, ring=ring,
                     backend=backend)
        report = kc.read_report(ring)
        runs.append((buf.records.tobytes(), sorted(report.rows), report.slot_run_counter, plans))
    (records, rows, counter, plans), zeros = runs
    for plan_ in zeros[3]:  # the identity arrays aside, the plans are the same
        assert plan_["verify_plan"].pop("verify_identities") == [0] * plan_["verify_plan"]["verify_num_valid"]
        assert plan_["write_plan"].pop("write_identities") == [0, 0, 0]
    assert zeros == runs[0] and rows and any(records)


def identity_plans(verify=True, write=True):
    return dict(verify_plan=kc.VerifyPlan.allocate(16, with_identities=verify),
                write_plan=kc.WritePlan.allocate(4, with_identities=write))


def verify_plan_with(identities):
    v = {k: np.zeros(4, np.int64) for k in ("verify_slot_indices", "verify_expected_tokens",
                                             "verify_expected_positions", "verify_prev_slot_indices")}
    return kc.VerifyPlan(**v, verify_num_valid=np.zeros(1, np.int32), enable=np.zeros(1, np.int32),
                         verify_identities=identities)


def write_plan_with(identities):
    return kc.WritePlan(write_offsets=np.zeros(3, np.int64), write_seed_slot_indices=np.zeros(2, np.int64),
                        write_num_valid_reqs=np.zeros(1, np.int32), write_identities=identities)


@pytest.mark.parametrize("call, error, match", [
    (lambda: kc.plan(**good_plan_args(req_identities=np.zeros(1, np.int32))), TypeError,
     r"kvcanary\.plan: req_identities must have dtype int64, got int32"),
    (lambda: kc.plan(**good_plan_args(req_identities=[7])), TypeError,
     r"kvcanary\.plan: req_identities must be an array"),
    (lambda: kc.plan(**good_plan_args(req_identities=i64([7]))), ValueError,
     r"req_identities is given but the plans hold no verify_identities"),
    (lambda: kc.plan(**good_plan_args(req_identities=i64([7]), **identity_plans(write=False))), ValueError,
     r"req_identities is given but the plans hold no write_identities"),
    (lambda: kc.plan(**good_plan_args(req_identities=i64([7, 8]), **identity_plans())), ValueError,
     r"req_identities has 2 entries but req_pool_indices has 1"),
    (lambda: kc.plan(**good_plan_args(**identity_plans())), ValueError,
     r"req_identities is missing but the plans hold verify_identities"),
    (lambda: verify_plan_with(np.zeros(3, np.int64)), ValueError,
     r"kvcanary\.VerifyPlan: verify_identities has 3 entries, verify_slot_indices has 4"),
    (lambda: write_plan_with(np.zeros(2, np.int32)), TypeError,
     r"kvcanary\.WritePlan: write_identities must have dtype int64, got int32"),
    (lambda: write_plan_with(np.zeros((2, 1), np.int64)), ValueError,
     r"kvcanary\.WritePlan: write_identities must be 1-D"),
], ids=["dtype", "list", "no-plan-identities", "no-write-identities", "length", "missing", "verify-extent",
        "write-dtype", "write-rank"])
def test_bad_identities_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- lifecycle: in fresh interpreters ----

def run_python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_import_starts_nothing_and_exit_finalizes_quietly():
    result = run_python("""
        import numpy as np, kvcanary as kc
        assert not kc.is_initialized()
        kc.plan(**__import__('test_api').good_plan_args())
        assert kc.is_initialized()
        print("done")
    """.replace("__import__('test_api')", "__import__('sys').path.insert(0, %r) or __import__('test_api')"
                % str(Path(__file__).parent)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done" and result.stderr == ""


def test_a_call_after_finalize_raises_and_initialize_twice_is_a_no_op():
    result = run_python("""
        import numpy as np, kvcanary as kc
        kc.initialize(); kc.initialize()
        kc.finalize(); kc.finalize()
        try:
            kc.VerifyPlan.allocate(4)
            kc.plan(req_pool_indices=np.zeros(1, np.int64), prefix_lens=np.zeros(1, np.int64),
                    extend_seq_lens=np.zeros(1, np.int64), req_to_token=np.zeros((1, 1), np.int32),
                    verify_plan=kc.VerifyPlan.allocate(4), write_plan=kc.WritePlan.allocate(1),
                    status=kc.PlanStatus.allocate(), workspace=kc.PlanWorkspace.allocate(1))
        except RuntimeError as e:
            print("RuntimeError:", e)
        try:
            kc.initialize()
        except RuntimeError as e:
            print("RuntimeError:", e)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("RuntimeError: kvcanary:") for line in lines), result.stdout
    assert "finalize" in lines[0] and result.stderr == ""


def test_host_calls_release_the_gil():
    # Plans run in a thread while this one counts: with the GIL held for the call, the count would stall.
    result = run_python("""
        import threading, time, numpy as np, kvcanary as kc
        n = 1 << 22
        vp = kc.VerifyPlan.allocate(n); wp = kc.WritePlan.allocate(1)
        st = kc.PlanStatus.allocate(); ws = kc.PlanWorkspace.allocate(1)
        row = np.arange(n, dtype=np.int32)
        args = dict(req_pool_indices=np.ones(1, np.int64), prefix_lens=np.full(1, n, np.int64),
                    extend_seq_lens=np.ones(1, np.int64), req_to_token=np.vstack([row, row]), verify_plan=vp,
                    write_plan=wp, status=st, workspace=ws, backend="serial")
        kc.plan(**args)
        t = threading.Thread(target=lambda: [kc.plan(**args) for _ in range(8)])
        start = time.perf_counter(); t.start(); ticks = 0
        while t.is_alive():
            ticks += 1
        elapsed = time.perf_counter() - start
        print(elapsed > 0.02, ticks / elapsed > 1e5, ticks, elapsed)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["True", "True"], result.stdout


def test_a_misaligned_array_is_refused():
    raw = np.zeros(8 * 4 + 4, np.uint8)
    misaligned = np.frombuffer(raw.data, dtype=np.int64, count=4, offset=4)
    assert misaligned.ctypes.data % 8 != 0
    with pytest.raises(ValueError, match=r"kvcanary\.plan: prefix_lens is not aligned to its element size"):
        kc.plan(**good_plan_args(prefix_lens=misaligned[:1]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_write_of_k_and_v_equals_two_writes(backend):
    vp, wp, st, ws = bound_plan(64, 4)
    kc.plan(**good_plan_args(req_pool_indices=np.array([1, 2], np.int64), prefix_lens=np.array([3, 0], np.int64),
                             extend_seq_lens=np.array([2, 3], np.int64), verify_plan=vp, write_plan=wp, status=st,
                             workspace=ws, backend=backend))
    tokens = dict(input_ids=np.array([7, 8, 9, 10, 11], np.int64), positions=np.array([3, 4, 0, 1, 9], np.int64),
                  out_cache_loc=np.array([11, 12, 16, -1, 18], np.int64),
                  chain_position_assert=np.ones(1, np.int32), backend=backend)
    source = np.arange(32 * 32, dtype=np.uint8).reshape(32, 32)
    kv = kc.RealKv(mode=kc.RealKvMode.ALL, sources=[kc.RealKvSource(array=source, bytes_per_token=32, read_bytes=32)])
    both = [kc.CanaryBuffer.allocate(32) for _ in range(2)]
    ring_both = kc.ViolationRing.allocate(16)
    kc.write(write_plan=wp, buffer=both, ring=ring_both, kernel_kind=[kc.KernelKind.HEAD_K_FULL, "HEAD_V_FULL"],
             real_kv=[None, kv], **tokens)
    ring_each = kc.ViolationRing.allocate(16)
    each = [kc.CanaryBuffer.allocate(32) for _ in range(2)]
    kc.write(write_plan=wp, buffer=each[0], ring=ring_each, **tokens)
    kc.write(write_plan=wp, buffer=each[1], ring=ring_each, kernel_kind="HEAD_V_FULL", real_kv=kv, **tokens)
    for a, b in zip(both, each):
        assert (a.records == b.records).all() and a.records.any()
    r_both, r_each = kc.read_report(ring_both), kc.read_report(ring_each)
    assert sorted(r_both.rows) == sorted(r_each.rows) and r_both.rows  # position 9 breaks the chain assert
    assert r_both.slot_run_counter == r_each.slot_run_counter == 8
    with pytest.raises(ValueError, match=r"kvcanary\.write: buffer must name 1 to 4 canary buffers, got 5"):
        kc.write(write_plan=wp, buffer=[both[0]] * 5, ring=ring_both, **tokens)


def lying_producer(extent):
    """An object whose __dlpack__ describes 8 int64 as a 1-D array of `extent` (a broken producer)."""
    import ctypes

    class Device(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]

    class DType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class Tensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]

    class Managed(ctypes.Structure):
        _fields_ = [("tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    class Liar:
        def __init__(self):
            self.memory = np.zeros(8, np.int64)
            self.shape, self.strides = (ctypes.c_int64 * 1)(extent), (ctypes.c_int64 * 1)(1)
            self.managed = Managed(Tensor(self.memory.ctypes.data, Device(1, 0), 1, DType(0, 64, 1), self.shape,
                                          self.strides, 0), None, None)

        def __dlpack__(self, *args, **kwargs):
            make = ctypes.pythonapi.PyCapsule_New
            make.restype, make.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            return make(ctypes.addressof(self.managed), b"dltensor", None)

        def __dlpack_device__(self):
            return (1, 0)

    return Liar()


@pytest.mark.parametrize("extent", [-1, -5])
def test_a_producer_claiming_a_negative_extent_is_a_value_error(extent):
    # Regression: extent -1 sized a Kokkos View as ~0 and Kokkos aborted the process.
    with pytest.raises(ValueError, match=rf"kvcanary\.plan: req_pool_indices claims extent {extent} in dimension 0"):
        kc.plan(**good_plan_args(req_pool_indices=lying_producer(extent)))
    kc.plan(**good_plan_args(req_pool_indices=lying_producer(1)))  # the same producer, truthful: taken


@pytest.mark.parametrize("call, error, match", [
    (lambda: kc.plan(**good_plan_args(swa_window_size=2.5)), TypeError, r"kvcanary\.plan: swa_window_size must be an int, got float"),
    (lambda: kc.plan(**good_plan_args(swa_window_size="3")), TypeError, r"swa_window_size must be an int, got str"),
    (lambda: kc.plan(**good_plan_args(kv_token_id_vs_position_offset=True)), TypeError, r"kv_token_id_vs_position_offset must be an int, got bool"),
    (lambda: kc.plan(**good_plan_args(swa_window_size=2**31)), ValueError, r"swa_window_size is 2147483648, outside int32"),
    (lambda: kc.RealKv(sources=[kc.RealKvSource(np.zeros((4, 16), np.uint8), page_size=1.0)]), TypeError,
     r"kvcanary\.RealKv: page_size must be an int, got float"),
    (lambda: kc.RealKv(sources=[kc.RealKvSource(np.zeros((4, 16), np.uint8), read_bytes=2**64)]), ValueError,
     r"kvcanary\.RealKv: read_bytes is 18446744073709551616, outside int64"),
    (lambda: kc.read_report(kc.ViolationRing.allocate(4), already_reported=0.0), TypeError,
     r"kvcanary\.read_report: already_reported must be an int, got float"),
])
def test_int_arguments_are_taken_as_they_are_never_truncated_or_parsed(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_numpy_integers_are_ints():
    kc.plan(**good_plan_args(swa_window_size=np.int64(0), kv_token_id_vs_position_offset=np.int32(1)))
    kc.RealKv(sources=[kc.RealKvSource(np.zeros((4, 16), np.uint8), page_size=np.int64(1))])
