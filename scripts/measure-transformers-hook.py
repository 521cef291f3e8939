#!/usr/bin/env python3
"""measure-transformers-hook.py — the transformers integration's own host work per full-batch decode step, on the
CPU (tiny random-weight Llama, fp32): the median host ms of the canary's two calls per step, or (--count) the aten
kernels they launch and the calls in them that would wait for a CUDA device. The steps are those of
transformers-canary-run.py's overhead rows (its overhead() runs them).

  build-py/venv-hf/bin/python scripts/measure-transformers-hook.py [--contexts 128,1024] [--batches 1,16,64]
      [--stub-stages] [--count] [--per-step] [--integration DIR]

--stub-stages   kvcanary.plan / verify / write as no-ops: the integration's work without the stages' kernels
--count         instead of times: aten ops per step (a TorchDispatchMode; views are not kernels) and the waits a
                CUDA device would impose: torch.tensor(..., device=...) (a blocking copy), int(t), t.tolist(), t.cpu()
--per-step      the canary reads its rings every step, as in mode 'log' (the overhead rows do not)
--integration   a directory holding another transformers.py and _stages.py to measure instead of the installed
                ones, e.g. from an older commit: git show C:python/kvcanary/integrations/transformers.py > DIR/...
Run it with OMP_NUM_THREADS=1 on a shared machine; docs/transformers.md has numbers.
"""

import argparse
import collections
import dataclasses
import importlib.util
import pathlib
import sys
import types

import torch

VIEWS = {"slice", "select", "view", "expand", "unsqueeze", "alias", "as_strided", "t", "transpose", "detach",
         "lift_fresh", "_reshape_alias", "squeeze"}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Counter:
    """Counts inside the canary's calls of full-batch decode steps only."""

    def __init__(self, kvt, batch):
        from torch.utils._python_dispatch import TorchDispatchMode

        self.ops, self.waits, self.steps, self.inside = collections.Counter(), collections.Counter(), 0, False
        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.ops[func.overloadpacket.__name__] += 1
                return func(*args, **(kwargs or {}))

        self.originals = [(torch, "tensor", torch.tensor)]
        self.originals += [(torch.Tensor, n, getattr(torch.Tensor, n)) for n in ("tolist", "__int__", "cpu")]
        self.originals += [(kvt.Handle, n, getattr(kvt.Handle, n)) for n in ("_before_forward", "_after_forward")]

        def tensor(*a, _orig=torch.tensor, **k):
            if counter.inside and k.get("device") is not None:
                counter.waits["torch.tensor(list, device=...)"] += 1
            return _orig(*a, **k)
        torch.tensor = tensor
        for name, label in (("tolist", "t.tolist()"), ("__int__", "int(t)"), ("cpu", "t.cpu()")):
            def read(self, *a, _orig=getattr(torch.Tensor, name), _label=label, **k):
                if counter.inside:
                    counter.waits[_label] += 1
                return _orig(self, *a, **k)
            setattr(torch.Tensor, name, read)
        for name in ("_before_forward", "_after_forward"):
            def hook(handle, runner, bd, *a, _orig=getattr(kvt.Handle, name), _name=name):
                futures = list(runner.inputs_and_outputs.requests_in_batch)
                if (not handle.config.guard or len(futures) != batch
                        or any(int(f.query_length) != 1 for f in futures)):
                    return _orig(handle, runner, bd, *a)
                counter.steps += _name == "_before_forward"
                counter.inside = True
                try:
                    with Mode():
                        return _orig(handle, runner, bd, *a)
                finally:
                    counter.inside = False
            setattr(kvt.Handle, name, hook)

    def restore(self):
        for owner, name, original in self.originals:
            setattr(owner, name, original)

    def line(self):
        n = max(self.steps, 1)
        kernels = {k: v for k, v in self.ops.items() if k not in VIEWS}
        return (f"{self.steps} steps; per step {sum(kernels.values()) / n:.1f} kernels ("
                + ", ".join(f"{k} {v / n:g}" for k, v in sorted(kernels.items(), key=lambda x: -x[1]))
                + f"), {sum(self.ops.values()) / n:.1f} aten ops with views; "
                + f"device waits {sum(self.waits.values()) / n:g}"
                + "".join(f", {k} {v / n:g}" for k, v in self.waits.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", default="128,1024")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--stub-stages", action="store_true")
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--per-step", action="store_true", help="CanaryConfig(per_step=True): read the rings every step")
    ap.add_argument("--integration", default=None)
    args = ap.parse_args()
    scripts = pathlib.Path(__file__).resolve().parent
    run = load("transformers_canary_run", scripts / "transformers-canary-run.py")
    if args.integration:
        package = types.ModuleType("kvcanary_measured_integration")  # a package over DIR, for its relative imports
        package.__path__ = [str(pathlib.Path(args.integration).resolve())]
        sys.modules[package.__name__] = package
        run.kvt = load(package.__name__ + ".transformers", pathlib.Path(package.__path__[0]) / "transformers.py")
        times = run.kvt.Handle.step_times_ms
        if "host" not in (times.__doc__ or ""):
            # before 36e56bc there was no host column; on the CPU the stream times are the host clock's
            run.kvt.Handle.step_times_ms = lambda handle: [x + (x[3],) for x in times(handle)]
    if args.per_step:  # the overhead rows run per_step=False
        attach = run.kvt.attach
        run.kvt.attach = lambda model, config: attach(model, dataclasses.replace(config, per_step=True))
    if args.stub_stages:
        import kvcanary
        for name in ("plan", "verify", "write"):
            setattr(kvcanary, name, lambda **kw: None)
    model = run.build("tiny", "cpu", torch.float32)
    print(f"# {run.kvt.__file__}; stages {'stubbed' if args.stub_stages else 'run'}; per_step {args.per_step}; "
          f"torch {torch.__version__}")
    for context in [int(c) for c in args.contexts.split(",")]:
        for batch in [int(b) for b in args.batches.split(",")]:
            counter = Counter(run.kvt, batch) if args.count else None
            try:
                row = run.overhead(model, batch, context, args.decode, 1000, "cpu", "partial")
            finally:
                if counter:
                    counter.restore()
            if counter:
                print(f"context {context} batch {batch}: {counter.line()}", flush=True)
            else:
                print(f"context {context} batch {batch}: {row.get('decode_steps_on')} decode steps, canary host ms "
                      f"median {row.get('canary_host_ms', float('nan')):.3f}, model ms median "
                      f"{row.get('model_ms', float('nan')):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
