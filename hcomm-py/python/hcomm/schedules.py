"""The runtime's built-in communication schedules (Rust ``hcomm::schedules``),
under the same names, on numpy arrays. Each is checked for deadlock freedom
and its postcondition by the schedule checker when the runtime is built.

* ``f(comm, x, out)``: ``ring_all_gather``, ``recursive_doubling_all_gather``,
  ``bruck_all_gather``, ``direct_all_gather``, ``pairwise_all_to_all``,
  ``one_shot_all_gather``, ``one_shot_all_to_all``;
* ``f(comm, x, out, op="sum")``: ``one_shot_all_reduce``,
  ``one_shot_reduce_scatter``, ``direct_all_reduce``, ``direct_reduce_scatter``,
  ``recursive_halving_reduce_scatter``, ``ring_reduce_scatter``;
* ``f(comm, buf, root)`` (in place): ``binomial_broadcast``,
  ``one_shot_broadcast``, ``scatter_all_gather_broadcast``;
* ``f(comm, buf, op="sum")`` (in place): ``ring_all_reduce``,
  ``halving_doubling_all_reduce``, ``recursive_doubling_all_reduce``;
* ``binomial_reduce(comm, x, out, op="sum", root=0)``.

Lengths are in elements of the flattened arrays, as the Rust schedules take
them (``out`` of an all-gather holds ``x.size * comm.size()`` elements); a
wrong length is ``hcomm.BufferLength``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from . import _native
from ._native import Comm

_IN_OUT = ("ring_all_gather", "recursive_doubling_all_gather", "bruck_all_gather", "direct_all_gather",
           "pairwise_all_to_all", "one_shot_all_gather", "one_shot_all_to_all")
_IN_OUT_OP = ("one_shot_all_reduce", "one_shot_reduce_scatter", "direct_all_reduce", "direct_reduce_scatter",
              "recursive_halving_reduce_scatter", "ring_reduce_scatter")
_BUF_ROOT = ("binomial_broadcast", "one_shot_broadcast", "scatter_all_gather_broadcast")
_BUF_OP = ("ring_all_reduce", "halving_doubling_all_reduce", "recursive_doubling_all_reduce")


def _in_out(name: str) -> Callable[..., None]:
    def f(comm: Comm, x: Any, out: Any) -> None:
        _native.run_schedule(name, comm, x, out)
    return f


def _in_out_op(name: str) -> Callable[..., None]:
    def f(comm: Comm, x: Any, out: Any, op: str = "sum") -> None:
        _native.run_schedule(name, comm, x, out, op=op)
    return f


def _buf_root(name: str) -> Callable[..., None]:
    def f(comm: Comm, buf: Any, root: int) -> None:
        _native.run_schedule(name, comm, buf, root=root)
    return f


def _buf_op(name: str) -> Callable[..., None]:
    def f(comm: Comm, buf: Any, op: str = "sum") -> None:
        _native.run_schedule(name, comm, buf, op=op)
    return f


def binomial_reduce(comm: Comm, x: Any, out: Any, op: str = "sum", root: int = 0) -> None:
    """Combines every rank's ``x`` into ``out`` on ``root`` (``out`` unused elsewhere)."""
    _native.run_schedule("binomial_reduce", comm, x, out, op=op, root=root)


_made: Dict[str, Callable[..., None]] = {}
for _names, _make in ((_IN_OUT, _in_out), (_IN_OUT_OP, _in_out_op), (_BUF_ROOT, _buf_root), (_BUF_OP, _buf_op)):
    for _name in _names:
        _f = _make(_name)
        _f.__name__ = _f.__qualname__ = _name
        _f.__doc__ = f"The built-in schedule ``{_name}`` (Rust ``hcomm::schedules::{_name}``)."
        _made[_name] = _f
globals().update(_made)

__all__ = sorted(list(_made) + ["binomial_reduce"])
assert sorted(__all__) == sorted(_native.schedule_names()), "schedule list out of date"
