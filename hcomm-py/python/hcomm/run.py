"""``python -m hcomm.run -n 4 train.py``: the same as ``hcomm-run -n 4 -- python train.py``.

This module execs the ``hcomm-run`` launcher (the binary built from the
repository's ``hcomm-run`` crate) rather than re-implementing it, so the job
gets the launcher's guarantees: the ranks in one process group, all of them
stopped when one fails, a fresh job secret, orphans reaped. The binary is
taken from ``HCOMM_RUN_BIN``, else from ``PATH``. A program that ends in
``.py`` (or ``-m module``) runs under this same Python interpreter.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import List, Optional


def find_launcher() -> Optional[str]:
    """The ``hcomm-run`` binary to exec, or ``None``."""
    explicit = os.environ.get("HCOMM_RUN_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("hcomm-run")


def command(argv: List[str], launcher: str) -> List[str]:
    """The launcher's command line for ``python -m hcomm.run`` arguments ``argv``."""
    options: List[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "--"):
        takes_value = argv[i] in ("-n", "--nprocs", "--port", "--grace")
        options.extend(argv[i : i + (2 if takes_value else 1)])
        i += 2 if takes_value else 1
    program = argv[i:]
    if program[:1] == ["--"]:
        program = program[1:]
    if program and (program[0] == "-m" or program[0].endswith(".py")):
        program = [sys.executable] + program
    return [launcher] + options + ["--"] + program


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    launcher = find_launcher()
    if launcher is None:
        sys.stderr.write(
            "hcomm.run: the `hcomm-run` launcher was not found on PATH nor in HCOMM_RUN_BIN; "
            "hint: build it with `cargo build --release -p hcomm-run` and put target/release on PATH\n"
        )
        return 2
    if not args or args[0] in ("-h", "--help"):
        os.execv(launcher, [launcher, "--help"])
    cmd = command(args, launcher)
    os.execv(cmd[0], cmd)
    return 0  # not reached: execv replaced the process


if __name__ == "__main__":
    sys.exit(main())
