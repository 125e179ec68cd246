"""TRUSTED SIDE: grade one submission from outside its sandbox.

An examiner worker loads the autograder's test files and checks once (they
exist only here), then for each submission:

1. starts the student's notebook in a sandbox (`coursekit.sandbox`), which
   runs every cell top to bottom and then serves requests;
2. runs every test case of the autograder here, giving it stand-ins for the
   student's names (`coursekit.remote`): the checks build the inputs, call the
   student's functions over the plain-data channel and compare with what they
   compute themselves;
3. optionally runs otter's own in-kernel pass (`otter run`, the same zip) in a
   second sandbox, for the cross-check column.

No student code ever runs in this process. What it returns is plain data for
the batch (`coursekit.batch`) to sign and write.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import otter_adapter, sandbox, wire
from .remote import GraderSetupError, SandboxLost, Session, stand_ins

RUNNER_FILES = ("inside_sandbox.py", "inside_sandbox_otter.py", "wire.py", "figure_data.py")
MESSAGE_CAP = 2_000


@dataclass
class Autograder:
    """An autograder zip unpacked once, by the trusted side."""
    zip_path: Path
    root: Path
    assignment: str
    checks_package: str | None
    sandbox_modules: tuple[str, ...]

    @property
    def tests_dir(self) -> Path:
        return self.root / "source" / "tests"

    @property
    def files_dir(self) -> Path:
        return self.root / "source" / "files"


def unpack_autograder(zip_path: Path, root: Path, max_entries: int = 2_000) -> Autograder:
    import zipfile

    source = root / "source"
    with zipfile.ZipFile(zip_path) as zf:
        if len(zf.infolist()) > max_entries:
            raise ValueError(f"{zip_path}: more than {max_entries} entries")
        zf.extractall(source)
    config = json.loads((source / "otter_config.json").read_text(encoding="utf-8"))
    assignment = str(config.get("assignment_name", ""))
    package, modules = None, ()
    for init in sorted((source / "files").glob("*_checks/__init__.py")):
        package = init.parent.name
        text = init.read_text(encoding="utf-8")
        namespace: dict = {}
        for line in text.splitlines():  # SANDBOX_MODULES = (...) is a literal: read it without importing
            if line.startswith("SANDBOX_MODULES"):
                namespace["SANDBOX_MODULES"] = __import__("ast").literal_eval(line.split("=", 1)[1].strip())
        modules = tuple(str(m) for m in namespace.get("SANDBOX_MODULES", ()))
    runner = root / "runner"
    runner.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).parent
    for name in RUNNER_FILES:
        shutil.copy2(here / name, runner / name)
    if package:  # the sandbox gets the package's __init__ and its sandbox-visible modules, nothing else
        visible = runner / "checks" / package
        visible.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / "files" / package / "__init__.py", visible / "__init__.py")
        for module in modules:
            src = source / "files" / package / f"{module}.py"
            if src.exists():
                shutil.copy2(src, visible / src.name)
    otter_runner = root / "otter_runner"
    otter_runner.mkdir(exist_ok=True)
    shutil.copy2(zip_path, otter_runner / "autograder.zip")
    for name in ("inside_sandbox_otter.py", "wire.py"):
        shutil.copy2(here / name, otter_runner / name)
    for tree in (runner, otter_runner):
        for path in [tree, *tree.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return Autograder(Path(zip_path), root, assignment, package,
                      tuple(f"{package}.{m}" for m in modules) if package else ())


def student_files(autograder: Autograder) -> list[Path]:
    """Files the release gives students (the probe, public tests), never the checks package."""
    files = autograder.files_dir
    shipped = [p for p in files.iterdir() if p.name != autograder.checks_package] if files.exists() else []
    return shipped


# ----------------------------------------------------------------------------- one worker


_worker: dict = {}


def init_worker(zip_path: str, slot_counter, use_sandbox: bool, limits: sandbox.Limits) -> None:
    """Runs once per worker process: unpack and import the checks (before any sandbox exists)."""
    import torch  # imported once, not per submission

    torch.set_num_threads(1)  # the checks' tensors are small: thread hand-offs cost more than they save

    with slot_counter.get_lock():
        slot = slot_counter.value
        slot_counter.value += 2
    root = Path(tempfile.mkdtemp(prefix="coursekit-examiner-"))
    autograder = unpack_autograder(Path(zip_path), root)
    sys.path.insert(0, str(autograder.files_dir))
    if autograder.checks_package:
        importlib.import_module(autograder.checks_package)
    questions = otter_adapter.load_questions(autograder.tests_dir)
    import gc

    gc.collect()
    gc.freeze()  # the checks collect garbage before every memory reading: skip this long-lived heap each time
    _worker.update(autograder=autograder, questions=questions, slot=slot, use_sandbox=use_sandbox, limits=limits)


def _prepare(submission_dir: Path, notebook_name: str, cells: list[str], autograder: Autograder) -> Path:
    for src in student_files(autograder):
        dst = submission_dir / src.name
        if dst.is_dir():
            shutil.rmtree(dst)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    for path in [submission_dir, *submission_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return submission_dir


def _job_file(work: Path, payload: dict) -> Path:
    path = work / "job.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    path.chmod(0o644)
    return path


def _failure(exc: BaseException) -> tuple[str, tuple[str, ...]]:
    message = str(exc) or type(exc).__name__
    if type(exc).__name__ != "CheckFailure" and not isinstance(exc, AssertionError):
        message = f"{type(exc).__name__}: {message}"
    ids = getattr(exc, "misconceptions", ())
    return message[:MESSAGE_CAP], tuple(str(i)[:20] for i in ids)[:10] if isinstance(ids, tuple) else ()


def _reset_process_state() -> None:
    import torch

    torch.set_grad_enabled(True)


def examine(submission_dir: str, notebook_name: str, cells: list[str], otter_pass: bool) -> dict:
    """Grade one prepared submission; returns plain data (no student object survives this call)."""
    autograder: Autograder = _worker["autograder"]
    limits: sandbox.Limits = _worker["limits"]
    start = time.monotonic()
    submission = _prepare(Path(submission_dir), notebook_name, cells, autograder)
    scratch = Path(tempfile.mkdtemp(prefix="coursekit-job-"))
    runner = autograder.root / "runner"
    use_sandbox = _worker["use_sandbox"]
    inside = "/runner" if use_sandbox else str(runner)
    job = _job_file(scratch, {"cells": cells, "sandbox_modules": list(autograder.sandbox_modules),
                              "checks_path": f"{inside}/checks",
                              "copy_from": "/submission" if use_sandbox else None})
    shutil.copy2(job, submission / ".coursekit_job.json")
    (submission / ".coursekit_job.json").chmod(0o644)
    argv = [f"{sys.prefix}/bin/python", "-I", f"{inside}/inside_sandbox.py",
            ("/submission" if use_sandbox else str(submission)) + "/.coursekit_job.json"]
    box = sandbox.start(runner, submission, argv, slot=_worker["slot"], limits=limits, use_sandbox=use_sandbox)
    session = Session(box, autograder.sandbox_modules)
    result = {"status": "graded", "detail": "", "tests": [], "flags": []}
    try:
        ready = session.receive(timeout=limits.wall_seconds)
        if ready.get("ready") is not True:
            raise SandboxLost("the submission sent something else than the signal that its notebook had run")
        result["failed_cells"] = ready.get("failed_cells") if isinstance(ready.get("failed_cells"), int) else None
        notebook_seconds = time.monotonic() - start
        result["tests"] = _run_tests(session)
        result["notebook_seconds"] = round(notebook_seconds, 3)
    except SandboxLost as lost:
        result.update(status="timeout" if "time limit" in str(lost) else "error", detail=str(lost)[:500])
        result["tests"] = _run_tests(session) if session.lost else []
    finally:
        session.close()
        shutil.rmtree(scratch, ignore_errors=True)
    result["output"] = box.output_text()
    result["seconds"] = {"examiner": round(time.monotonic() - start, 3)}
    if otter_pass:
        otter_start = time.monotonic()
        result["otter"] = _otter_pass(submission, notebook_name, autograder, limits, use_sandbox)
        result["seconds"]["otter"] = round(time.monotonic() - otter_start, 3)
    return result


def _run_tests(session: Session) -> list[dict]:
    questions = _worker["questions"]
    names = sorted({p for q in questions for c in q.cases for p in c.params if p != "env"})
    try:
        values = stand_ins(session, names) if not session.lost else {}
    except SandboxLost:
        values = {}
    out = []
    for question in questions:
        for case in question.cases:
            entry = {"name": case.name, "question": question.name, "possible": case.points, "hidden": case.hidden,
                     "passed": False, "message": "", "misconceptions": []}
            if session.lost:
                entry["message"] = f"not run: {session.lost}"
            else:
                try:
                    case.function(**{p: values.get(p) for p in case.params})
                    entry["passed"] = True
                except SandboxLost as lost:
                    entry["message"] = f"your notebook stopped answering during this test: {lost}"
                except GraderSetupError as exc:
                    entry["message"] = f"the grader could not set up this test ({str(exc)[:300]}); ask your TA"
                    entry["grader_error"] = True
                except BaseException as exc:  # a failed check (or the check's own error on an odd value)
                    entry["message"], ids = _failure(exc)
                    entry["misconceptions"] = list(ids)
                finally:
                    _reset_process_state()
            entry["score"] = case.points if entry["passed"] else 0.0
            out.append(entry)
    return out


def _otter_pass(submission: Path, notebook_name: str, autograder: Autograder, limits: sandbox.Limits,
                use_sandbox: bool) -> dict:
    """otter's own grading of the same notebook (hidden tests in the kernel), sandboxed; a number, no feedback."""
    runner = autograder.root / "otter_runner"
    inside = "/runner" if use_sandbox else str(runner)
    argv = [f"{sys.prefix}/bin/python", "-I", f"{inside}/inside_sandbox_otter.py", f"{inside}/autograder.zip",
            notebook_name, "/submission" if use_sandbox else str(submission)]
    box = sandbox.start(runner, submission, argv, slot=_worker["slot"] + 1, limits=limits, use_sandbox=use_sandbox)
    session = Session(box, ())
    try:
        reply = session.receive(timeout=limits.wall_seconds)
        scores = otter_adapter.otter_question_scores(reply.get("results"))
        return {"scores": scores, "error": None if scores else "otter wrote no results"}
    except SandboxLost as lost:
        return {"scores": {}, "error": str(lost)[:300]}
    finally:
        session.close()
