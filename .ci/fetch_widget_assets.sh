#!/usr/bin/env bash
# Fetch the two browser-side files an offline widget export needs, from the npm registry, into an
# uncommitted folder (widgets/static/vendor/, ignored by git). Idempotent: a second run with the
# files present does nothing. Used by `tsevo report RUN --html` (widgets/export.py) and the browser
# tier; the default ipywidgets export would load them from CDNs that are unreachable offline.
#   usage: .ci/fetch_widget_assets.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-widgets/static/vendor}"
HTML_MANAGER="@jupyter-widgets/html-manager@1.0.7"
REQUIREJS="requirejs@2.3.8"
if [ -f "$DEST/html-manager/dist/embed-amd.js" ] && [ -f "$DEST/requirejs/require.js" ]; then
  echo "widget assets: present in $DEST"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "widget assets: npm not found; offline HTML export will be unavailable (install nodejs/npm)" >&2
  exit 1
fi
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$HTML_MANAGER" "$REQUIREJS" >/dev/null)
mkdir -p "$DEST/html-manager" "$DEST/requirejs"
tar -xzf "$tmp"/jupyter-widgets-html-manager-*.tgz -C "$DEST/html-manager" --strip-components=1
tar -xzf "$tmp"/requirejs-*.tgz -C "$DEST/requirejs" --strip-components=1
test -f "$DEST/html-manager/dist/embed-amd.js" && test -f "$DEST/requirejs/require.js"
echo "widget assets: $HTML_MANAGER and $REQUIREJS in $DEST ($(( $(date +%s) - start ))s)"
