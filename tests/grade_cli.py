"""Driving `python -m coursekit grade` the way a TA does, and reading back what it wrote.

Shared by the grading tests (honest styles, attacks, bad inputs) and assignments/<hw>/tests/tamper_report.py. Only the
command line and the documented outputs are used (docs/GRADE_RECORDS.md): grades.csv, records/<id>.json,
feedback/<id>.md. Every batch runs with COURSEKIT_TEST_BATCH=<tag> in its environment, so the processes it
starts can be found afterwards (`leftover_processes`).
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from coursekit import REPO_ROOT as REPO
from coursekit import build

PYTHON = REPO / ".venv" / "bin" / "python" if (REPO / ".venv" / "bin" / "python").exists() else Path(sys.executable)
TIMEOUT = float(os.environ.get("COURSEKIT_TEST_TIMEOUT", "120"))   # per submission; raise on a loaded machine
FIXED_COLUMNS = ("file", "id", "status")
TRAILING_COLUMNS = ("total", "possible", "otter_total", "flags")
FORMULA_STARTS = ("=", "+", "-", "@")


@dataclass(frozen=True)
class Release:
    """The committed build of one assignment: what the corpora start from and grade with."""
    name: str
    solution: Path
    student: Path
    autograder: Path

    @classmethod
    def of(cls, name: str) -> "Release":
        assignment = build.Assignment(name)
        dirs = assignment.release_dirs()
        return cls(name, dirs["solutions"] / assignment.notebook_name, dirs["student"] / assignment.notebook_name,
                   assignment.autograder_zip())


def question_names(zip_path: Path) -> list[str]:
    """Auto-graded questions of the autograder zip, in otter's order (tests/<q>.py)."""
    with zipfile.ZipFile(zip_path) as zf:
        names = [Path(n).stem for n in zf.namelist() if n.startswith("tests/") and n.endswith(".py")]
    return sorted(names, key=lambda q: (int("".join(c for c in q if c.isdigit())), q))


def _clock_ticks_now() -> int:
    """Now, in the unit of /proc/<pid>/stat's start time (clock ticks since boot)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


@dataclass
class Batch:
    subs: Path
    out: Path
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    tag: str
    started_ticks: int
    rows: list[dict] = field(default_factory=list)

    def row(self, id_: str) -> dict:
        return next(r for r in self.rows if unescape(r["id"]) == id_)

    def record(self, id_: str) -> dict:
        return json.loads((self.out / "records" / f"{id_}.json").read_text(encoding="utf-8"))

    def feedback(self, id_: str) -> str:
        return (self.out / "feedback" / f"{id_}.md").read_text(encoding="utf-8")

    def records(self) -> list[dict]:
        return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((self.out / "records").glob("*.json"))]

    def records_by_sha(self) -> dict[str, dict]:
        return {r["sha256"]: r for r in self.records() if r.get("sha256")}

    def records_by_file(self) -> dict[str, dict]:
        """Records by the submitted name as the grader shows it (files it never read may have no sha256)."""
        return {r["file"]: r for r in self.records()}

    def row_for_sha(self, sha: str) -> dict:
        """The row of the submission whose bytes have this sha256 (any file name works)."""
        return self.row(self.records_by_sha()[sha]["id"])

    def row_for_file(self, path: Path) -> dict:
        return self.row_for_sha(sha256_file(path))

    def explain(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.0f} s\n--- stdout\n{self.stdout[-3000:]}\n" \
               f"--- stderr\n{self.stderr[-3000:]}"


def grade(subs: Path, out: Path, hw: str, *, jobs: int = 2, timeout: float = TIMEOUT, otter_pass: bool = False,
          extra: tuple[str, ...] = (), limit_s: float = 3600, tag: str | None = None) -> Batch:
    """Run `python -m coursekit grade SUBS --out OUT --hw HW` and read grades.csv (when there is one).
    The command and everything it starts see COURSEKIT_TEST_BATCH=<tag> in their environment."""
    tag = tag or uuid.uuid4().hex[:12]
    cmd = [str(PYTHON), "-m", "coursekit", "grade", str(subs), "--out", str(out), "--hw", hw, "--jobs", str(jobs),
           "--timeout", f"{timeout:g}", *(["--otter-pass"] if otter_pass else ["--no-otter-pass"]), *extra]
    env = {**os.environ, "COURSEKIT_TEST_BATCH": tag}
    started_ticks, start = _clock_ticks_now(), time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n[test] killed after {limit_s:.0f} s"
    except BaseException:  # an interrupted test run takes its batch with it
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    batch = Batch(subs, out, proc.returncode, time.monotonic() - start, stdout, stderr, tag, started_ticks)
    csv_path = out / "grades.csv"
    if csv_path.exists():
        with open(csv_path, newline="", encoding="utf-8") as f:
            batch.rows = list(csv.DictReader(f))
    return batch


def unescape(cell: str) -> str:
    """A CSV cell as written before formula escaping (a leading ' before = + - @ removed)."""
    return cell[1:] if cell[:1] == "'" and cell[1:2] in FORMULA_STARTS else cell


def full_marks(row: dict) -> bool:
    return row["status"] == "graded" and row["total"] != "" and float(row["total"]) == float(row["possible"]) > 0


def question_scores(row: dict, questions: list[str]) -> dict[str, float]:
    return {q: float(row[q] or 0) for q in questions}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree_digest(root: Path) -> str:
    """Names, modes and bytes of everything under root (symlinks by target, not followed)."""
    h = hashlib.sha256()
    for path in sorted(Path(root).rglob("*"), key=lambda p: os.fsencode(p)):
        st = path.lstat()
        h.update(os.fsencode(path.relative_to(root)) + b"\0" + oct(st.st_mode).encode() + b"\0")
        if path.is_symlink():
            h.update(os.fsencode(os.readlink(path)))
        elif path.is_file():
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _proc_text(pid: str, name: str) -> str:
    try:
        return (Path("/proc") / pid / name).read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def leftover_processes(batch: Batch, markers: tuple[str, ...] = ()) -> list[str]:
    """Live processes started by this batch: started after it began and carrying its environment tag, or one
    of `markers` in their name (/proc/<pid>/comm) or command line. Polls for two seconds, so processes
    already killed and exiting are not counted."""
    deadline = time.monotonic() + 2
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            pid = entry.name
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            stat = _proc_text(pid, "stat")
            try:
                fields = stat.rsplit(")", 1)[1].split()
            except IndexError:
                continue
            state, start = fields[0], int(fields[19])
            if state in ("Z", "X") or start < batch.started_ticks:
                continue
            comm, cmdline = _proc_text(pid, "comm").strip(), _proc_text(pid, "cmdline")
            if (f"COURSEKIT_TEST_BATCH={batch.tag}" in _proc_text(pid, "environ")
                    or any(m in comm or m in cmdline for m in markers)):
                found.append(f"pid {pid} ({comm}): {cmdline[:200]}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def kill_leftovers(batch: Batch, markers: tuple[str, ...] = ()) -> None:
    """Clean up after a failed isolation test: SIGKILL, by pid, what `leftover_processes` found."""
    for line in leftover_processes(batch, markers):
        try:
            os.kill(int(line.split()[1]), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def check_csv_cells(rows: list[dict]) -> list[str]:
    """Cells a spreadsheet would run as a formula (must have been prefixed with ')."""
    return [f"{r.get('id')}: {k}={v!r}" for r in rows for k, v in r.items() if isinstance(v, str)
            and v.startswith(FORMULA_STARTS)]
