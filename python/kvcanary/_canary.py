"""kvcanary.Canary: the engine-facing runtime (kvcanary::Canary, docs/runtime.md) from Python.

The config mirrors kvcanary::CanaryConfig field for field; the tables are the engine's own arrays (used in
place, never copied); a step's batch is a bound ForwardBatch, so a step call imports nothing. See
docs/python.md, "The runtime".
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _core
from ._api import CanaryBuffer, CanaryViolation, RealKvMode, RealKvSource, _handle, _integer

_REPORT_MODES = {"none": 0, "log": 1, "raise": 2}
_REPORT_FORMATS = {"one-line": False, "multi-line": True}
_REAL_KV_MODES = {"none": 0, "partial": 1, "all": 2}
_PLAN_ALGORITHMS = {"default": 0, "portable": 1, "cuda-persistent": 2}
_CANARY_ALGORITHMS = {"default": 0, "portable": 1, "cuda": 2}
# HeadVerify, docs/runtime.md
_HEAD_VERIFIES = {"default": 0, "from-plan": 1, "from-inputs": 2, "from-inputs-after-plan": 3}
# PumpSnapshot, docs/runtime.md
_PUMP_SNAPSHOTS = {"default": 0, "side-stream-copies": 1, "kernel": 2, "in-graph": 3, "beside-forward": 4,
                   "with-next-plan": 5}
_KV_RECORDS = {"default": 0, "separate": 1, "interleaved": 2}  # KvRecords, docs/runtime.md
GROUPS = ("target", "swa", "draft")


@dataclass
class EngineDimensions:
    """The engine's sizes, from which Capacities are derived (kvcanary::EngineDimensions)."""

    pool_slots: int = 0            # KV slots of the full-attention pool
    swa_pool_slots: int = 0        # KV slots of the sliding-window pool (0: pool_slots)
    max_running_requests: int = 0  # rows of req_to_token
    max_context_len: int = 0       # columns of req_to_token
    cuda_graph_max_bs: int = 0     # the largest batch a captured graph runs (0: none)
    max_cached_prefixes: int = 0   # the most entries one sweep() gets (0: max_running_requests)


@dataclass
class Capacities:
    """Buffer sizes; -1 derives a field from EngineDimensions (kvcanary::Capacities)."""

    verify_capacity: int = -1     # verify entries of one pass per group (derived: 3 x the group's pool slots)
    write_req_capacity: int = -1  # requests of one forward (derived: max(cuda_graph_max_bs, max_running_requests))
    sweep_req_capacity: int = -1  # entries of one sweep() (derived: max_cached_prefixes, else max_running_requests)


@dataclass
class CanaryConfig:
    """kvcanary::CanaryConfig (runtime/config.hpp), with the same names, defaults and meaning; enums as
    strings. sink: None (the 'kvcanary' logger), a logging.Logger, or a callable taking one line."""

    report_mode: str = "log"              # 'none', 'log' or 'raise' (CanaryViolation / CanaryNotRunningError)
    report_format: str = "one-line"       # or 'multi-line' (the original system's form)
    keep_never_written: bool = False
    sink: Union[None, logging.Logger, Callable[[str], Any]] = None
    ring_capacity: int = 1024
    pump_rows_per_step: int = 64
    sweep_interval: int = 0
    sweep_swa_group: bool = True
    real_kv_mode: Union[str, int] = "none"  # 'none', 'partial', 'all' (or a RealKvMode)
    tail_pass: bool = False
    write_input_assert: bool = False
    verify_token_assert: bool = False
    chain_position_assert: bool = True
    request_identities: bool = False      # batches and sweeps carry identities (SPEC-CANARY §11.7)
    stats_every_n_steps: int = 0
    health_check_every_n_steps: int = 100
    swa_divergence_every_n_steps: int = 0
    swa_group: bool = False
    swa_window: int = 0
    draft_group: bool = False
    dimensions: EngineDimensions = field(default_factory=EngineDimensions)
    capacities: Capacities = field(default_factory=Capacities)
    plan_algorithm: str = "default"       # 'default', 'portable', 'cuda-persistent'
    canary_algorithm: str = "default"     # 'default', 'portable', 'cuda'
    # 'default' (CUDA: from-inputs up to 8 batch rows, else from-inputs-after-plan; host: from-plan), 'from-plan',
    # 'from-inputs', 'from-inputs-after-plan'
    head_verify: str = "default"
    # 'default', 'side-stream-copies', 'kernel', 'in-graph', 'beside-forward', 'with-next-plan'
    # (docs/runtime.md)
    pump_snapshot: str = "default"
    kv_records: str = "default"           # 'default' (CUDA: interleaved; host: separate), 'separate', 'interleaved'


