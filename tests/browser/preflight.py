"""What the browser test needs, and exactly what to install when it is missing.

`python tests/browser/preflight.py` exits 1 with install instructions (used by
`make test-browser`); the test fixtures call `missing()` and fail with the same text.
"""
from __future__ import annotations

import os
import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Debian's chromium; Playwright drives it through executable_path and downloads no browser.
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def pinned_playwright() -> str:
    match = re.search(r"^playwright==(\S+)", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    return match.group(1) if match else "?"


def missing() -> list[str]:
    """One line per missing requirement, each naming the command that installs it."""
    problems = []
    if not os.access(CHROMIUM, os.X_OK):
        problems.append(f"Chromium not found at {CHROMIUM}: run `sudo apt-get install chromium` "
                        "(or scripts/install-system-packages.sh as root), "
                        "or point CHROMIUM= at a Chromium binary")
    pin = pinned_playwright()
    try:
        installed = metadata.version("playwright")
    except metadata.PackageNotFoundError:
        installed = None
    if installed != pin:
        found = f"found {installed}" if installed else "not installed"
        problems.append(f"Playwright for Python {pin} needed ({found}): run "
                        f"`.venv/bin/python -m pip install playwright=={pin}` (or `make install`); "
                        "no `playwright install` is needed")
    return problems


if __name__ == "__main__":
    problems = missing()
    for line in problems:
        print(f"make test-browser: {line}", file=sys.stderr)
    sys.exit(1 if problems else 0)
