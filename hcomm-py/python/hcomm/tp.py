"""Tensor parallelism (Rust ``hcomm::tp``): ``group=None`` is the context's TP group.

Shapes that disagree across ranks, a ``dim`` out of range, or a length along
``dim`` not divisible by the group size are ``hcomm.Precondition`` naming the
dimension.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _group, _native
from ._errors import Precondition
from ._native import Comm


def all_reduce(x: Any, group: Optional[Comm] = None) -> Any:
    """Sums ``x`` over the group, in place; returns ``x``."""
    return _native.tp_op("all_reduce", _group(group, "tp"), x)


def all_gather(x: Any, dim: int = -1, group: Optional[Comm] = None) -> Any:
    """The group's arrays concatenated along ``dim`` in group-rank order (a new array)."""
    return _native.tp_op("all_gather", _group(group, "tp"), x, dim)


def reduce_scatter(x: Any, dim: int = -1, group: Optional[Comm] = None) -> Any:
    """Sums over the group and keeps this rank's slice along ``dim`` (a new array)."""
    return _native.tp_op("reduce_scatter", _group(group, "tp"), x, dim)


def split(x: Any, dim: int = -1, group: Optional[Comm] = None) -> Any:
    """This rank's slice of ``x`` along ``dim`` (a view; no communication)."""
    g = _group(group, "tp")
    ndim = x.ndim
    if not -ndim <= dim < ndim:
        raise Precondition(f"precondition: tp.split: dimension {dim} is out of range for an array of {ndim} dimensions")
    axis = dim % ndim
    n, w = x.shape[axis], g.size()
    if n % w:
        raise Precondition(
            f"precondition: tp.split: dimension {dim} has length {n}, not divisible by the group's {w} ranks")
    part = n // w
    index = [slice(None)] * ndim
    index[axis] = slice(g.rank() * part, (g.rank() + 1) * part)
    return x[tuple(index)]


__all__ = ["all_gather", "all_reduce", "reduce_scatter", "split"]
