"""The exceptions of hcomm: one class per kind of ``hcomm::Error``.

The message of every exception is the Rust error's text.
"""

from __future__ import annotations

from typing import List, NamedTuple


class Error(Exception):
    """Base class of every error a communication call raises."""


class PeerFailed(Error):
    """A peer failed (raised, exited, its process died) while this rank waited on it.

    ``rank`` is the failed peer's rank in the communicator the call used.
    """

    def __init__(self, message: str, rank: int) -> None:
        super().__init__(message)
        self.rank = rank


class Mismatch(Error):
    """Ranks called a collective, or a matched send/recv pair, with arguments that disagree."""


class Timeout(Error):
    """A wait ran out of time (``HCOMM_TIMEOUT``, or ``Request.wait(timeout=...)``)."""


class Precondition(Error, ValueError):
    """An argument does not satisfy the call's precondition (rank out of range, bad shape...)."""


class BufferLength(Error, ValueError):
    """A buffer does not have the length the operation needs."""


class Diagnostic(NamedTuple):
    """One finding of the schedule checker."""

    kind: str
    world: int
    line: int
    column: int
    message: str


class ScheduleError(Error):
    """A schedule failed its checks; ``diagnostics`` lists the findings (possibly empty
    when the runtime reports only a message)."""

    def __init__(self, message: str, diagnostics: List[Diagnostic], schedule: str = "") -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.schedule = schedule


class Aborted(Error):
    """The communicator was aborted (``Comm.abort``, or Ctrl-C during a call on this rank)."""


class ConfigError(Error, ValueError):
    """A configuration value (an environment variable, a backend name) is malformed or missing."""


class EvaluationError(Error, ValueError):
    """Integer evaluation inside a schedule failed at run time (overflow, division by zero)."""


class Panicked(Error):
    """A rank's code panicked inside the runtime."""


class BackendError(Error):
    """The backend (a device library, the operating system) reported an error."""


__all__ = [
    "Aborted",
    "BackendError",
    "BufferLength",
    "ConfigError",
    "Diagnostic",
    "Error",
    "EvaluationError",
    "Mismatch",
    "Panicked",
    "PeerFailed",
    "Precondition",
    "ScheduleError",
    "Timeout",
]
