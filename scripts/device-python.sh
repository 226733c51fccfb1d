#!/usr/bin/env bash
# Device check of the Python package: CUDA tensors (torch, and cupy where it is
# installed) used in place on the NCCL backend at world 1, and their refusal on
# the host backend (hcomm-py/tests/device_cuda.py); then hcomm-candle's
# stream-contract test (hcomm-candle/tests/device.rs) when it was packed.
# Prints one summary line last:
#   device-python: PASS|FAIL ...
#
# Usage:
#   scripts/device-python.sh                 build the wheel here and run on this machine's GPU
#   scripts/device-python.sh --pack DIR      build the abi3 wheel (maturin, debug profile: a quick build) and copy it,
#                                            the check and this script into DIR, for a GPU machine
#                                            without a Rust toolchain
#   scripts/device-python.sh --from-dir DIR  install the wheel packed in DIR (pip --no-deps
#                                            --target, beside the machine's torch) and run the check
#
# The GPU machine needs python3 with torch (CUDA) and libnccl.so.2 where hcomm looks for it
# (HCOMM_NCCL_LIB, the system search path, or the nvidia-nccl wheel of python3). The
# check takes a few seconds; every step is bounded (`timeout`).
set -u -o pipefail

MODE=run
DIR=
case "${1:-}" in
--pack)
    MODE=pack
    DIR=${2:?--pack needs a directory}
    ;;
--from-dir)
    MODE=from-dir
    DIR=${2:?--from-dir needs a directory}
    ;;
"") ;;
-h | --help)
    sed -n '2,17p' "$0"
    exit 0
    ;;
*)
    echo "device-python: unknown argument '$1'. hint: --pack DIR or --from-dir DIR." >&2
    exit 2
    ;;
esac

say() { echo "device-python: $*" >&2; }

# Builds the wheel into $1 with the project's Python environment.
pack() {
    local out=$1 root venv
    root=$(cd "$(dirname "$0")/.." && pwd)
    venv=$("$root/scripts/python-env.sh" "${HCOMM_PY_VENV:-$root/target/py-venv}") || return 1
    mkdir -p "$out"
    rm -f "$out"/hcomm-*.whl
    (cd "$root/hcomm-py" && "$venv/bin/maturin" build --strip --out "$out" 2>&1) | tail -3 >&2
    ls "$out"/hcomm-*.whl >/dev/null 2>&1 || {
        say "FAIL the wheel did not build. hint: cd hcomm-py && maturin build --release"
        return 1
    }
    cp -f "$root/hcomm-py/tests/device_cuda.py" "$0" "$out/"
    local exe
    exe=$(cd "$root" && cargo test -p hcomm-candle --test device --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])
')
    if [ -n "$exe" ] && [ -x "$exe" ]; then
        cp -f "$exe" "$out/candle_device" && strip "$out/candle_device"
    else
        say "FAIL the hcomm-candle device test did not build. hint: cargo test -p hcomm-candle --test device --no-run"
        return 1
    fi
    say "packed $(basename "$out"/hcomm-*.whl) into $out ($(du -sh "$out" | cut -f1)); run: bash $out/device-python.sh --from-dir $out"
}

# Installs the wheel of $1 into $1/site and runs the check.
run_from() {
    local dir=$1 py=${PYTHON:-python3}
    SITE=$(mktemp -d -t device-python.XXXXXX)
    local site=$SITE
    trap 'rm -rf "$SITE"' EXIT
    if ! timeout 120 "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" \
        "$dir"/hcomm-*.whl >&2; then
        echo "device-python: FAIL the wheel did not install on $("$py" --version 2>&1) ($(ldd --version 2>&1 | head -1))"
        exit 1
    fi
    # The CUDA runtime torch loads (its nvidia wheels), unless HCOMM_CUDART_LIB says otherwise.
    if [ -z "${HCOMM_CUDART_LIB:-}" ]; then
        HCOMM_CUDART_LIB=$("$py" - <<'EOF' 2>/dev/null
import glob, os, site
for p in site.getsitepackages() + [site.getusersitepackages()]:
    for sub in ("nvidia/cu13/lib/libcudart.so.13", "nvidia/cuda_runtime/lib/libcudart.so.1*"):
        for f in sorted(glob.glob(os.path.join(p, sub))):
            print(f)
            raise SystemExit
EOF
        ) && [ -n "$HCOMM_CUDART_LIB" ] && export HCOMM_CUDART_LIB
    fi
    say "cuda runtime: ${HCOMM_CUDART_LIB:-searched by hcomm}; nccl: ${HCOMM_NCCL_LIB:-searched by hcomm}"
    if command -v nvidia-smi >/dev/null 2>&1; then
        say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    fi
    # One rank, two rendezvous ports on the loopback (NCCL, then the host refusal).
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=${DEVICE_PYTHON_PORT:-29580} \
        PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout "${DEVICE_PYTHON_TIMEOUT:-120}" \
        "$py" "$dir/device_cuda.py" | tee "$site/python.log"
    local rc=$?
    [ $rc -eq 124 ] && echo "device-python: FAIL timed out after ${DEVICE_PYTHON_TIMEOUT:-120} s"
    if [ -x "$dir/candle_device" ]; then
        say "hcomm-candle: a busy producer stream is awaited before NCCL reads"
        HCOMM_DEVICE_CHECK=1 timeout 60 "$dir/candle_device" --test-threads=1 --nocapture 2>&1 | tail -4 >&2 ||
            rc=1
        [ $rc -eq 0 ] || echo "device-python: FAIL (see the output above)"
        [ $rc -eq 0 ] && grep '^device-python: PASS' "$site/python.log" | sed 's/$/; hcomm-candle stream contract ok/'
    fi
    exit $rc
}

case $MODE in
pack) pack "$DIR" || exit 1 ;;
from-dir) run_from "$DIR" ;;
run)
    tmp=$(mktemp -d -t device-python-pack.XXXXXX)
    pack "$tmp" || exit 1
    run_from "$tmp"
    ;;
esac
