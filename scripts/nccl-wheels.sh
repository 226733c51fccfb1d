#!/usr/bin/env bash
# Creates (or reuses) a cached Python environment holding the real NCCL and
# CUDA runtime libraries from PyPI (the `nvidia-nccl-cu12` and
# `nvidia-cuda-runtime-cu12` wheels: libnccl.so.2, libcudart.so.12 and their
# headers), for the tests that load the vendor's own library and probe its
# ABI (hcomm-sys/tests/nccl_wheels.rs, hcomm/tests/nccl_wheels.rs).
#
# Usage: scripts/nccl-wheels.sh [DIR]    prints DIR, the environment's root
#   DIR defaults to $HCOMM_CACHE/nccl-wheels-<versions>, HCOMM_CACHE to
#   ${XDG_CACHE_HOME:-~/.cache}/hcomm: the ~350 MB download happens once.
# Then: HCOMM_NCCL_WHEELS=DIR cargo test -p hcomm-sys --test nccl_wheels
set -euo pipefail
nccl_version="2.32.3"
cudart_version="12.9.79"
nvcc_version="12.9.86"
cccl_version="12.9.27"
cache="${HCOMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcomm}"
venv="${1:-$cache/nccl-wheels-$nccl_version-$cudart_version}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv" >&2
fi
if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(*(m.version(p) for p in ("nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-cccl-cu12")))' 2>/dev/null)" \
        != "$nccl_version $cudart_version $nvcc_version $cccl_version" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        "nvidia-nccl-cu12==$nccl_version" "nvidia-cuda-runtime-cu12==$cudart_version" \
        "nvidia-cuda-nvcc-cu12==$nvcc_version" "nvidia-cuda-cccl-cu12==$cccl_version" >&2
fi
echo "$venv"