def _int(value, name: str) -> int:
    # A Python int only (not numpy's), inside the C++ config's int64; its own range checks come after.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"kvcanary.Canary: config.{name} must be an int, got {type(value).__name__}")
    return _integer(value, "Canary", f"config.{name}")


def _bool(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"kvcanary.Canary: config.{name} must be a bool, got {type(value).__name__}")
    return value


def _choice(value, name: str, choices: dict):
    if isinstance(value, str) and value in choices:
        return choices[value]
    if not isinstance(value, str):
        raise TypeError(f"kvcanary.Canary: config.{name} must be a str, got {type(value).__name__}")
    raise ValueError(f"kvcanary.Canary: config.{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _real_kv_mode(value) -> int:
    if isinstance(value, RealKvMode):
        return int(value)
    if isinstance(value, str):
        return _choice(value.lower(), "real_kv_mode", _REAL_KV_MODES)
    raise TypeError(f"kvcanary.Canary: config.real_kv_mode must be 'none', 'partial', 'all' or a RealKvMode, "
                    f"got {type(value).__name__}")


_LEVELS = (("kv_canary error", logging.ERROR), ("[canary]", logging.INFO), ("kv_canary_swa_divergence", logging.INFO))


def _level(line: str) -> int:
    for prefix, level in _LEVELS:
        if line.startswith(prefix):
            return level
    return logging.WARNING


def _sink(value) -> Callable[[str], Any]:
    """Every line the runtime says: violations and warnings at WARNING, "canary not running" at ERROR, the
    stats and SWA divergence lines at INFO."""
    if value is None:
        value = logging.getLogger("kvcanary")
    if isinstance(value, logging.Logger):
        logger = value
        return lambda line: logger.log(_level(line), line)
    if callable(value):
        return value
    raise TypeError(f"kvcanary.Canary: config.sink must be None, a logging.Logger or a callable, "
                    f"got {type(value).__name__}")


def _config_dict(c: CanaryConfig) -> dict:
    if not isinstance(c, CanaryConfig):
        raise TypeError(f"kvcanary.Canary: config must be a kvcanary.CanaryConfig, got {type(c).__name__}")
    if not isinstance(c.dimensions, EngineDimensions):
        raise TypeError("kvcanary.Canary: config.dimensions must be a kvcanary.EngineDimensions")
    if not isinstance(c.capacities, Capacities):
        raise TypeError("kvcanary.Canary: config.capacities must be a kvcanary.Capacities")
    d = {
        "report_mode": _choice(c.report_mode, "report_mode", _REPORT_MODES),
        "multi_line": _choice(c.report_format, "report_format", _REPORT_FORMATS),
        "real_kv_mode": _real_kv_mode(c.real_kv_mode),
        "plan_algorithm": _choice(c.plan_algorithm, "plan_algorithm", _PLAN_ALGORITHMS),
        "canary_algorithm": _choice(c.canary_algorithm, "canary_algorithm", _CANARY_ALGORITHMS),
        "pump_snapshot": _choice(c.pump_snapshot, "pump_snapshot", _PUMP_SNAPSHOTS),
        "head_verify": _choice(c.head_verify, "head_verify", _HEAD_VERIFIES),
        "kv_records": _choice(c.kv_records, "kv_records", _KV_RECORDS),
    }
    for name in ("keep_never_written", "sweep_swa_group", "tail_pass", "write_input_assert", "verify_token_assert",
                 "chain_position_assert", "request_identities", "swa_group", "draft_group"):
        d[name] = _bool(getattr(c, name), name)
    for name in ("ring_capacity", "pump_rows_per_step", "sweep_interval", "stats_every_n_steps",
                 "health_check_every_n_steps", "swa_divergence_every_n_steps", "swa_window"):
        d[name] = _int(getattr(c, name), name)
    for part in (c.dimensions, c.capacities):
        prefix = "dimensions" if part is c.dimensions else "capacities"
        for f in dataclasses.fields(part):
            d[f.name] = _int(getattr(part, f.name), f"{prefix}.{f.name}")
    return d


# ---- bound batch objects ----

class ForwardTokens:
    """One group's tokens of a forward (kvcanary::ForwardTokens): int64 vectors of one length."""

    __slots__ = ("input_ids", "positions", "out_cache_loc", "expected_input_ids", "expected_positions", "_handle")

    def __init__(self, *, input_ids, positions, out_cache_loc, expected_input_ids=None, expected_positions=None):
        self._handle = _core.ForwardTokensHandle(input_ids, positions, out_cache_loc, expected_input_ids,
                                                 expected_positions)
        self.input_ids = input_ids
        self.positions = positions
        self.out_cache_loc = out_cache_loc
        self.expected_input_ids = expected_input_ids
        self.expected_positions = expected_positions


def _tokens(value, name: str):
    if value is None:
        return None
    return _handle(value, ForwardTokens, "ForwardBatch", name)


class ForwardBatch:
    """One forward (kvcanary::ForwardBatch): the plan's batch (int64 [bs]) and each enabled group's tokens;
    identities (int64 [bs]) exactly when config.request_identities (SPEC-CANARY §11.7).
    Checked once: an engine that refills the same arrays in place (a CUDA graph's static buffers) builds it
    once and passes it every step."""

    __slots__ = ("req_pool_indices", "prefix_lens", "extend_seq_lens", "tokens", "swa_tokens", "draft_tokens",
                 "expected_tokens_valid_lens", "identities", "_handle")

    def __init__(self, *, req_pool_indices, prefix_lens, extend_seq_lens, tokens: ForwardTokens,
                 swa_tokens: Optional[ForwardTokens] = None, draft_tokens: Optional[ForwardTokens] = None,
                 expected_tokens_valid_lens=None, identities=None):
        self._handle = _core.ForwardBatchHandle(req_pool_indices, prefix_lens, extend_seq_lens,
                                                _tokens(tokens, "tokens"), _tokens(swa_tokens, "swa_tokens"),
                                                _tokens(draft_tokens, "draft_tokens"), expected_tokens_valid_lens,
                                                identities)
        self.req_pool_indices = req_pool_indices
        self.prefix_lens = prefix_lens
        self.extend_seq_lens = extend_seq_lens
        self.tokens = tokens
        self.swa_tokens = swa_tokens
        self.draft_tokens = draft_tokens
        self.expected_tokens_valid_lens = expected_tokens_valid_lens
        self.identities = identities

    @property
    def batch_size(self) -> int:
        return self._handle.batch_size


class CachedPrefixes:
    """A sweep's prefix-cache entries (kvcanary::CachedPrefixes): pool row r holds lengths[r] tokens;
    identities (int64 [n]: each entry's, as the engine keys it) exactly when config.request_identities."""

    __slots__ = ("pool_rows", "lengths", "expected_tokens_valid_lens", "identities", "_handle")

    def __init__(self, *, pool_rows, lengths, expected_tokens_valid_lens=None, identities=None):
        self._handle = _core.CachedPrefixesHandle(pool_rows, lengths, expected_tokens_valid_lens, identities)
        self.pool_rows = pool_rows
        self.lengths = lengths
        self.expected_tokens_valid_lens = expected_tokens_valid_lens
        self.identities = identities


@dataclass(frozen=True)
class GroupArrays:
    """One group's engine bytes (kvcanary::GroupViews): the real-KV sources its records fingerprint (up to
    4 per half), and optionally the engine's own canary records (else the Canary allocates them)."""

    real_kv_k: Sequence[RealKvSource] = ()
    real_kv_v: Sequence[RealKvSource] = ()
    k: Any = None
    v: Any = None


def _group(value, name: str):
    if value is None:
        return None
    if not isinstance(value, GroupArrays):
        raise TypeError(f"kvcanary.Canary: {name} must be a kvcanary.GroupArrays, got {type(value).__name__}")

    def sources(items, half):
        items = tuple(items)
        for s in items:
            if not isinstance(s, RealKvSource):
                raise TypeError(f"kvcanary.Canary: {name}.{half} entries must be kvcanary.RealKvSource")
        if not items:
            return None
        return _core.RealKvHandle(0, [(s.array, int(s.page_size), int(s.bytes_per_token), int(s.read_bytes))
                                      for s in items])

    return (sources(value.real_kv_k, "real_kv_k"), sources(value.real_kv_v, "real_kv_v"),
            None if value.k is None else CanaryBuffer(value.k)._handle,
            None if value.v is None else CanaryBuffer(value.v)._handle)


# ---- the report ----

@dataclass
class RuntimeReport:
    """What Canary.end_step() / flush() read (kvcanary::RuntimeReport): every group's new rows and their
    lines, the totals summed over the groups, and what the host checks said."""

    step: int
    rows: List[Tuple[int, ...]]
    lines: List[str]
    row_groups: List[str]           # the group of each row: 'target', 'swa' or 'draft'
    overflowed_groups: List[str]
    warnings: List[str]
    health_errors: List[str]        # "canary not running"
    info: List[str]                 # the stats and SWA divergence lines
    count: int
    capacity: int
    overflowed: bool
    lost_to_overflow: int
    newly_lost: int
    rows_read: int
    dropped: int
    dropped_launch_tags: List[int]
    slot_run_counter: int
    kernel_run_counter: int
    summary: str = field(repr=False)


class CanaryNotRunningError(RuntimeError):
    """Raised by Canary.end_step() in report_mode='raise' when the health check failed (a pass launched but
    not run: a graph replayed without the canary's nodes, the passes on another stream)."""

    def __init__(self, message: str, report: RuntimeReport):
        super().__init__(message)
        self.report = report


def _device(device) -> Optional[str]:
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError(f"kvcanary.Canary: device must be None, 'cpu', 'cuda[:N]', an int or a torch.device, "
                        f"got {device!r}")
    if isinstance(device, int):
        return f"cuda:{device}"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        return str(device)
    if isinstance(device, str):
        return device
    raise TypeError(f"kvcanary.Canary: device must be None, 'cpu', 'cuda[:N]', an int or a torch.device, "
                    f"got {type(device).__name__}")


class Canary:
    """The whole canary of an engine (kvcanary::Canary): it owns every buffer, runs the passes of a forward
    on the engine's place, and pumps the violation rings to the host at the step boundary.

        canary = kvcanary.Canary(config, req_to_token=req_to_token)   # allocates everything
        each step:
            canary.before_forward(batch)   # plan + head verify + head write, every group
            ... the model writes the KV cache ...
            canary.after_forward(batch)    # tail verify + re-stamp with real-KV fingerprints (tail_pass)
            canary.sweep(cached)           # when due (sweep_interval)
            canary.end_step()              # reports the previous step's snapshot
        canary.flush()                     # at shutdown

    It runs where req_to_token lives (numpy / torch CPU: a host backend, `backend` picks it; CUDA: on
    `stream`, default the framework's current stream at construction: capture with
    torch.cuda.graph(g, stream=...) on that stream). Keyword arguments after the tables override the
    config's fields (Canary(req_to_token=t, report_mode='raise')).
    """

    __slots__ = ("_core", "_config", "_tables", "_last_batch")

    def __init__(self, config: Optional[CanaryConfig] = None, *, req_to_token, req_to_verify_expected_tokens=None,
                 full_to_swa_index_mapping=None, target: Optional[GroupArrays] = None,
                 swa: Optional[GroupArrays] = None, draft: Optional[GroupArrays] = None, device=None,
                 backend: Optional[str] = None, stream=None, **overrides):
        if config is None:
            config = CanaryConfig()
        elif not isinstance(config, CanaryConfig):
            raise TypeError(f"kvcanary.Canary: config must be a kvcanary.CanaryConfig, got {type(config).__name__}")
        if overrides:
            known = {f.name for f in dataclasses.fields(CanaryConfig)}
            unknown = sorted(set(overrides) - known)
            if unknown:
                raise TypeError(f"kvcanary.Canary: unknown config field(s) {', '.join(unknown)}")
            config = dataclasses.replace(config, **overrides)
        values = _config_dict(config)
        sink = None if values["report_mode"] == 0 else _sink(config.sink)
        self._config = config
        self._last_batch = None
        self._tables = (req_to_token, req_to_verify_expected_tokens, full_to_swa_index_mapping)
        self._core = _core.CanaryHandle(values, sink, req_to_token, req_to_verify_expected_tokens,
                                        full_to_swa_index_mapping, _group(target, "target"), _group(swa, "swa"),
                                        _group(draft, "draft"), _device(device), backend, stream)

    # ---- passes (asynchronous on CUDA, finished on return on the host; capturable) ----

    def before_forward(self, batch: ForwardBatch) -> None:
        """Every group: plan, then the head verify of K and V, then the head write of K and V."""
        self._core.before_forward(_handle(batch, ForwardBatch, "Canary.before_forward", "batch"))
        self._last_batch = batch  # the SWA divergence report reads it at end_step()

    def after_forward(self, batch: ForwardBatch) -> None:
        """The groups with real-KV sources (tail_pass): verify, then re-stamp with the real KV's fingerprints."""
        self._core.after_forward(_handle(batch, ForwardBatch, "Canary.after_forward", "batch"))

    def sweep(self, cached: CachedPrefixes) -> None:
        """A verify-only pass over the prefix cache (after after_forward, before the next before_forward)."""
        self._core.sweep(_handle(cached, CachedPrefixes, "Canary.sweep", "cached"))

    # ---- the host boundary (never inside a capture) ----

    def end_step(self, forwards: int = 1) -> RuntimeReport:
        """The end of a step that ran `forwards` forwards (executed or replayed): reports the previous
        end_step()'s snapshot and stages this one's. report_mode='raise': CanaryNotRunningError, then
        CanaryViolation; the report is also last_report."""
        if isinstance(forwards, bool) or not isinstance(forwards, int):
            raise TypeError(f"kvcanary.Canary.end_step: forwards must be an int, got {type(forwards).__name__}")
        return self._reporting(lambda: self._core.end_step(forwards))

    def flush(self) -> RuntimeReport:
        """Waits for the device and reports every row not yet reported (shutdown, tests)."""
        return self._reporting(self._core.flush)

    def rearm(self) -> RuntimeReport:
        """flush(), then empties every ring (the next violations take its first rows again)."""
        return self._reporting(self._core.rearm)

    def _reporting(self, call) -> RuntimeReport:
        try:
            return RuntimeReport(*call())
        except _core.NotRunningRaised as error:
            raise CanaryNotRunningError(str(error), self.last_report) from None
        except _core.ViolationRaised:
            raise CanaryViolation(self.last_report) from None

    def set_chain_position_assert(self, on: bool) -> None:
        """The write's chain-position assert (off during an engine's warmup with synthetic positions)."""
        if not isinstance(on, bool):
            raise TypeError(f"kvcanary.Canary.set_chain_position_assert: on must be a bool, got {type(on).__name__}")
        self._core.set_chain_position_assert(on)

    # ---- state ----

    @property
    def last_report(self) -> RuntimeReport:
        """What the last end_step() / flush() reported (also when it raised)."""
        return RuntimeReport(*self._core.last_report())

    @property
    def config(self) -> CanaryConfig:
        return self._config

    @property
    def capacities(self) -> Capacities:
        """The capacities in use (derived fields filled)."""
        return Capacities(*self._core.capacities)

    @property
    def groups(self) -> Tuple[str, ...]:
        return tuple(name for i, name in enumerate(GROUPS) if self._core.group_on(i))

    @property
    def steps(self) -> int:
        return self._core.steps

    @property
    def sweeps(self) -> int:
        return self._core.sweeps

    @property
    def device(self) -> str:
        return self._core.device
