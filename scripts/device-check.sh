#!/usr/bin/env bash
# Device check: every NCCL-path test one NVIDIA GPU allows (hcomm/tests/nccl_device.rs
# at world 1, and at the GPU count up to 4 where there are more; hcomm/tests/nccl_smoke.rs),
# against the real libnccl.so.2 and CUDA runtime. Prints one summary line last:
#   device-check: PASS|FAIL|DRY ...
#
# Usage:
#   scripts/device-check.sh                 build here (cargo) and run on this machine's GPU
#   scripts/device-check.sh --dry           build and check everything but the device: the
#                                           test binaries, the cases on the HCCL stand-in,
#                                           the library search, a clean skip without a GPU
#   scripts/device-check.sh --pack DIR      build, strip and copy the binaries and this script
#                                           into DIR, for a GPU machine without a Rust toolchain
#   scripts/device-check.sh --from-dir DIR  run the binaries packed in DIR (no cargo)
#
# Libraries: HCOMM_NCCL_LIB and HCOMM_CUDART_LIB when set; otherwise the script looks in
# the system search path, /usr/local/cuda*/ and the nvidia-* pip wheels of python3, and
# exports what it found. Every run is bounded (`timeout`); the whole check takes well under
# 5 minutes on one GPU (debug binaries).
set -u -o pipefail

MODE=run
DIR=
case "${1:-}" in
--dry) MODE=dry ;;
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
    sed -n '2,20p' "$0"
    exit 0
    ;;
*)
    echo "device-check: unknown argument '$1'. hint: --dry, --pack DIR or --from-dir DIR." >&2
    exit 2
    ;;
esac

TESTS=(nccl_device nccl_smoke)
PER_BINARY_TIMEOUT=${DEVICE_CHECK_TIMEOUT:-200}
START=$(date +%s)
LOG=$(mktemp -t device-check.XXXXXX)
trap 'rm -f "$LOG"' EXIT

say() { echo "device-check: $*" >&2; }

# Builds the test binaries with cargo and prints "name path" per test.
build() {
    local root
    root=$(cd "$(dirname "$0")/.." && pwd)
    local args=()
    for t in "${TESTS[@]}"; do args+=(--test "$t"); done
    (cd "$root" && cargo test -p hcomm "${args[@]}" --no-run --message-format=json 2>/dev/null) |
        python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
'
}

