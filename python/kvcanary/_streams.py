"""Which CUDA stream a call runs on.

``stream=None`` means the current stream of the arrays' framework on their device: torch's
``torch.cuda.current_stream(device)`` when torch is loaded (so calls follow ``torch.cuda.stream(s)`` and
``torch.cuda.graph``), else CuPy's current stream, else the legacy default stream (0). A given stream may be
an int (a ``cudaStream_t``), an object with ``cuda_stream`` (torch) or ``ptr`` (CuPy), or one with
``__cuda_stream__`` (returns ``(version, handle)``).
"""

from __future__ import annotations

import sys


def resolve(stream, device_id: int) -> int:
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_stream(device_id).cuda_stream)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            with cupy.cuda.Device(device_id):
                return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, bool):
        raise TypeError(f"kvcanary: stream must be a CUDA stream or None, got {stream!r}")
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    raise TypeError(f"kvcanary: stream must be an int, a torch/CuPy stream or None, got {type(stream).__name__}")
