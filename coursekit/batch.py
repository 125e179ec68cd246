"""TRUSTED SIDE: grade a folder of submissions (the `make grade` / `coursekit grade` command).

The main process reads every file once (`intake`), hands each gradable one to
an examiner worker (`examiner`: sandboxed notebook, checks run outside it),
and alone writes OUT: signed records as each submission finishes (so a batch
can be resumed), then grades.csv, feedback and the class report. A worker's
crash costs that submission a row with status "error", never the batch.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from . import intake, otter_adapter, records, sandbox
from .examiner import examine, init_worker
from .progress import progress


def _autograder_questions(zip_path: Path) -> tuple[str, list[otter_adapter.Question]]:
    import json

    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(zip_path) as zf:
        names = [n for n in zf.namelist() if n.startswith("tests/") and n.endswith(".py") or n == "otter_config.json"]
        for name in names:
            zf.extract(name, tmp)
        assignment = json.loads((Path(tmp) / "otter_config.json").read_text()).get("assignment_name", "")
        return str(assignment), otter_adapter.load_questions(Path(tmp) / "tests")


def _record(entry: intake.Entry, assignment: str, autograder_sha: str, questions, result: dict | None,
            sandboxed: bool) -> dict:
    record = {"schema": records.SCHEMA, "assignment": assignment, "file": entry.file, "id": entry.id,
              "sha256": entry.sha256, "autograder_sha256": autograder_sha, "status": entry.status,
              "detail": entry.detail, "questions": {}, "tests": [], "flags": [], "output": "", "otter_total": None,
              "seconds": {}}
    possible = {q.name: q.possible for q in questions}
    if result is not None:
        record.update(status=result["status"], detail=result.get("detail", ""), tests=result["tests"],
                      output=result.get("output", ""), seconds=result.get("seconds", {}))
        if result.get("failed_cells"):
            record["detail"] = record["detail"] or f"{result['failed_cells']} cell(s) raised an error"
    by_question = {q.name: {} for q in questions}
    for t in record["tests"]:
        by_question.setdefault(t["question"], {})[t["name"]] = bool(t["passed"])
    for q in questions:
        score = q.score(by_question.get(q.name, {})) if record["tests"] else 0.0
        record["questions"][q.name] = {"score": score, "possible": possible[q.name]}
    record["total"] = sum(v["score"] for v in record["questions"].values())
    record["possible"] = sum(possible.values())
    otter = (result or {}).get("otter")
    if otter is not None:
        scores = otter.get("scores", {})
        if scores:
            record["otter_total"] = sum(scores.get(q.name, 0.0) for q in questions)
            for q in questions:
                mine, theirs = record["questions"][q.name]["score"], scores.get(q.name, 0.0)
                if abs(mine - theirs) > 1e-9:
                    record["flags"].append(f"{q.name}: otter's in-kernel pass gives {theirs:g}, the examiner {mine:g}")
        elif record["status"] == "graded":
            record["flags"].append(f"otter's in-kernel pass produced no score ({otter.get('error')})")
    broken = sorted({t["question"] for t in record["tests"] if t.get("grader_error")})
    if broken:
        record["flags"].append(f"grader error in {', '.join(broken)}: a test's inputs could not be built")
    if not sandboxed and result is not None:
        record["flags"].append("graded without a sandbox (--no-sandbox)")
    record["seconds"]["total"] = round(sum(v for v in record["seconds"].values() if isinstance(v, (int, float))), 3)
    return record


def _default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def run(submissions: Path, out: Path, autograder_zip: Path, *, jobs: int | None = None, timeout: float = 300,
        memory_gib: float | None = None, force: bool = False, otter_pass: bool = True, use_sandbox: bool = True,
        misconceptions: Path | None = None, quiet: bool = False) -> int:
    start = time.monotonic()
    if use_sandbox:
        sandbox.require_bwrap()
    if not Path(submissions).is_dir():
        raise SystemExit(f"{submissions} is not a folder of submissions")
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("records", "feedback"):
        (out / sub).mkdir(exist_ok=True)
    key = records.load_key(out)
    autograder_sha = intake.hashlib.sha256(Path(autograder_zip).read_bytes()).hexdigest()
    assignment, questions = _autograder_questions(autograder_zip)
    entries = intake.list_folder(submissions)
    for entry in entries:
        intake.check_assignment(entry, assignment)

    done: dict[str, dict] = {}
    todo, reused = [], 0
    for entry in entries:
        previous = None if force else records.verified(out / "records" / f"{entry.id}.json", key)
        if previous and previous.get("sha256") == entry.sha256 and previous.get("autograder_sha256") == autograder_sha \
                and previous.get("file") == entry.file:
            done[entry.id] = previous
            reused += 1
        elif entry.status != "graded":
            done[entry.id] = _save(out, key, _record(entry, assignment, autograder_sha, questions, None, use_sandbox))
        else:
            todo.append(entry)
    limits = sandbox.Limits(wall_seconds=timeout)
    if memory_gib:
        limits.memory_bytes = int(memory_gib * (1 << 30))
    staging = Path(tempfile.mkdtemp(prefix="coursekit-grade-"))
    os.chmod(staging, 0o700)
    try:
        for record in _grade_all(todo, staging, autograder_zip, jobs or _default_jobs(), limits, otter_pass,
                                 use_sandbox, assignment, autograder_sha, questions):
            done[record["id"]] = _save(out, key, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ordered = [done[e.id] for e in entries if e.id in done]
    _write_outputs(out, ordered, [q.name for q in questions], misconceptions)
    if not quiet:
        print(records.summary(ordered, [q.name for q in questions], len(todo), reused, time.monotonic() - start))
        print(f"[grade] wrote {out / 'grades.csv'}, {out / 'feedback'}/, {out / 'report.html'}")
    return 0


def grade_notebooks(paths: list[Path], autograder_zip: Path, *, jobs: int = 2, otter_pass: bool = False,
                    timeout: float = 300, out: Path | None = None) -> list[dict]:
    """Grade these notebooks as one batch, exactly as `make grade` does; their records, in order."""
    with tempfile.TemporaryDirectory(prefix="coursekit-batch-") as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        names = []
        for i, path in enumerate(paths):
            names.append(f"{i:04d}-{Path(path).name}")
            shutil.copy2(path, folder / names[-1])
        out = out or Path(tmp) / "out"
        run(folder, out, autograder_zip, jobs=jobs, timeout=timeout, otter_pass=otter_pass, quiet=True)
        by_file = {}
        for record_path in (out / "records").glob("*.json"):
            record = records.json.loads(record_path.read_text(encoding="utf-8"))
            by_file[record["file"]] = record
        return [by_file[name] for name in names]


def _save(out: Path, key: bytes, record: dict) -> dict:
    records.sign(record, key)
    import json

    records.write_atomic(out / "records" / f"{record['id']}.json", json.dumps(record, indent=1, sort_keys=True))
    return record


def _grade_all(todo, staging, autograder_zip, jobs, limits, otter_pass, use_sandbox, assignment, autograder_sha,
               questions):
    """Yield a record per entry, as they finish; a broken worker pool is rebuilt for the rest."""
    remaining = list(todo)
    bar = progress(None, total=len(todo), desc="grading") if todo else None
    while remaining:
        slots = multiprocessing.get_context("spawn").Value("i", 0)
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(remaining)), mp_context=multiprocessing.get_context(
            "spawn"), initializer=init_worker, initargs=(str(autograder_zip), slots, use_sandbox, limits))
        futures = {}
        for entry in remaining:
            folder = intake.write_copy(entry, staging / entry.id)
            futures[pool.submit(examine, str(folder), entry.notebook_name, entry.cells, otter_pass)] = entry
        broken = []
        try:
            for future in as_completed(futures):
                entry = futures[future]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken.append(entry)
                    continue
                except Exception as exc:  # the grader's own failure on this submission: its row says so
                    result = {"status": "error", "detail": f"grader error: {type(exc).__name__}: {str(exc)[:300]}",
                              "tests": []}
                remaining.remove(entry)
                if bar is not None:
                    bar.update(1)
                yield _record(entry, assignment, autograder_sha, questions, result, use_sandbox)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for entry in broken:  # graded alone next round; a second crash is that submission's error
            shutil.rmtree(staging / entry.id, ignore_errors=True)
            if getattr(entry, "_crashed", False):
                remaining.remove(entry)
                entry.status, entry.detail = "error", "the grader's worker crashed while grading this submission"
                yield _record(entry, assignment, autograder_sha, questions, None, use_sandbox)
            entry._crashed = True
        jobs = 1 if broken else jobs
    if bar is not None:
        bar.close()


def _write_outputs(out: Path, ordered: list[dict], questions: list[str], misconceptions: Path | None) -> None:
    from .misconceptions import describe, load_ids_file

    table = load_ids_file(misconceptions) if misconceptions else {}
    records.write_atomic(out / "grades.csv", records.grades_csv(ordered, questions))
    for record in ordered:
        records.write_atomic(out / "feedback" / f"{record['id']}.md",
                             records.feedback_markdown(record, lambda ids: describe(ids, table)))
    try:
        from . import report

        report.write_report(out, misconceptions)
    except Exception as exc:  # the report is a view: its failure must not cost the grades
        print(f"[grade] the class report could not be written: {type(exc).__name__}: {exc}", file=sys.stderr)
