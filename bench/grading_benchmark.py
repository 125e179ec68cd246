"""Throughput of the TA grading command against serial `otter run`, and where the time goes.

    .venv/bin/python bench/grading_benchmark.py [--copies 2] [--jobs 2] [--skip-otter]

Grades the same N submissions (a mix of correct, partial and broken ones from tests/grading_corpus.py,
endless loops left out: they only measure the time limit) with

  (a) `python -m otter run` from the CLI, one after the other (what a TA would script), and
  (b) `python -m coursekit grade --jobs J` (the new command, one batch),

and prints both wall times, the ratio, and any submission whose scores differ. Then it profiles one
correct submission: kernel start, `import otter`, `import torch`, bare execution with nbclient (no
tests), and the new engine's time per submission (warm kernel: execution + tests). Prints figures only;
it is not a test. Uses the committed build (solutions/, student/, autograder/).
"""
from __future__ import annotations

import argparse
import os
import csv
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from grading_corpus import make_corpus  # noqa: E402

PY = sys.executable
SLOW_CASES = ("loop top level.ipynb", "loop in function.ipynb")


def build_set(folder: Path, copies: int) -> list[Path]:
    corpus = folder / "corpus"
    cases = make_corpus(corpus, REPO / "solutions/hw07/hw07.ipynb", REPO / "student/hw07/hw07.ipynb")
    subs = folder / "submissions"
    subs.mkdir()
    for i in range(copies):
        for name in cases:
            if name in SLOW_CASES:
                continue
            src = corpus / name
            shutil.copy2(src, subs / f"{i:02d} {name}")
    return sorted(subs.iterdir())


