# Shared by scripts/device-check.sh and scripts/device-python.sh, which source
# it from their own folder (their --pack copies it beside them): the command
# line, messages, the test binaries cargo builds, and the library search.
# The sourcing script sets PROG (its name in messages) first.

say() { echo "$PROG: $*" >&2; }

# The script's header comment (its usage), without the "#!" line.
usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

# Parses `[--pack DIR | --from-dir DIR] [--dry]` into MODE (run, pack or
# from-dir), DIR and DRY (0 or 1); exits on -h and on anything else.
parse_device_args() {
    MODE=run
    DIR=
    DRY=0
    while [ $# -gt 0 ]; do
        case $1 in
        --dry) DRY=1 ;;
        --pack | --from-dir)
            [ "$MODE" = run ] || {
                say "--pack and --from-dir exclude each other. hint: pack on the build machine, run --from-dir on the GPU machine."
                exit 2
            }
            [ -n "${2:-}" ] || {
                say "$1 needs a directory. hint: $1 DIR."
                exit 2
            }
            MODE=${1#--}
            DIR=$2
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            say "unknown argument '$1'. hint: --dry, --pack DIR or --from-dir DIR."
            exit 2
            ;;
        esac
        shift
    done
    if [ "$MODE" = pack ] && [ $DRY -eq 1 ]; then
        say "--pack builds only; --dry goes with a run. hint: --from-dir DIR --dry checks a pack without the device."
        exit 2
    fi
}

# The repository root (the folder above scripts/).
repo_root() {
    (cd "$(dirname "$0")/.." && pwd)
}

# Builds test binaries of the workspace (`cargo test ARGS --no-run`) and
# prints "name path" for each.
cargo_test_binaries() {
    (cd "$(repo_root)" && cargo test "$@" --no-run --message-format=json 2>/dev/null) |
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

# Copies the calling script and this file into $1.
pack_scripts() {
    cp -f "$0" "$(dirname "${BASH_SOURCE[0]}")/device-common.sh" "$1/"
}

# The library folders of the NVIDIA pip wheels (NCCL, the CUDA runtime) of
# the Python interpreters named.
wheel_lib_dirs() {
    local py
    for py in "$@"; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
        "$py" - <<'EOF' 2>/dev/null
import os, site
for p in site.getsitepackages() + [site.getusersitepackages()]:
    for sub in ("nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cuda_runtime/lib"):
        d = os.path.join(p, sub)
        if os.path.isdir(d):
            print(d)
EOF
    done
}

# The system's library folders: the loader's cache, the CUDA toolkits, the
# usual system folders.
system_lib_dirs() {
    local d
    ldconfig -p 2>/dev/null | awk '{print $NF}' | xargs -r -n1 dirname 2>/dev/null | sort -u
    for d in /usr/local/cuda*/targets/*/lib /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
        [ -d "$d" ] && echo "$d"
    done
}

# The first file named by one of the patterns (in their order) in one of
# the folders of $1 (one a line); fails when there is none.
find_lib() {
    local dirs=() d n f
    while IFS= read -r d; do [ -n "$d" ] && dirs+=("$d"); done <<<"$1"
    shift
    for n in "$@"; do
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

# The GPU's name and driver, or why there is none to name.
gpu_name() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
    else
        echo "no nvidia-smi"
    fi
}
