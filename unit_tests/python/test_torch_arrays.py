"""The boundary rules on torch CPU tensors, whichever way torch hands them over: through its DLPack C
exchange table (`__dlpack_c_exchange_api__`, torch >= 2.10: scripts/check-transformers.sh runs this file
with torch 2.11) or through `__dlpack__` (Debian's torch 1.13: scripts/check-python.sh). Each rule gives
the error test_api.py checks on numpy, and a step on torch tensors gives numpy's results to the byte."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kvcanary as kc
from kvcanary import _core
from test_api import bound_plan

torch = pytest.importorskip("torch")
EXCHANGE = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


def plans(library, vcap=16, wcap=4):
    return (kc.VerifyPlan.allocate(vcap, library=library), kc.WritePlan.allocate(wcap, library=library),
            kc.PlanStatus.allocate(library=library), kc.PlanWorkspace.allocate(4, library=library))


def plan_args(**override):
    vp, wp, st, ws = plans("torch")
    args = dict(req_pool_indices=torch.tensor([1]), prefix_lens=torch.tensor([3]), extend_seq_lens=torch.tensor([1]),
                req_to_token=torch.arange(32, dtype=torch.int32).reshape(4, 8), verify_plan=vp, write_plan=wp,
                status=st, workspace=ws)
    args.update(override)
    return args


def test_torch_takes_the_exchange_route_when_it_publishes_one_and_numpy_never_pretends_to():
    t = torch.zeros(4, dtype=torch.int64)
    route = "exchange" if EXCHANGE else "dlpack_or_buffer"
    assert _core.array_import_route(t, False) == route
    assert _core.array_import_route(t, True) == route
    assert _core.array_import_route(np.zeros(4, np.int64), False) == "dlpack_or_buffer"


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.int16, torch.uint8])
def test_wrong_dtype_is_a_type_error_naming_the_argument(dtype):
    with pytest.raises(TypeError, match=r"kvcanary\.plan: prefix_lens must have dtype int64, got"):
        kc.plan(**plan_args(prefix_lens=torch.tensor([3], dtype=dtype)))


def test_wrong_rank_and_strides_are_value_errors():
    with pytest.raises(ValueError, match=r"prefix_lens must be 1-D, got shape \(1, 1\)"):
        kc.plan(**plan_args(prefix_lens=torch.zeros(1, 1, dtype=torch.int64)))
    with pytest.raises(ValueError, match=r"prefix_lens must be 1-D, got shape \(1, 1, 1\)"):
        kc.plan(**plan_args(prefix_lens=torch.zeros(1, 1, 1, dtype=torch.int64)))
    with pytest.raises(ValueError, match=r"prefix_lens must be 1-D, got shape \(1, 2, 1, 3, \.\.\. \(6-D\)\)"):
        kc.plan(**plan_args(prefix_lens=torch.zeros(1, 2, 1, 3, 1, 1, dtype=torch.int64)))
    with pytest.raises(ValueError, match=r"req_pool_indices must be contiguous, got strides \(2,\)"):
        kc.plan(**plan_args(req_pool_indices=torch.zeros(4, dtype=torch.int64)[::2]))
    with pytest.raises(ValueError, match=r"req_to_token must have contiguous rows \(column stride 1\), got strides \(1, 4\) elements"):
        kc.plan(**plan_args(req_to_token=torch.zeros(8, 4, dtype=torch.int32).T))
    with pytest.raises(ValueError, match=r"req_to_token must be 2-D"):
        kc.plan(**plan_args(req_to_token=torch.zeros(8, dtype=torch.int32)))


def test_views_with_an_offset_and_a_row_stride_are_read_where_they_point():
    # Row 1 of a padded table, reached through a storage offset (req_pool_indices) and a row stride of 12.
    table = torch.zeros(4, 12, dtype=torch.int32)
    table[:, :8] = torch.arange(32, dtype=torch.int32).reshape(4, 8)
    rows = torch.tensor([7, 1, 7], dtype=torch.int64)
    args = plan_args(req_pool_indices=rows[1:2], req_to_token=table[:, :8])
    kc.plan(**args)
    vp = args["verify_plan"]
    assert vp.verify_slot_indices[:3].tolist() == [8, 9, 10]


def test_zero_dim_scalars_and_outputs_land_in_the_callers_tensors():
    n = torch.zeros((), dtype=torch.int32)
    e = lambda: torch.zeros(16, dtype=torch.int64)  # noqa: E731
    vp = kc.VerifyPlan(verify_slot_indices=e(), verify_expected_tokens=e(), verify_expected_positions=e(),
                       verify_prev_slot_indices=e(), verify_num_valid=n, enable=torch.zeros(1, dtype=torch.int32))
    pointer = vp.verify_slot_indices.data_ptr()
    kc.plan(**plan_args(verify_plan=vp))
    assert int(n) == 3 and int(vp.enable[0]) == 1
    assert vp.verify_slot_indices.data_ptr() == pointer and vp.verify_slot_indices[:3].tolist() == [8, 9, 10]


def test_an_int32_tensor_for_an_int64_output_raises_and_is_never_filled():
    out = torch.full((16,), 7, dtype=torch.int32)
    e = lambda: torch.zeros(16, dtype=torch.int64)  # noqa: E731
    with pytest.raises(TypeError, match=r"verify_slot_indices must have dtype int64, got int32"):
        kc.VerifyPlan(verify_slot_indices=out, verify_expected_tokens=e(), verify_expected_positions=e(),
                      verify_prev_slot_indices=e(), verify_num_valid=torch.zeros(1, dtype=torch.int32),
                      enable=torch.zeros(1, dtype=torch.int32))
    assert (out == 7).all()


def test_a_subclass_of_tensor_is_taken_as_a_tensor():
    rows = torch.nn.Parameter(torch.tensor([1]), requires_grad=False)
    args = plan_args(req_pool_indices=rows)
    kc.plan(**args)
    assert args["verify_plan"].verify_slot_indices[:3].tolist() == [8, 9, 10]


class NotAnExchangeTable:
    __dlpack_c_exchange_api__ = 5


def test_an_object_that_claims_an_exchange_table_but_has_none_is_refused_cleanly():
    with pytest.raises(TypeError, match=r"kvcanary\.plan: prefix_lens must be an array"):
        kc.plan(**plan_args(prefix_lens=NotAnExchangeTable()))


def test_a_capsule_under_another_name_is_not_taken_for_a_table():
    make = ctypes.pythonapi.PyCapsule_New
    make.restype, make.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    version = (ctypes.c_uint32 * 4)(1, 3, 0, 0)  # a header that would pass the version check
    Fake = type("Fake", (), {"__dlpack_c_exchange_api__": make(ctypes.addressof(version), b"other_api", None)})
    with pytest.raises(TypeError, match=r"kvcanary\.plan: prefix_lens must be an array"):
        kc.plan(**plan_args(prefix_lens=Fake()))


def test_a_step_on_torch_tensors_equals_the_same_step_on_numpy():
    def step(library, to_array):
        vp, wp, st, ws = plans(library, vcap=64)
        kc.plan(req_pool_indices=to_array([1, 2], "int64"), prefix_lens=to_array([3, 0], "int64"),
                extend_seq_lens=to_array([2, 3], "int64"),
                req_to_token=to_array(np.arange(32).reshape(4, 8).tolist(), "int32"),
                verify_plan=vp, write_plan=wp, status=st, workspace=ws)
        buf = kc.CanaryBuffer.allocate(64, library=library)
        ring = kc.ViolationRing.allocate(8, library=library)
        kc.write(write_plan=wp, input_ids=to_array([7, 8, 9, 10, 11], "int64"),
                 positions=to_array([3, 4, 0, 1, 2], "int64"), out_cache_loc=to_array([11, 12, 16, 17, 18], "int64"),
                 buffer=buf, ring=ring, chain_position_assert=to_array([1], "int32"))
        kc.verify(verify_plan=vp, buffer=buf, ring=ring)
        return bytes(np.asarray(buf.records).tobytes()), np.asarray(ring.rows).tolist(), vp.verify_slot_indices[:8].tolist()

    with_numpy = step(None, lambda v, d: np.array(v, dtype=d))
    with_torch = step("torch", lambda v, d: torch.tensor(v, dtype=getattr(torch, d)))
    assert with_torch == with_numpy


def test_bound_plans_on_numpy_and_torch_are_interchangeable_in_one_call():
    vp, wp, st, ws = bound_plan(16, 4)
    kc.plan(**plan_args(verify_plan=vp, write_plan=wp, status=st, workspace=ws))
    assert vp.verify_slot_indices[:3].tolist() == [8, 9, 10]


@pytest.mark.parametrize("make", [lambda: torch.zeros(1, dtype=torch.int64, device="meta"),
                                  lambda: torch.zeros(1, dtype=torch.int64).to_sparse()], ids=["meta", "sparse"])
def test_tensors_without_memory_to_describe_are_type_errors(make):
    with pytest.raises(TypeError, match=r"kvcanary\.plan: prefix_lens must be an array"):
        kc.plan(**plan_args(prefix_lens=make()))


def test_an_expanded_tensor_is_not_contiguous():
    with pytest.raises(ValueError, match=r"prefix_lens must be contiguous, got strides \(0,\) elements"):
        kc.plan(**plan_args(prefix_lens=torch.zeros(1, dtype=torch.int64).expand(4)))