# First file matching one of the patterns, searched where the libraries usually are.
find_lib() {
    local names=("$@") dirs=() d n
    while IFS= read -r d; do dirs+=("$d"); done < <(
        ldconfig -p 2>/dev/null | awk '{print $NF}' | xargs -r -n1 dirname 2>/dev/null | sort -u
        for d in /usr/local/cuda*/targets/*/lib /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
            [ -d "$d" ] && echo "$d"
        done
        for py in python3 "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; do
            [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
            "$py" - <<'EOF' 2>/dev/null
import site, sys, os
for p in site.getsitepackages() + [site.getusersitepackages()]:
    for sub in ("nvidia/nccl/lib", "nvidia/cuda_runtime/lib", "nvidia/cu13/lib"):
        d = os.path.join(p, sub)
        if os.path.isdir(d):
            print(d)
EOF
        done
    )
    for n in "${names[@]}"; do
        for d in "${dirs[@]}"; do
            for f in "$d"/$n; do
                [ -e "$f" ] && {
                    echo "$f"
                    return 0
                }
            done
        done
    done
    return 1
}

locate_libraries() {
    if [ -z "${HCOMM_NCCL_LIB:-}" ]; then
        HCOMM_NCCL_LIB=$(find_lib 'libnccl.so.2' 'libnccl.so') && export HCOMM_NCCL_LIB
    fi
    if [ -z "${HCOMM_CUDART_LIB:-}" ]; then
        HCOMM_CUDART_LIB=$(find_lib 'libcudart.so.13' 'libcudart.so.12' 'libcudart.so' 'libcudart.so.1[0-9]*') &&
            export HCOMM_CUDART_LIB
    fi
    say "nccl library: ${HCOMM_NCCL_LIB:-not found}; cuda runtime: ${HCOMM_CUDART_LIB:-not found}"
}

gpu_name() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
    else
        echo "no nvidia-smi"
    fi
}

# Runs one test binary on the device; appends to the log; returns its status.
run_binary() {
    local name=$1 exe=$2 rc
    say "running $name ($exe)"
    local filter=()
    # the stand-in needs its cdylib next to the binary: it runs in --dry and cargo builds
    [ "$name" = nccl_device ] && [ "$MODE" = from-dir ] && filter=(--skip the_cases_hold_on_the_hccl_standin --skip a_timeout_on_the_hccl_standin)
    HCOMM_DEVICE_CHECK=1 timeout "$PER_BINARY_TIMEOUT" "$exe" --test-threads=1 --nocapture "${filter[@]}" 2>&1 |
        tee -a "$LOG"
    rc=$?
    [ $rc -eq 124 ] && echo "device-check: $name timed out after ${PER_BINARY_TIMEOUT} s" | tee -a "$LOG"
    return $rc
}

summary() {
    local verdict=$1 detail=$2
    local cases tests_ok tests_failed
    cases=$(grep -c 'device-check case .*: ok' "$LOG")
    tests_ok=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$LOG" | awk '{s += $4} END {print s + 0}')
    tests_failed=$(grep -Eo '[0-9]+ failed' "$LOG" | awk '{s += $1} END {print s + 0}')
    echo "device-check: $verdict $cases cases ok, $tests_ok tests passed, $tests_failed failed, $(($(date +%s) - START)) s; $detail"
}

declare -A EXE
collect() {
    local name path
    while read -r name path; do EXE[$name]=$path; done
    for t in "${TESTS[@]}"; do
        if [ -z "${EXE[$t]:-}" ] || [ ! -x "${EXE[$t]}" ]; then
            say "test binary $t missing. hint: the build failed; run cargo test -p hcomm --test $t --no-run"
            summary FAIL "build: $t missing"
            exit 1
        fi
    done
}

case $MODE in
pack)
    collect < <(build)
    mkdir -p "$DIR"
    for t in "${TESTS[@]}"; do
        cp -f "${EXE[$t]}" "$DIR/$t" && strip "$DIR/$t"
    done
    cp -f "$0" "$DIR/device-check.sh"
    say "packed ${TESTS[*]} into $DIR ($(du -sh "$DIR" | cut -f1)); run: bash $DIR/device-check.sh --from-dir $DIR"
    exit 0
    ;;
from-dir)
    collect < <(for t in "${TESTS[@]}"; do echo "$t $DIR/$t"; done)
    ;;
*)
    collect < <(build)
    ;;
esac

locate_libraries
if [ "$MODE" = dry ]; then
    # everything but the device: the cases on the HCCL stand-in, the binaries without a GPU
    failed=0
    say "cases on the HCCL stand-in"
    timeout "$PER_BINARY_TIMEOUT" "${EXE[nccl_device]}" the_hccl_standin --nocapture 2>&1 |
        tee -a "$LOG" || failed=1
    say "listing the device tests"
    for t in "${TESTS[@]}"; do
        "${EXE[$t]}" --list 2>/dev/null | grep ': test$' | sed "s/^/  $t::/" >&2 || failed=1
    done
    say "without a GPU the NCCL tests skip and say why"
    for t in "${TESTS[@]}"; do
        env -u HCOMM_DEVICE_CHECK timeout 60 "${EXE[$t]}" --test-threads=1 --nocapture --skip the_cases_hold 2>&1 |
            grep -E 'skipped|test result|panicked' >&2 || failed=1
    done
    if [ $failed -eq 0 ]; then
        summary DRY "binaries built and listed, stand-in cases pass; the device was not used"
        exit 0
    fi
    summary FAIL "dry run"
    exit 1
fi

GPU=$(gpu_name)
say "gpu: $GPU"
status=0
for t in "${TESTS[@]}"; do
    run_binary "$t" "${EXE[$t]}" || status=1
done
# What hcomm finds by itself, and what it says without a visible device
# (shown, not counted: the libraries may lie where only this script looks).
say "extra: hcomm's own library search (HCOMM_NCCL_LIB and HCOMM_CUDART_LIB unset)"
env -u HCOMM_NCCL_LIB -u HCOMM_CUDART_LIB -u HCOMM_DEVICE_CHECK timeout 30 "${EXE[nccl_device]}" \
    --exact nccl_reports_its_libraries_and_versions --nocapture 2>&1 | grep -E 'found|skipped|  |hint' >&2
say "extra: no visible device (CUDA_VISIBLE_DEVICES empty)"
CUDA_VISIBLE_DEVICES= env -u HCOMM_DEVICE_CHECK timeout 30 "${EXE[nccl_device]}" \
    --exact nccl_reports_its_libraries_and_versions --nocapture 2>&1 | grep -E 'found|skipped|hint' >&2
if [ $status -eq 0 ]; then
    summary PASS "$GPU"
else
    summary FAIL "$GPU; see the output above"
fi
exit $status
