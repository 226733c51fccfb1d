"""Pipeline parallelism (Rust ``hcomm::pp``): ``group=None`` is the context's
pipeline group, whose ranks are the stages.

``send``/``recv`` carry the array's shape, element type and kind (numpy array
or torch tensor) with the data, so ``recv`` can return a new one of the same. The ``*_forward``/``*_backward`` transfers are
those of the Rust ``Pipeline``: forward and backward traffic use different tags,
the paired forms post both directions at once (no deadlock, 2 stages included),
and a transfer past either end of the pipeline is ``hcomm.Precondition``.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _group, _native
from ._errors import Mismatch, Precondition
from ._native import Comm

_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64]
_TORCH_DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int32", "uint32", "int64", "uint64", "bfloat16"]
#: Element type codes of torch tensors start here (numpy's are below).
_TORCH = 16
_MAX_DIMS = 32
_HEADER = 2 + _MAX_DIMS


def _is_torch(tensor: Any) -> bool:
    return type(tensor).__module__.startswith("torch")


def _code(tensor: Any) -> Optional[int]:
    if _is_torch(tensor):
        name = str(tensor.dtype)[len("torch."):]
        return _TORCH + _TORCH_DTYPES.index(name) if name in _TORCH_DTYPES else None
    return next((i for i, d in enumerate(_DTYPES) if tensor.dtype == d), None)


def _empty(code: int, shape: Tuple[int, ...]) -> Any:
    """A new array (numpy) or tensor (torch) of the element type ``code``."""
    if code >= _TORCH:
        import torch

        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[code - _TORCH]))
    return np.empty(shape, dtype=_DTYPES[code])


def _header(tensor: Any) -> np.ndarray:
    code = _code(tensor)
    if code is None:
        raise Precondition(f"precondition: pp.send: element type {tensor.dtype} is not supported")
    if tensor.ndim > _MAX_DIMS:
        raise Precondition(f"precondition: pp.send: {tensor.ndim} dimensions, at most {_MAX_DIMS}")
    h = np.zeros(_HEADER, dtype=np.int64)
    h[0], h[1] = code, tensor.ndim
    h[2 : 2 + tensor.ndim] = tensor.shape
    return h


def send(tensor: Any, dst: int, tag: int = 0, group: Optional[Comm] = None) -> None:
    """Sends ``tensor`` (with its shape and element type) to stage ``dst``."""
    g = _group(group, "pp")
    g.send(_header(tensor), dst, tag)
    g.send(tensor, dst, tag)


def recv(src: int, tag: int = 0, group: Optional[Comm] = None, out: Any = None) -> Any:
    """Receives what stage ``src`` sent with :func:`send`: a new array of the
    sender's shape and element type, or into ``out`` (whose length and element type
    must match the sender's: else ``hcomm.Mismatch`` on both sides)."""
    g = _group(group, "pp")
    h = np.zeros(_HEADER, dtype=np.int64)
    g.recv(h, src, tag)
    code, ndim = int(h[0]), int(h[1])
    known = 0 <= code < len(_DTYPES) or _TORCH <= code < _TORCH + len(_TORCH_DTYPES)
    if not (known and 0 <= ndim <= _MAX_DIMS):
        raise Mismatch(f"mismatch: pp.recv from stage {src}: the message is not a pp.send header")
    if out is None:
        out = _empty(code, tuple(int(n) for n in h[2 : 2 + ndim]))
    g.recv(out, src, tag)
    return out


def send_forward(t: Any, group: Optional[Comm] = None) -> None:
    """Sends activations to the next stage."""
    _native.pp_op("send_forward", _group(group, "pp"), t)


def recv_forward(t: Any, group: Optional[Comm] = None) -> Any:
    """Receives activations from the previous stage into ``t``; returns ``t``."""
    _native.pp_op("recv_forward", _group(group, "pp"), t)
    return t


def send_backward(t: Any, group: Optional[Comm] = None) -> None:
    """Sends gradients to the previous stage."""
    _native.pp_op("send_backward", _group(group, "pp"), t)


def recv_backward(t: Any, group: Optional[Comm] = None) -> Any:
    """Receives gradients from the next stage into ``t``; returns ``t``."""
    _native.pp_op("recv_backward", _group(group, "pp"), t)
    return t


def send_forward_recv_backward(act: Any, grad: Any, group: Optional[Comm] = None) -> Any:
    """Sends ``act`` to the next stage and receives ``grad`` from it, together."""
    _native.pp_op("send_forward_recv_backward", _group(group, "pp"), act, grad)
    return grad


def send_backward_recv_forward(grad: Any, act: Any, group: Optional[Comm] = None) -> Any:
    """Sends ``grad`` to the previous stage and receives ``act`` from it, together."""
    _native.pp_op("send_backward_recv_forward", _group(group, "pp"), grad, act)
    return act


__all__ = ["recv", "recv_backward", "recv_forward", "send", "send_backward", "send_backward_recv_forward",
           "send_forward", "send_forward_recv_backward"]
