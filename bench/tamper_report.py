"""Print the tamper corpus table: otter's score, the final (verified) score and the flags per technique.

    .venv/bin/python bench/tamper_report.py

Each notebook is the solution with one misconception per question injected ("base"), plus one
tampering technique from tests/tamper_corpus.py. Figures only; tests/test_tamper.py asserts.
"""
from __future__ import annotations

import copy
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import nbformat  # noqa: E402

import tamper_corpus  # noqa: E402
from coursekit import grading, harness, verify  # noqa: E402
from coursekit.build import Assignment  # noqa: E402


def main() -> None:
    assignment = Assignment("hw07")
    solution = nbformat.read(assignment.release_dirs()["solutions"] / assignment.notebook_name, as_version=4)
    base = tamper_corpus.base_notebook(solution, harness.load_catalogue(assignment))
    notebooks = {"solution": solution, "base": base}
    notebooks.update({t: tamper_corpus.tampered(base, t) for t in sorted(tamper_corpus.TECHNIQUES)})
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, nb in notebooks.items():
            path = Path(tmp) / name / assignment.notebook_name
            path.parent.mkdir()
            nbformat.write(nb, path)
            paths.append(path)
        start = time.monotonic()
        otter = grading.grade_many(paths, assignment.autograder_zip(), jobs=2, timeout=120)
        final = verify.verify_results(copy.deepcopy(otter), assignment.autograder_zip(), jobs=2)
        seconds = time.monotonic() - start
    print(f"{'notebook':28s} {'otter':>7s} {'final':>7s}  flags (first)")
    for name, o, f in zip(notebooks, otter, final):
        otter_text = f"{o.total:g}" if o.status == "ok" else o.status
        print(f"{name:28s} {otter_text:>7s} {f.total if f.status == 'ok' else 0:7g}  {len(f.flags):2d} "
              f"{f.flags[0][:70] if f.flags else ''}")
    print(f"\n{len(notebooks)} notebooks graded and verified in {seconds:.0f} s (2 jobs)")


if __name__ == "__main__":
    main()
