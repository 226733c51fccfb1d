#!/usr/bin/env bash
# Creates (or reuses) a CUDA 13.0 build toolchain from PyPI, for building
# hcomm-candle's `cuda` feature on a machine without a GPU or a CUDA install:
# nvcc, the headers and the libraries candle links (cuBLAS, cuRAND, NVRTC, the
# runtime), pinned to 13.0 so that candle's PTX loads on a 13.0 driver; and a
# link-time stub of the driver library (libcuda.so.1, every entry point
# returning CUDA_ERROR_STUB_LIBRARY), generated from the driver functions
# cudarc declares. The real driver replaces the stub at run time.
#
# Usage: scripts/device-cuda-env.sh [DIR]   (default: target/cuda-venv)
# Prints the environment to build with, as `export` lines:
#   eval "$(scripts/device-cuda-env.sh /work/nvcc-venv)"
#   cargo build -p hcomm-candle --features cuda
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-target/cuda-venv}"
mkdir -p "$venv"
venv=$(cd "$venv" && pwd)
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >&2
fi
# nvidia-nvvm is pinned too: nvcc 13.0 pulls the newest one otherwise, whose
# PTX a 13.0 driver refuses.
packages=(
    "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*"
    "nvidia-cuda-cccl==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-nvrtc==13.0.*"
    "nvidia-cublas==13.0.*" "nvidia-curand==10.4.*"
)
site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
cu="$site/nvidia/cu13"
if [ ! -x "$cu/bin/nvcc" ] || [ ! -e "$cu/lib/libcublas.so.13" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}" >&2
fi

# A CUDA root as build scripts expect one: bin/, include/, lib64/ with the
# unversioned names the linker looks for, lib64/stubs/libcuda.so.
root="$venv/cuda-root"
mkdir -p "$root/lib64/stubs"
ln -sfn "$cu/bin" "$root/bin"
ln -sfn "$cu/include" "$root/include"
ln -sfn "$cu/nvvm" "$root/nvvm"
for lib in "$cu"/lib/lib*.so.*; do
    name=$(basename "$lib")
    ln -sfn "$lib" "$root/lib64/$name"
    ln -sfn "$lib" "$root/lib64/${name%%.so.*}.so"
done
stub="$root/lib64/stubs/libcuda.so"
if [ ! -e "$stub" ]; then
    registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
    cudarc_sys() { ls -d "$registry"/*/cudarc-0.19.*/src/driver/sys/mod.rs 2>/dev/null | sort -V | tail -1; }
    sys=$(cudarc_sys)
    # cargo fetch unpacks every crate of Cargo.lock, the optional ones too.
    [ -n "$sys" ] || { cargo fetch --quiet >&2 && sys=$(cudarc_sys); }
    [ -n "$sys" ] || {
        echo "device-cuda-env: cudarc 0.19 is not in $registry after cargo fetch. hint: candle-core's cuda feature names it; check Cargo.lock" >&2
        exit 1
    }
    src="$root/lib64/stubs/libcuda-stub.c"
    # 34 is CUDA_ERROR_STUB_LIBRARY.
    grep -Eo '^pub unsafe fn cu[A-Za-z0-9_]+' "$sys" | awk '{print $4}' | sort -u |
        awk '{printf "int %s(void) { return 34; }\n", $1}' >"$src"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub" "$src"
    ln -sfn libcuda.so "$root/lib64/stubs/libcuda.so.1"
fi
cat <<EOF
export PATH="$root/bin:\$PATH"
export CUDA_ROOT="$root" CUDA_PATH="$root" CUDA_HOME="$root"
export CUDA_COMPUTE_CAP="\${CUDA_COMPUTE_CAP:-90}"
export LIBRARY_PATH="$root/lib64:$root/lib64/stubs\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export HCOMM_CUDA_STUB_DIR="$root/lib64/stubs" HCOMM_CUDA_LIB_DIR="$root/lib64"
EOF
