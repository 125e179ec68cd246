"""Throughput of `coursekit grade` (sandbox + examiner) against serial `otter run`, and what each pass costs.

    .venv/bin/python bench/grading_benchmark.py [--hw NAME] [--count 40] [--jobs 2] [--skip-otter-run]

Builds COUNT submissions from the committed release (the solution, the untouched stubs and the
misconception catalogue's variants injected into the solution), then grades the same folder

  (a) with `python -m otter run`, one notebook after the other (what a TA would script);
  (b) with `coursekit grade --jobs J` (the default: sandboxed notebook + examiner);
  (c) with `coursekit grade --jobs J --otter-pass` (otter's own pass added, as a column).

Prints wall time, CPU per submission, the speed-up over (a), the seconds each pass takes per
submission (from the records), and every submission whose otter total differs from the examiner's.
It asserts nothing: figures only.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from coursekit import build, harness

PY = sys.executable


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build_set(folder: Path, assignment: build.Assignment, count: int) -> list[Path]:
    dirs = assignment.release_dirs()
    solution = dirs["solutions"] / assignment.notebook_name
    stub = dirs["student"] / assignment.notebook_name
    base = nbformat.read(solution, as_version=4)
    variants = harness.load_catalogue(assignment, questions=None)
    folder.mkdir()
    paths = []
    for i in range(count):
        path = folder / f"{i:03d}.ipynb"
        if i % 5 == 0:
            shutil.copy2(solution, path)
        elif i % 5 == 1:
            shutil.copy2(stub, path)
        else:
            nbformat.write(harness.inject(base, variants[i % len(variants)].source), path)
        paths.append(path)
    return paths


def timed(cmd: list[str]) -> tuple[float, float]:
    cpu, start = children_cpu(), time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start, children_cpu() - cpu


def otter_run_all(paths: list[Path], zip_path: Path, out: Path) -> tuple[float, float, dict[str, float | None]]:
    totals: dict[str, float | None] = {}
    cpu, start = children_cpu(), time.monotonic()
    for path in paths:
        target = out / path.stem
        target.mkdir(parents=True)
        subprocess.run([PY, "-m", "otter", "run", "-a", str(zip_path), "-o", str(target), str(path)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        results = target / "results.json"
        if results.exists():
            data = json.loads(results.read_text())
            totals[path.name] = sum(float(t.get("score") or 0) for t in data.get("tests", [])
                                    if t.get("name") != "Public Tests")
        else:
            totals[path.name] = None
    return time.monotonic() - start, children_cpu() - cpu, totals


def records(out: Path) -> dict[str, dict]:
    return {r["file"]: r for r in (json.loads(p.read_text()) for p in (out / "records").glob("*.json"))}


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", default=None)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-otter-run", action="store_true", help="skip (a), the slowest part")
    args = ap.parse_args()
    names = build.assignment_names()
    assignment = build.Assignment(args.hw or names[0])
    zip_path = assignment.autograder_zip()
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        tmp = Path(tmp)
        paths = build_set(tmp / "submissions", assignment, args.count)
        n = len(paths)
        print(f"{n} submissions of {assignment.name}; jobs={args.jobs}")
        rows = []
        otter_totals: dict[str, float | None] = {}
        if not args.skip_otter_run:
            wall, cpu, otter_totals = otter_run_all(paths, zip_path, tmp / "otter-run")
            rows.append(("serial otter run", wall, cpu))
        for label, extra in (("coursekit grade", []), ("coursekit grade --otter-pass", ["--otter-pass"])):
            out = tmp / label.replace(" ", "_")
            wall, cpu = timed([PY, "-m", "coursekit", "grade", str(tmp / "submissions"), "--out", str(out),
                               "--autograder", str(zip_path), "--jobs", str(args.jobs), *extra])
            rows.append((label, wall, cpu))
            graded = records(out)
            examiner = mean(r["seconds"].get("examiner") for r in graded.values())
            otter = mean(r["seconds"].get("otter") for r in graded.values())
            print(f"  {label}: examiner pass {examiner:.2f} s per submission (wall, in its worker)"
                  + (f", otter pass {otter:.2f} s" if extra else ""))
            if otter_totals:
                differ = [(f, otter_totals[f], r["total"]) for f, r in graded.items()
                          if otter_totals.get(f) is not None and abs(otter_totals[f] - r["total"]) > 1e-9]
                print(f"  {label}: {len(differ)} submissions where serial otter run's total differs from the "
                      f"examiner's" + "".join(f"\n    {f}: otter {a:g}, examiner {b:g}" for f, a, b in differ[:10]))
        print(f"\n{'run':32} {'wall s':>8} {'CPU s/sub':>10} {'speed-up':>9}")
        base = rows[0][1] if not args.skip_otter_run else None
        for label, wall, cpu in rows:
            speed = f"{base / wall:8.2f}x" if base else "       -"
            print(f"{label:32} {wall:8.1f} {cpu / n:10.2f} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
