#!/usr/bin/env bash
# Device check of the Python package: CUDA tensors (torch, and cupy where it is
# installed) used in place on the NCCL backend at world 1, and their refusal on
# the host backend (hcomm-py/tests/device_cuda.py); then hcomm-candle's
# stream-contract test (hcomm-candle/tests/device.rs) and its `cuda` feature
# on candle CUDA tensors (hcomm-candle/tests/cuda.rs) when they were packed.
# Prints one summary line last:
#   device-python: PASS|FAIL ...
#
# Usage:
#   scripts/device-python.sh                 build the wheel here and run on this machine's GPU
#   scripts/device-python.sh --pack DIR      build the abi3 wheel (maturin, debug profile: a quick
#                                            build) and the candle test binaries (the `cuda` one
#                                            with the toolchain of scripts/device-cuda-env.sh, in
#                                            HCOMM_CUDA_VENV, default target/cuda-venv) and copy
#                                            them, the check, this script and device-common.sh
#                                            into DIR, for a GPU machine without a Rust toolchain
#   scripts/device-python.sh --from-dir DIR  install the wheel packed in DIR (pip --no-deps
#                                            --target, beside the machine's torch) and run the check
#   scripts/device-python.sh --from-dir DIR --dry
#                                            install the packed wheel, import it, list the packed
#                                            candle tests; stop before the device
#   scripts/device-python.sh --dry           the same on a pack built here
#
# The GPU machine needs python3 with torch (CUDA) and libnccl.so.2 where hcomm looks for it
# (HCOMM_NCCL_LIB, the system search path, or the nvidia-nccl wheel of python3). The candle
# CUDA test loads cuBLAS, cuRAND, NVRTC and the CUDA runtime (13.x) from torch's nvidia
# wheels, HCOMM_CUDA_LIB_DIR or /usr/local/cuda, and the driver's libcuda.so.1 (for --dry
# on a machine without a driver, the link-time stub in HCOMM_CUDA_STUB_DIR, which
# `eval "$(scripts/device-cuda-env.sh)"` sets, lets it list its tests). The check takes well
# under a minute; every step is bounded (`timeout`).
set -u -o pipefail

PROG=device-python
# shellcheck source=scripts/device-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
parse_device_args "$@"

# Builds the wheel into $1 with the project's Python environment.
pack() {
    local out=$1 root venv
    root=$(repo_root)
    venv=$("$root/scripts/python-env.sh" "${HCOMM_PY_VENV:-$root/target/py-venv}") || return 1
    mkdir -p "$out"
    rm -f "$out"/hcomm-*.whl
    (cd "$root/hcomm-py" && "$venv/bin/maturin" build --strip --out "$out" 2>&1) | tail -3 >&2
    ls "$out"/hcomm-*.whl >/dev/null 2>&1 || {
        say "FAIL the wheel did not build. hint: cd hcomm-py && maturin build --release"
        return 1
    }
    cp -f "$root/hcomm-py/tests/device_cuda.py" "$out/"
    pack_scripts "$out"
    local exe env
    read -r _ exe < <(cargo_test_binaries -p hcomm-candle --test device)
    if [ -n "$exe" ] && [ -x "$exe" ]; then
        cp -f "$exe" "$out/candle_device" && strip "$out/candle_device"
    else
        say "FAIL the hcomm-candle device test did not build. hint: cargo test -p hcomm-candle --test device --no-run"
        return 1
    fi
    # The `cuda` feature: candle's CUDA build (nvcc, minutes on a first build).
    env=$("$root/scripts/device-cuda-env.sh" "${HCOMM_CUDA_VENV:-$root/target/cuda-venv}") || {
        say "FAIL the CUDA build toolchain did not install. hint: scripts/device-cuda-env.sh"
        return 1
    }
    exe=
    read -r _ exe < <(eval "$env" && cargo_test_binaries -p hcomm-candle --features cuda --test cuda)
    if [ -n "$exe" ] && [ -x "$exe" ]; then
        cp -f "$exe" "$out/candle_cuda" && strip "$out/candle_cuda"
    else
        say "FAIL the hcomm-candle cuda test did not build. hint: eval \"\$(scripts/device-cuda-env.sh)\"; cargo test -p hcomm-candle --features cuda --test cuda --no-run"
        return 1
    fi
    say "packed $(basename "$out"/hcomm-*.whl) into $out ($(du -sh "$out" | cut -f1)); run: bash $out/device-python.sh --from-dir $out"
}

