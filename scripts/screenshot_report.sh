#!/usr/bin/env bash
# Render reports/dev.html in headless Chromium (no network, fresh profile) and save a PNG.
#   scripts/screenshot_report.sh [REPORT_HTML] [OUT_PNG] [WIDTH,HEIGHT]
# Needs the Debian package `chromium` (apt-get install -y chromium).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
report="$(realpath -m "${1:-$root/reports/dev.html}")"
out="$(realpath -m "${2:-$(mktemp --suffix=.png)}")"
size="${3:-1280,2400}"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "error: chromium not found (apt-get install -y chromium)" >&2
  exit 2
fi
[ -f "$report" ] || { echo "error: $report: no such file; run the evaluate stage first" >&2; exit 1; }
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" \
  --window-size="$size" --screenshot="$out" "file://$report" >/dev/null 2>&1
[ -s "$out" ] || { echo "error: chromium wrote no screenshot" >&2; exit 1; }
echo "$out"
