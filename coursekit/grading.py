"""Grade notebooks with a built autograder zip, using otter's own grading code.

`grade_many` is the one entry point the harness, the tests and the TA command
share. Each submission is graded by `otter run` in its own process with a time
limit, so an endless loop or a crashed kernel costs that submission, never the
batch. Results come back as JSON (otter's results.json), never as pickles.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

DEFAULT_TIMEOUT_S = 300


@dataclass
class QuestionResult:
    name: str
    score: float
    max_score: float
    output: str = ""

    @property
    def full_marks(self) -> bool:
        return self.max_score > 0 and abs(self.score - self.max_score) < 1e-9


@dataclass
class GradeResult:
    submission: Path
    status: str  # "ok", "timeout", "error"
    questions: dict[str, QuestionResult] = field(default_factory=dict)
    message: str = ""

    @property
    def total(self) -> float:
        return sum(q.score for q in self.questions.values())

    def score(self, question: str) -> float:
        return self.questions[question].score if question in self.questions else 0.0


def parse_results_json(data: dict) -> dict[str, QuestionResult]:
    questions = {}
    for test in data.get("tests", []):
        if "max_score" not in test or test.get("name") == "Public Tests":
            continue
        name = test["name"]
        questions[name] = QuestionResult(name, float(test.get("score") or 0.0), float(test["max_score"]),
                                         test.get("output", ""))
    return questions


def grade_one(submission: Path, autograder_zip: Path, timeout: float = DEFAULT_TIMEOUT_S) -> GradeResult:
    submission, autograder_zip = Path(submission), Path(autograder_zip)
    with tempfile.TemporaryDirectory(prefix="grade-") as out:
        cmd = [sys.executable, "-m", "otter", "run", "--no-logo", "-a", str(autograder_zip), "-o", out,
               str(submission)]
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return GradeResult(submission, "timeout", message=f"grading took longer than {timeout:.0f} s")
        results = Path(out) / "results.json"
        if not results.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
            return GradeResult(submission, "error", message=f"otter produced no results: {tail[0]}")
        questions = parse_results_json(json.loads(results.read_text(encoding="utf-8")))
        return GradeResult(submission, "ok", questions)


def grade_many(submissions: Iterable[Path], autograder_zip: Path, jobs: int | None = None,
               timeout: float = DEFAULT_TIMEOUT_S,
               on_result: Callable[[GradeResult], None] | None = None) -> list[GradeResult]:
    """Grade every submission (in parallel, `jobs` at a time); results in input order."""
    submissions = [Path(s) for s in submissions]
    jobs = jobs or os.cpu_count() or 1

    def work(path: Path) -> GradeResult:
        result = grade_one(path, autograder_zip, timeout)
        if on_result:
            on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(work, submissions))
