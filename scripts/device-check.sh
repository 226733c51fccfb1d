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
#   scripts/device-check.sh --pack DIR      build, strip and copy the binaries, this script and
#                                           device-common.sh into DIR, for a GPU machine
#                                           without a Rust toolchain
#   scripts/device-check.sh --from-dir DIR  run the binaries packed in DIR (no cargo)
#   scripts/device-check.sh --from-dir DIR --dry
#                                           check a pack without the device: the binaries
#                                           start and list their tests, the library search,
#                                           a clean skip without a GPU (no stand-in cases)
#
# Libraries: HCOMM_NCCL_LIB and HCOMM_CUDART_LIB when set; otherwise the script looks in
# the system search path, /usr/local/cuda*/ and the nvidia-* pip wheels of python3, and
# exports what it found. Every run is bounded (`timeout`); the whole check takes well under
# 5 minutes on one GPU (debug binaries).
set -u -o pipefail

PROG=device-check
# shellcheck source=scripts/device-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
parse_device_args "$@"

TESTS=(nccl_device nccl_smoke)
PER_BINARY_TIMEOUT=${DEVICE_CHECK_TIMEOUT:-200}
START=$(date +%s)
LOG=$(mktemp -t device-check.XXXXXX)
trap 'rm -f "$LOG"' EXIT

# Builds the test binaries with cargo and prints "name path" per test.
build() {
    local args=() t
    for t in "${TESTS[@]}"; do args+=(--test "$t"); done
    cargo_test_binaries -p hcomm "${args[@]}"
}

locate_libraries() {
    local dirs
    dirs="$(system_lib_dirs; wheel_lib_dirs python3 "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}")"
    if [ -z "${HCOMM_NCCL_LIB:-}" ]; then
        HCOMM_NCCL_LIB=$(find_lib "$dirs" 'libnccl.so.2' 'libnccl.so') && export HCOMM_NCCL_LIB
    fi
    if [ -z "${HCOMM_CUDART_LIB:-}" ]; then
        HCOMM_CUDART_LIB=$(find_lib "$dirs" 'libcudart.so.13' 'libcudart.so.12' 'libcudart.so' 'libcudart.so.1[0-9]*') &&
            export HCOMM_CUDART_LIB
    fi
    say "nccl library: ${HCOMM_NCCL_LIB:-not found}; cuda runtime: ${HCOMM_CUDART_LIB:-not found}"
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
    pack_scripts "$DIR"
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
if [ $DRY -eq 1 ]; then
    # everything but the device: the cases on the HCCL stand-in (built here
    # only: a pack carries no stand-in library), the binaries without a GPU
    failed=0
    standin=(--skip the_cases_hold)
    if [ "$MODE" = run ]; then
        say "cases on the HCCL stand-in"
        timeout "$PER_BINARY_TIMEOUT" "${EXE[nccl_device]}" the_hccl_standin --nocapture 2>&1 |
            tee -a "$LOG" || failed=1
    else
        standin=(--skip hccl_standin)
    fi
    say "listing the device tests"
    for t in "${TESTS[@]}"; do
        "${EXE[$t]}" --list 2>/dev/null | grep ': test$' | sed "s/^/  $t::/" >&2 || failed=1
    done
    say "without a GPU the NCCL tests skip and say why"
    for t in "${TESTS[@]}"; do
        env -u HCOMM_DEVICE_CHECK timeout 60 "${EXE[$t]}" --test-threads=1 --nocapture "${standin[@]}" 2>&1 |
            grep -E 'skipped|test result|panicked' >&2 || failed=1
    done
    if [ $failed -eq 0 ]; then
        if [ "$MODE" = run ]; then
            summary DRY "binaries built and listed, stand-in cases pass; the device was not used"
        else
            summary DRY "packed binaries listed; the device was not used"
        fi
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