# Installs the wheel of $1 into $1/site and runs the check.
run_from() {
    local dir=$1 py=${PYTHON:-python3}
    SITE=$(mktemp -d -t device-python.XXXXXX)
    local site=$SITE
    trap 'rm -rf "$SITE" "${PACKED:-}"' EXIT
    if ! timeout 120 "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" \
        "$dir"/hcomm-*.whl >&2; then
        echo "device-python: FAIL the wheel did not install on $("$py" --version 2>&1) ($(ldd --version 2>&1 | head -1))"
        exit 1
    fi
    # The CUDA runtime torch loads (its nvidia wheels), unless HCOMM_CUDART_LIB says otherwise.
    if [ -z "${HCOMM_CUDART_LIB:-}" ]; then
        HCOMM_CUDART_LIB=$(find_lib "$(wheel_lib_dirs "$py")" 'libcudart.so.13' 'libcudart.so.1[0-9]*') &&
            export HCOMM_CUDART_LIB
    fi
    say "cuda runtime: ${HCOMM_CUDART_LIB:-searched by hcomm}; nccl: ${HCOMM_NCCL_LIB:-searched by hcomm}"
    if [ $DRY -eq 1 ]; then
        dry_check "$dir" "$py" "$site"
        exit $?
    fi
    say "gpu: $(gpu_name)"
    # One rank, two rendezvous ports on the loopback (NCCL, then the host refusal).
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=${DEVICE_PYTHON_PORT:-29580} \
        PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout "${DEVICE_PYTHON_TIMEOUT:-120}" \
        "$py" "$dir/device_cuda.py" | tee "$site/python.log"
    local rc=$?
    [ $rc -eq 124 ] && echo "device-python: FAIL timed out after ${DEVICE_PYTHON_TIMEOUT:-120} s"
    local also=
    if [ -x "$dir/candle_device" ]; then
        say "hcomm-candle: a busy producer stream is awaited before NCCL reads"
        HCOMM_DEVICE_CHECK=1 timeout 60 "$dir/candle_device" --test-threads=1 --nocapture 2>&1 | tail -4 >&2 ||
            rc=1
        also="; hcomm-candle stream contract ok"
    fi
    if [ -x "$dir/candle_cuda" ]; then
        say "hcomm-candle cuda: the in-place all-reduce and every mapping on candle CUDA tensors"
        LD_LIBRARY_PATH=$(cuda_lib_path "$py" 0) HCOMM_DEVICE_CHECK=1 timeout "${DEVICE_CANDLE_TIMEOUT:-180}" \
            "$dir/candle_cuda" --test-threads=1 --nocapture 2>&1 | tee "$site/candle_cuda.log" |
            grep -E '^device-check case|^test result|panicked|^failures|error' >&2 || rc=1
        also="$also; hcomm-candle cuda $(grep -c '^device-check case' "$site/candle_cuda.log") cases ok"
    fi
    if [ $rc -eq 0 ]; then
        grep '^device-python: PASS' "$site/python.log" | sed "s/\$/$also/"
    else
        echo "device-python: FAIL (see the output above)"
    fi
    exit $rc
}

# The library folders the candle CUDA test loads cuBLAS, cuRAND, NVRTC and
# the CUDA runtime from: the nvidia wheels of python $1, HCOMM_CUDA_LIB_DIR,
# the CUDA toolkits; with $2 = 1 and no driver on this machine, the link-time
# driver stub of scripts/device-cuda-env.sh too (HCOMM_CUDA_STUB_DIR), which
# lets the binary start and list its tests, never run them.
cuda_lib_path() {
    local py=$1 stub=$2 d dirs=()
    while IFS= read -r d; do [ -n "$d" ] && dirs+=("$d"); done < <(wheel_lib_dirs "$py")
    [ -n "${HCOMM_CUDA_LIB_DIR:-}" ] && dirs+=("$HCOMM_CUDA_LIB_DIR")
    for d in /usr/local/cuda*/targets/*/lib /usr/local/cuda*/lib64; do [ -d "$d" ] && dirs+=("$d"); done
    if [ "$stub" = 1 ] && [ -n "${HCOMM_CUDA_STUB_DIR:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        dirs+=("$HCOMM_CUDA_STUB_DIR")
    fi
    local IFS=:
    echo "${dirs[*]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# The pack without the device: the wheel imports beside this Python, the
# candle test binary starts and lists its test.
dry_check() {
    local dir=$1 py=$2 site=$3 where
    if ! where=$(PYTHONPATH="$site" timeout 60 "$py" -c 'import hcomm; print(hcomm.__file__)' 2>&1); then
        echo "device-python: FAIL the packed wheel does not import: $where"
        return 1
    fi
    say "hcomm imports from the packed wheel ($where)"
    if ! timeout 60 "$dir/candle_device" --list 2>/dev/null | grep ': test$' | sed 's/^/  candle_device::/' >&2; then
        echo "device-python: FAIL the packed candle test does not list its tests"
        return 1
    fi
    local listed
    if ! listed=$(LD_LIBRARY_PATH=$(cuda_lib_path "$py" 1) timeout 60 "$dir/candle_cuda" --list 2>&1); then
        echo "device-python: FAIL the packed candle cuda test does not start: $(echo "$listed" | tail -1). hint: it needs cuBLAS, cuRAND, NVRTC and the CUDA runtime 13.x (torch's nvidia wheels) and libcuda.so.1"
        return 1
    fi
    echo "$listed" | grep ': test$' | sed 's/^/  candle_cuda::/' >&2
    echo "device-python: DRY wheel installed and imported, candle tests listed; the device was not used"
}

case $MODE in
pack) pack "$DIR" || exit 1 ;;
from-dir) run_from "$DIR" ;;
run)
    PACKED=$(mktemp -d -t device-python-pack.XXXXXX)
    pack "$PACKED" || exit 1
    run_from "$PACKED"
    ;;
esac
