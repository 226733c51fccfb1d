"""hcomm: the communication layer of distributed training, for Python.

Point-to-point and collective operations on numpy arrays (read and written in
place), communicators split into tensor-, pipeline-, data- and expert-parallel
groups, over the hcomm Rust runtime. Start the ranks with
``hcomm-run -n 4 -- python train.py``, ``python -m hcomm.run -n 4 train.py`` or
torchrun, then call :func:`init`.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, List, Optional

from . import _errors
from ._errors import (
    Aborted,
    BackendError,
    BufferLength,
    ConfigError,
    Diagnostic,
    Error,
    EvaluationError,
    Mismatch,
    Panicked,
    PeerFailed,
    Precondition,
    ScheduleError,
    Timeout,
)
from ._native import Comm, Context, Request
from ._text import Schedule
from . import _native

_lock = threading.Lock()
_world: Optional[Comm] = None
_context: Optional[Context] = None


def init(backend: Optional[str] = None) -> Comm:
    """Joins the job this process belongs to and returns its communicator.

    The job comes from the launcher's variables: hcomm-run's ``HCOMM_RANK``,
    ``HCOMM_WORLD_SIZE``, ``HCOMM_MASTER_ADDR``, ``HCOMM_MASTER_PORT``, or
    torchrun's ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``
    (``LOCAL_RANK`` selects the device). ``backend`` is ``"host"``, ``"hccl"``
    or ``"nccl"``; ``None`` means ``HCOMM_BACKEND``, else ``"host"``.
    A second call returns the same communicator.
    """
    global _world
    with _lock:
        if _world is None:
            _world = _native.init(backend)
        elif backend is not None and backend != _world.backend():
            raise Precondition(
                f"precondition: hcomm.init(backend={backend!r}) after the job was joined on the "
                f"{_world.backend()!r} backend; hint: call init once, with the same backend"
            )
        return _world


def _comm() -> Comm:
    if _world is None:
        raise Precondition("precondition: the job was not joined; hint: call hcomm.init() first")
    return _world


def get_rank() -> int:
    """This process's rank in the communicator :func:`init` returned."""
    return _comm().rank()


def get_world_size() -> int:
    """The number of ranks of the communicator :func:`init` returned."""
    return _comm().size()


def init_context(tp_size: int = 1, pp_size: int = 1, dp_size: int = 1, ep_size: int = 1,
                 backend: Optional[str] = None) -> Context:
    """Lays out the job's ranks in tensor-, pipeline-, data- and expert-parallel groups.

    Megatron-LM's layout: ``rank = tp_i + tp * (dp_i + dp * pp_i)``; expert groups are
    carved out of the data-parallel axis. Collective over the job (calls :func:`init`
    when it was not called). ``tp * pp * dp`` different from the number of ranks, a
    size of 0, or an ``ep`` that does not divide ``dp`` is ``hcomm.Precondition`` on
    every rank; ranks passing different sizes get ``hcomm.Mismatch``.
    """
    global _context
    ctx = _native.make_context(init(backend), tp_size, pp_size, dp_size, ep_size)
    _context = ctx
    return ctx


def get_context() -> Optional[Context]:
    """The context :func:`init_context` built last, or ``None``."""
    return _context


def _group(group: Optional[Comm], axis: str) -> Comm:
    """``group``, or the ``axis`` group of the context."""
    if group is not None:
        return group
    if _context is None:
        raise Precondition(
            f"precondition: group=None means the context's {axis} group, but no context was built; "
            "hint: call hcomm.init_context(...) or pass group="
        )
    return getattr(_context, axis)


def init_tensor_parallel_group(tp_size: int, tp_rank: Optional[int] = None) -> Comm:
    """The tensor-parallel group of this rank: contiguous blocks of ``tp_size`` ranks.

    ``tp_rank``, when given, must be this rank's index in its group. No message is
    exchanged (calls :func:`init` when it was not called).
    """
    world = init()
    w, r = world.size(), world.rank()
    if tp_size < 1 or w % tp_size:
        raise Precondition(
            f"precondition: tp_size {tp_size} does not divide the {w} ranks of the job")
    if tp_rank is not None and tp_rank != r % tp_size:
        raise Precondition(
            f"precondition: tp_rank {tp_rank} given, but rank {r} is index {r % tp_size} of its "
            f"tensor-parallel group of {tp_size}")
    start = r - r % tp_size
    group = world.subgroup(list(range(start, start + tp_size)))
    assert group is not None  # this rank is in its own block
    return group


class P2POp:
    """One operation of :func:`batch_isend_irecv`: ``op`` is ``"isend"`` or ``"irecv"``."""

    __slots__ = ("op", "tensor", "peer", "tag")

    def __init__(self, op: str, tensor: Any, peer: int, tag: int = 0) -> None:
        if op not in ("isend", "irecv"):
            raise Precondition(f'precondition: P2POp op {op!r} is not "isend" or "irecv"')
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.tag = tag

    def __repr__(self) -> str:
        return f"P2POp({self.op!r}, peer={self.peer}, tag={self.tag})"


def send(tensor: Any, dst: int, tag: int = 0) -> None:
    """Sends ``tensor`` to ``dst``; returns once it was received."""
    _comm().send(tensor, dst, tag)


def recv(tensor: Any, src: int, tag: int = 0) -> None:
    """Receives into ``tensor`` from ``src``."""
    _comm().recv(tensor, src, tag)


def isend(tensor: Any, dst: int, tag: int = 0) -> Request:
    """Starts sending ``tensor`` to ``dst``; the request keeps it alive until it completes."""
    return _comm().isend(tensor, dst, tag)


def irecv(tensor: Any, src: int, tag: int = 0) -> Request:
    """Starts receiving into ``tensor`` from ``src``."""
    return _comm().irecv(tensor, src, tag)


def batch_isend_irecv(ops: Iterable[P2POp]) -> List[Request]:
    """Posts every op together (exchanges cannot deadlock); one request per op."""
    return _comm().batch_isend_irecv(list(ops))


def wait_all(requests: Iterable[Request]) -> None:
    """Waits for every request, even after one fails; raises the first error."""
    first: Optional[BaseException] = None
    for r in requests:
        try:
            r.wait()
        except Error as e:
            if first is None:
                first = e
    if first is not None:
        raise first


__all__ = [
    "Aborted",
    "BackendError",
    "BufferLength",
    "Comm",
    "Context",
    "ConfigError",
    "Diagnostic",
    "Error",
    "EvaluationError",
    "Mismatch",
    "P2POp",
    "Panicked",
    "PeerFailed",
    "Precondition",
    "Request",
    "Schedule",
    "ScheduleError",
    "Timeout",
    "batch_isend_irecv",
    "get_context",
    "get_rank",
    "get_world_size",
    "init",
    "init_context",
    "init_tensor_parallel_group",
    "irecv",
    "isend",
    "recv",
    "send",
    "wait_all",
]
