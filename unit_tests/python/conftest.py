"""pytest setup of kvcanary's Python tests (docs/python.md): host tests run on every host backend of the
build; tests marked `gpu` need torch with a CUDA device and are skipped without one (the lead runs them on
the device machine: `pytest -m gpu unit_tests/python`)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs torch with a CUDA device")


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs torch with a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def host_backends():
    import kvcanary

    return [b for b in kvcanary.backends() if b != "cuda"]
