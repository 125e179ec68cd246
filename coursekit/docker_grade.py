"""Grade in otter's Docker image with one GPU per container — UNVERIFIED here (no Docker engine, no GPU).

`otter grade` never passes a GPU to its containers (otter/grade/containers.py creates them without
`gpus=`), and it reads each container's results back by dill-loading results.pkl. This wrapper keeps
otter's image build (`otter.grade.containers.build_image`: the same autograder zip, unchanged) and
replaces the per-container step:

* one container per GPU: GPU i is passed as `--gpus device=i` and is busy until that container ends;
  submissions wait for a free GPU (a queue of device ids);
* a wall-clock limit per container (killed at the deadline);
* results come back as results.json (copied out of /autograder/results/), parsed with
  `coursekit.grading.parse_results_json`; no pickle is loaded on the host.

The image must have a CUDA build of torch: leave torch unpinned to a CPU index in requirements.txt (the
image's pip then takes the CUDA wheel), and the host needs the NVIDIA container toolkit.

    python -m coursekit.docker_grade SUBMISSIONS_DIR --out OUT --gpus 0,1 [--timeout 600] [--image ubuntu:22.04]

It writes OUT/grades.csv with the same layout as `python -m coursekit grade`.
"""
from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import REPO_ROOT
from .grading import GradeResult, SubmissionError, load_submission, parse_results_json
from .ta_grade import Record, find_submissions, grades_csv, question_names, write_atomic


def grade_in_container(image: str, submission: Path, gpu: str | None, timeout: float) -> GradeResult:
    from python_on_whales import docker

    container = docker.container.create(image, command=["/autograder/run_autograder"], networks=["none"],
                                        gpus=f"device={gpu}" if gpu is not None else None)
    timed_out = threading.Event()
    timer = threading.Timer(timeout, lambda: (timed_out.set(), docker.container.kill(container)))
    try:
        with tempfile.TemporaryDirectory() as staging:
            # a zip is unpacked on the host (safely, see grading.load_submission); its notebook goes in
            _, name = load_submission(submission, Path(staging))
            docker.container.copy(str(Path(staging) / name), (container, "/autograder/submission/hw07.ipynb"))
        docker.container.start(container)
        timer.start()
        docker.container.wait(container)
        timer.cancel()
        if timed_out.is_set():
            return GradeResult(submission, "timeout", message=f"timeout after {timeout:.0f} s",
                               reason=f"timeout after {timeout:.0f} s")
        with tempfile.TemporaryDirectory() as tmp:
            try:
                docker.container.copy((container, "/autograder/results/results.json"), tmp)
                data = json.loads((Path(tmp) / "results.json").read_text(encoding="utf-8"))
            except Exception as e:
                return GradeResult(submission, "error", message=f"no results.json ({e})", reason="no results")
        questions = parse_results_json(data)
        if not questions:
            why = next((t.get("output", "") for t in data.get("tests", []) if "Error" in t.get("name", "")), "")
            return GradeResult(submission, "error", message=why[:500] or "no scores", reason="autograder error")
        return GradeResult(submission, "ok", questions, reason="ok")
    finally:
        timer.cancel()
        try:
            container.remove(force=True)
        except Exception:
            pass


def main(argv: list[str] | None = None) -> int:
    from otter.grade.containers import build_image
    from otter.run import AutograderConfig

    ap = argparse.ArgumentParser(prog="python -m coursekit.docker_grade", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--autograder", type=Path, default=REPO_ROOT / "autograder/hw07/hw07-autograder.zip")
    ap.add_argument("--gpus", default="", help="comma-separated device ids, one container each (none: CPU, 1 at a time)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--image", default="ubuntu:22.04", help="base image (otter grade's default)")
    args = ap.parse_args(argv)

    image = build_image(str(args.autograder), args.image, "hw07", AutograderConfig({}))
    gpus: queue.Queue = queue.Queue()
    devices = [d.strip() for d in args.gpus.split(",") if d.strip()] or [None]
    for d in devices:
        gpus.put(d)

    def one(path: Path) -> GradeResult:
        gpu = gpus.get()
        try:
            return grade_in_container(image, path, gpu, args.timeout)
        except SubmissionError as e:
            return GradeResult(path, "error", message=str(e), reason=str(e))
        except Exception as e:
            return GradeResult(path, "error", message=f"{type(e).__name__}: {e}", reason="container error")
        finally:
            gpus.put(gpu)

    subs = find_submissions(args.submissions)
    with ThreadPoolExecutor(len(devices)) as pool:
        results = list(pool.map(one, subs))
    records = [Record(p.name, "", r) for p, r in zip(subs, results)]
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "grades.csv", grades_csv(records, question_names(args.autograder)))
    print(f"wrote {args.out / 'grades.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
