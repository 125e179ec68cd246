"""UNTRUSTED SIDE: otter's own grading pass, inside its own sandbox.

`python -I inside_sandbox_otter.py AUTOGRADER_ZIP NOTEBOOK SUBMISSION_DIR`
copies the submission into the working directory, runs `otter run` on it
(hidden tests run in the student's kernel, as on Gradescope) and sends
otter's results.json over the channel (fd 4). The examiner only reads the
per-question scores from it, as a cross-check column; none of its text
reaches feedback.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

REPLIES = os.dup(4)
os.close(4)
os.close(3)


def main() -> None:
    zip_path, notebook, source = sys.argv[1:4]
    for entry in os.scandir(source):
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry.path, os.path.join(os.getcwd(), entry.name))
    os.makedirs("otter_out", exist_ok=True)
    subprocess.run([sys.executable, "-m", "otter", "run", "-a", zip_path, "-o", "otter_out", notebook],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = None
    path = os.path.join("otter_out", "results.json")
    if os.path.exists(path) and os.path.getsize(path) < (16 << 20):
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    wire.send(REPLIES, {"results": {"tests": [{"name": t.get("name"), "score": t.get("score")}
                                              for t in (results or {}).get("tests", []) if isinstance(t, dict)]}})


if __name__ == "__main__":
    main()
