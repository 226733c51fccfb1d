#!/usr/bin/env bash
# Creates (or reuses) the Python virtual environment the hcomm Python
# package is built and tested in, with maturin, numpy and pytest from PyPI.
# Usage: scripts/python-env.sh [DIR]   (default: target/py-venv); prints DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-target/py-venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import maturin, numpy, pytest" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" numpy pytest >&2
fi
echo "$venv"
