"""``hcomm.Schedule``: a schedule written in the schedule language (the
language of the Rust ``comm_schedule!`` macro), checked when it is made."""

from __future__ import annotations

from typing import Any, List, Tuple

from . import _native
from ._native import Comm


class Schedule:
    """A schedule read from ``source`` (one ``fn`` item, with its ``#[verify]``,
    ``#[postcondition]`` and other attributes) and checked on its verify set
    when made: a rejected schedule raises ``hcomm.ScheduleError`` whose
    ``diagnostics`` are the macro's (kind, world, line and column in
    ``source`` as passed, from 1).

    ``s(comm, *arrays, **keywords)`` runs it on any backend: the arrays bind
    the buffer parameters in order (one element type), keywords bind scalar
    parameters (ints), operator parameters (``"sum"``, ``"prod"``, ``"max"``,
    ``"min"``) and count parameters (lists of ints). A world size outside the
    verify set is checked at its first call.
    """

    __slots__ = ("_native", "name")

    def __init__(self, source: str) -> None:
        self._native = _native.parse_schedule(source)
        self.name: str = self._native.name()

    @property
    def buffers(self) -> List[Tuple[str, bool]]:
        """The buffer parameters in order: ``(name, writable)``."""
        return self._native.buffers()

    def __call__(self, comm: Comm, *arrays: Any, **keywords: Any) -> None:
        self._native.run(comm, list(arrays), keywords)

    def __repr__(self) -> str:
        return f"<hcomm.Schedule {self.name}>"
