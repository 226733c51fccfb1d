#!/usr/bin/env bash
# Creates (or reuses) the cached Python virtual environment the torch tests
# and the gloo benchmark run in: maturin, numpy, pytest and torch from PyPI
# (the CPU-only wheel index is not reachable from every machine, so this is
# PyPI's build; it imports and runs gloo on CPU without a GPU).
# The environment is keyed by the torch version and kept under
# ${XDG_CACHE_HOME:-~/.cache}/hcomm/, so CI downloads torch once per version.
# Usage: scripts/torch-env.sh        prints the environment's directory;
#        exits 3 (with the reason on stderr) when torch cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${HCOMM_TORCH_VERSION:-2.15.0}"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/hcomm/torch-venv-$version"
python="${PYTHON:-python3}"
# `.complete` is written last, so an interrupted install is redone, not reused.
if [ -f "$venv/.complete" ] && "$venv/bin/python" -c "import torch, maturin, numpy, pytest" 2>/dev/null; then
    echo "$venv"
    exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.5,<2" numpy pytest "torch==$version" >&2; then
    echo "torch-env: cannot install torch==$version from the package index; hint: check the network or set HCOMM_TORCH_VERSION" >&2
    exit 3
fi
touch "$venv/.complete"
echo "$venv"
