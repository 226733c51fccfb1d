#!/usr/bin/env bash
# Renders SVG drawings to PNG with a headless Chromium, to look at them as a
# browser shows them. Installs Debian's `chromium` when it is missing (needs
# root and network; not part of CI).
#
#   scripts/render-png.sh OUT_DIR FILE.svg...
set -euo pipefail

if [ "$#" -lt 2 ]; then
    echo "usage: $0 OUT_DIR FILE.svg..." >&2
    exit 2
fi
out=$1
shift
mkdir -p "$out"

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    browser=$(command -v chromium)
fi

for svg in "$@"; do
    # the drawing's own size, from the root element
    read -r w h < <(sed -n 's/.*<svg[^>]* height="\([0-9.]*\)"[^>]* width="\([0-9.]*\)".*/\2 \1/p' "$svg" | head -n 1)
    if [ -z "${w:-}" ]; then
        read -r w h < <(sed -n 's/.*<svg[^>]* width="\([0-9.]*\)"[^>]* height="\([0-9.]*\)".*/\1 \2/p' "$svg" | head -n 1)
    fi
    png="$out/$(basename "${svg%.svg}").png"
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size="${w%.*},${h%.*}" --screenshot="$png" "file://$(realpath "$svg")" 2>/dev/null
    echo "$png"
done
