"""Imports the original system's torch references and test fixtures (sglang 0.5.23, read for facts and
tested against, never copied into kvcanary) without the rest of SGLang.

The root of an unpacked sglang wheel (the folder holding sglang/) comes from $KVCANARY_SGLANG_ROOT;
scripts/deps/setup-sglang-original.sh downloads and unpacks it into a cache and prints that root. Only
sglang/kernels/ops/kv_canary/ and sglang/test/kernels/kv_canary/ are loaded: their parent packages become
bare namespace modules (their __init__ files pull in all of SGLang), and the three modules of other
SGLang packages that they import at module level get stubs (kernel registry, kernel spec, JIT loader:
used only by the CUDA paths, never by the torch references).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path


def root() -> Path | None:
    value = os.environ.get("KVCANARY_SGLANG_ROOT")
    if value and (Path(value) / "sglang" / "kernels" / "ops" / "kv_canary" / "verify_ref.py").is_file():
        return Path(value)
    return None


def _namespace(name: str, path: Path) -> None:
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    sys.modules[name] = module


def _stub(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def load():
    """Returns a namespace with the original's modules: consts, verify, write, plan_ref, verify_ref,
    write_ref, fixtures, helpers."""
    base = root()
    if base is None:
        raise RuntimeError("the original sglang package is not available: set KVCANARY_SGLANG_ROOT "
                           "(scripts/deps/setup-sglang-original.sh prints it)")
    s = base / "sglang"
    for name, path in (("sglang", s), ("sglang.kernels", s / "kernels"), ("sglang.kernels.ops", s / "kernels" / "ops"),
                       ("sglang.kernels.ops.kv_canary", s / "kernels" / "ops" / "kv_canary"),
                       ("sglang.kernels.jit", s / "kernels" / "jit"), ("sglang.test", s / "test"),
                       ("sglang.test.kernels", s / "test" / "kernels"),
                       ("sglang.test.kernels.kv_canary", s / "test" / "kernels" / "kv_canary")):
        _namespace(name, path)

    def unavailable(*args, **kwargs):
        raise RuntimeError("the original's CUDA JIT path is not available in this test")

    _stub("sglang.kernels.jit.utils", cache_once=lambda f: f, load_jit=unavailable, make_cpp_args=unavailable)
    _stub("sglang.kernels.registry", register_kernel=lambda *a, **k: None)
    _stub("sglang.kernels.spec", KernelBackend=types.SimpleNamespace(JIT="jit", TRITON="triton"),
          KernelSpec=lambda **k: k)
    ops = "sglang.kernels.ops.kv_canary."
    tests = "sglang.test.kernels.kv_canary."
    return types.SimpleNamespace(
        consts=importlib.import_module(ops + "consts"),
        verify=importlib.import_module(ops + "verify"),
        write=importlib.import_module(ops + "write"),
        plan_ref=importlib.import_module(ops + "plan_ref"),
        verify_ref=importlib.import_module(ops + "verify_ref"),
        write_ref=importlib.import_module(ops + "write_ref"),
        fixtures=importlib.import_module(tests + "_fixtures"),
        helpers=importlib.import_module(tests + "_canary_helpers"),
    )
