#!/usr/bin/env bash
# The Debian packages the project needs outside its venv, installed with apt-get
# when running as root; otherwise the exact command to run is printed.
#   bubblewrap                the grading sandbox
#   chromium                  `make test-browser` (Playwright drives it; no browser download)
#   fonts-liberation, fonts-noto-color-emoji
#                             readable text and otter's emoji in the browser screenshots
# Never fails the install: `make test-browser` says what is missing when it runs.
set -euo pipefail

PACKAGES=(bubblewrap chromium fonts-liberation fonts-noto-color-emoji)

missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-packages: not a Debian system; install the equivalents of: ${missing[*]}" >&2
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-packages: missing ${missing[*]}; run as root:" >&2
    echo "    apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 0
fi
echo "install-system-packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