def children_cpu() -> float:
    """CPU seconds (user + system) of finished, waited-for child processes and their descendants."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def otter_run_serial(paths: list[Path], zip_path: Path, work: Path) -> tuple[float, dict[str, float | None]]:
    scores = {}
    start = time.monotonic()
    for i, path in enumerate(paths):
        out = work / f"otter-{i}"
        out.mkdir()
        try:
            subprocess.run([PY, "-m", "otter", "run", "--no-logo", "-a", str(zip_path), "-o", str(out), str(path)],
                           capture_output=True, timeout=600)
        except subprocess.TimeoutExpired:
            pass
        results = out / "results.json"
        if results.exists():
            data = json.loads(results.read_text())
            scores[path.name] = sum(t.get("score") or 0 for t in data["tests"] if "max_score" in t)
        else:
            scores[path.name] = None   # otter produced nothing (crash, invalid notebook, NoSuchKernel...)
        print(f"  otter run {i + 1}/{len(paths)}: {path.name}: {scores[path.name]}", file=sys.stderr, flush=True)
    return time.monotonic() - start, scores


def new_command(folder: Path, zip_path: Path, out: Path, jobs: int) -> tuple[float, dict[str, float], dict]:
    start = time.monotonic()
    subprocess.run([PY, "-m", "coursekit", "grade", str(folder), "--out", str(out), "--autograder", str(zip_path),
                    "--jobs", str(jobs), "--timeout", "120", "--force"], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - start
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["file"] != "points-per-question"]
    from coursekit import ta_grade

    ag = ta_grade.sha256_file(zip_path)
    records = {}
    for sub in ta_grade.find_submissions(folder):   # files with identical bytes share a record
        key = ta_grade.record_key(ta_grade.sha256_file(sub), ag)
        records[sub.name] = json.loads((out / "results" / f"{key}.json").read_text())["result"]
    return seconds, {r["file"]: float(r["total_points_earned"]) for r in rows}, records


def profile(zip_path: Path, work: Path) -> dict[str, float]:
    """Kernel start, imports, bare nbclient execution of the solution, engine time per submission."""
    import nbformat
    from jupyter_client.manager import start_new_kernel
    from nbclient import NotebookClient

    from coursekit import grading

    run_dir = work / "bare"
    shutil.copytree(REPO / "solutions/hw07", run_dir)
    fig = {}
    t = time.monotonic()
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(run_dir))
    fig["kernel start"] = time.monotonic() - t
    for label, code in (("import otter", "import otter"), ("import torch", "import torch, matplotlib.pyplot")):
        t = time.monotonic()
        kc.execute_interactive(code, timeout=120, output_hook=lambda m: None)
        fig[label] = time.monotonic() - t
    kc.stop_channels()
    km.shutdown_kernel(now=True)

    host = subprocess.run([PY, "-X", "importtime", "-c", "import otter.cli"], capture_output=True, text=True)
    fig["otter CLI import on the host"] = int(host.stderr.strip().splitlines()[-1].split("|")[1]) / 1e6

    times = []
    for _ in range(3):
        nb = nbformat.read(run_dir / "hw07.ipynb", as_version=4)
        # "no tests": without the grader.check cells and the export cell (in grading mode that one is skipped)
        nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and re.search(r"grader\.(check|export)\(",
                                                                                         c.source))]
        t = time.monotonic()
        NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(run_dir)}},
                       allow_errors=True).execute()
        times.append(time.monotonic() - t)
    fig["bare nbclient: kernel start + run, no check/export cells"] = min(times)

    copies = [work / f"sol-{i}.ipynb" for i in range(4)]
    for c in copies:
        shutil.copy2(REPO / "solutions/hw07/hw07.ipynb", c)
    t = time.monotonic()
    results = grading.grade_many(copies, zip_path, jobs=1, spares=1)
    wall = time.monotonic() - t
    fig["engine: execution + tests per submission (warm kernel)"] = min(r.seconds for r in results)
    fig["engine: wall per submission, jobs=1 (4 in a row)"] = wall / len(copies)
    t = time.monotonic()
    grading.grade_many(copies[:1], zip_path, jobs=1, spares=0)
    fig["engine: one submission alone (cold start included)"] = time.monotonic() - t
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=2, help="copies of the corpus (16 cases each)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-otter", action="store_true", help="skip the slow serial otter run baseline")
    ap.add_argument("--autograder", type=Path, default=REPO / "autograder/hw07/hw07-autograder.zip")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        work = Path(tmp)
        paths = build_set(work, args.copies)
        print(f"{len(paths)} submissions, {args.jobs} jobs, machine with {__import__('os').cpu_count()} cores")

        load = os.getloadavg()[0]
        cpu = children_cpu()
        new_s, new_scores, records = new_command(work / "submissions", args.autograder, work / "out", args.jobs)
        new_cpu = children_cpu() - cpu
        print(f"(b) python -m coursekit grade --jobs {args.jobs}: {new_s:7.1f} s wall ({new_s / len(paths):.2f} s per "
              f"submission), {new_cpu:6.1f} s CPU ({new_cpu / len(paths):.2f} s per submission); load before "
              f"{load:.1f}")
        if not args.skip_otter:
            load = os.getloadavg()[0]
            cpu = children_cpu()
            otter_s, otter_scores = otter_run_serial(paths, args.autograder, work)
            otter_cpu = children_cpu() - cpu
            print(f"(a) serial otter run CLI:               {otter_s:7.1f} s wall ({otter_s / len(paths):.2f} s per "
                  f"submission), {otter_cpu:6.1f} s CPU ({otter_cpu / len(paths):.2f} s per submission); load "
                  f"before {load:.1f}")
            print(f"    speed-up (a)/(b): {otter_s / new_s:.2f}x wall, {otter_cpu / new_cpu:.2f}x CPU "
                  f"(the machine is shared: wall times depend on the others' load)")
            same = differ = 0
            for name, theirs in otter_scores.items():
                ours = new_scores[name]
                if theirs is None:
                    note = "otter run produced no results"
                    print(f"    {name}: otter run: none ({note}); new: {ours:g} ({records[name]['reason']})")
                elif abs(theirs - ours) < 1e-9:
                    same += 1
                else:
                    differ += 1
                    print(f"    DIFFERENT {name}: otter run {theirs:g}, new {ours:g} ({records[name]['reason']})")
            print(f"    identical scores: {same}, different: {differ}, otter run without results: "
                  f"{sum(v is None for v in otter_scores.values())}")
        print("Profile (one correct submission):")
        for label, seconds in profile(args.autograder, work).items():
            print(f"    {label:55s} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
