"""Print how long the release build and grading one notebook take (figures, no assertions).

    .venv/bin/python bench/release_benchmark.py [NAME ...]     (default: every assignment; make bench HW=NAME)
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from coursekit import build, grading


def timed(label: str, fn):
    start = time.monotonic()
    value = fn()
    print(f"{label:58s} {time.monotonic() - start:7.1f} s", flush=True)
    return value


def bench(assignment: build.Assignment) -> None:
    print(f"== {assignment.name}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        timed("release, solutions not executed (--no-execute)",
              lambda: build.build(assignment, out_root=root / "a", execute_solutions=False, log=lambda *_: None))
        timed("release, full (make release)",
              lambda: build.build(assignment, out_root=root / "b", log=lambda *_: None))
    zip_path = assignment.autograder_zip()
    solution = assignment.release_dirs()["solutions"] / assignment.notebook_name
    student = assignment.release_dirs()["student"] / assignment.notebook_name
    result = timed("grade the solution notebook (otter pass)", lambda: grading.grade_one(solution, zip_path))
    print(f"    score {result.total:g} / {sum(q.max_score for q in result.questions.values()):g}")
    timed("grade the untouched student notebook (otter pass)", lambda: grading.grade_one(student, zip_path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", metavar="NAME", help="default: every assignment")
    args = parser.parse_args()
    for name in args.assignments or build.assignment_names():
        bench(build.Assignment(name))


if __name__ == "__main__":
    main()
