#!/usr/bin/env bash
# Regenerates the drawings under docs/img/ with `hcomm-viz`.
#
#   scripts/render-svgs.sh           rewrite docs/img/*.svg
#   scripts/render-svgs.sh --check   fail if a committed drawing is out of date
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [ "${1:-}" = "--check" ]; then
    check=true
fi

# name, then hcomm-viz arguments
drawings=(
    "ring_all_gather ring_all_gather --world 4"
    "bruck_all_gather bruck_all_gather --world 5"
    "two_level_all_gather two_level_all_gather --world 4 --scalar local=2"
    "nonblocking_ring nonblocking_ring --world 4"
    "deadlock shift_by_two --world 4"
    "unmatched_send send_without_recv --world 3"
    "postcondition ring_stops_early --world 4"
)

cargo build -q -p hcomm-viz
viz=target/debug/hcomm-viz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p docs/img
stale=0
for d in "${drawings[@]}"; do
    read -r name args <<<"$d"
    # shellcheck disable=SC2086 # the arguments are words
    "$viz" $args -o "$tmp/$name.svg"
    if $check; then
        if ! cmp -s "$tmp/$name.svg" "docs/img/$name.svg"; then
            echo "docs/img/$name.svg is out of date: run scripts/render-svgs.sh" >&2
            stale=1
        fi
    else
        cp "$tmp/$name.svg" "docs/img/$name.svg"
        echo "docs/img/$name.svg"
    fi
done
exit $stale
