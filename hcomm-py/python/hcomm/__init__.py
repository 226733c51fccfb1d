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
from ._native import Comm, Request
from . import _native

_lock = threading.Lock()
_world: Optional[Comm] = None


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
    "ScheduleError",
    "Timeout",
    "batch_isend_irecv",
    "get_rank",
    "get_world_size",
    "init",
    "irecv",
    "isend",
    "recv",
    "send",
    "wait_all",
]
