"""The class report: what a batch of grade records says about the class.

`write_report(OUT)` reads OUT/records/*.json (docs/GRADE_RECORDS.md) and
writes OUT/report.html (self-contained: figures are embedded PNG) and the same
tables as OUT/report/*.csv. `coursekit report OUT` calls `main`.

Records are data written by the trusted grading side, but they carry what
students chose (file names, their code's messages): every string is escaped
where it is shown, CSV cells cannot start a formula, and a record file that
does not parse or does not fit the schema is skipped and counted, never fatal.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import ASSIGNMENTS_DIR
from .misconceptions import Table, load_ids_file, load_misconceptions

MAX_RECORD_BYTES = 8 << 20
STATUSES = ("graded", "timeout", "error", "not graded")
NEGATIVE = -0.05          # discrimination below this is flagged; closer to 0 is noise at class sizes


class MalformedRecord(ValueError):
    pass


@dataclass(frozen=True)
class TestResult:
    name: str
    question: str
    score: float
    possible: float
    passed: bool
    message: str
    misconceptions: tuple[str, ...]


@dataclass
class GradeRecord:
    file: str
    id: str
    status: str
    detail: str
    assignment: str
    total: float
    possible: float
    questions: dict[str, tuple[float, float]]
    tests: list[TestResult]
    flags: list[str]
    seconds: dict[str, float]


# ---------------------------------------------------------------- reading records

def _reject_constant(name: str):
    raise MalformedRecord(f"non-finite number {name}")


def _get(data: dict, key: str, kind, default=None):
    """data[key] checked against the schema's type; `default` when absent (None: required)."""
    if key not in data or data[key] is None:
        if default is None:
            raise MalformedRecord(f"missing {key!r}")
        return default
    value = data[key]
    if kind is float:
        try:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise OverflowError
        except OverflowError:                       # also a JSON integer too large for a float
            raise MalformedRecord(f"{key!r} is not a finite number") from None
        return float(value)
    if not isinstance(value, kind):
        raise MalformedRecord(f"{key!r} is not a {kind.__name__}")
    return value


def _strings(values: list, key: str) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in values):
        raise MalformedRecord(f"{key!r} holds a non-string")
    return tuple(values)


def parse_record(data) -> GradeRecord:
    """A record dict checked against the schema; MalformedRecord if it does not fit."""
    if not isinstance(data, dict):
        raise MalformedRecord("not a JSON object")
    tests = []
    for entry in _get(data, "tests", list, []):
        if not isinstance(entry, dict):
            raise MalformedRecord("a test entry is not an object")
        tests.append(TestResult(
            name=_get(entry, "name", str), question=_get(entry, "question", str, ""),
            score=_get(entry, "score", float, 0.0), possible=_get(entry, "possible", float, 0.0),
            passed=_get(entry, "passed", bool),
            message=_get(entry, "message", str, ""),
            misconceptions=_strings(_get(entry, "misconceptions", list, []), "misconceptions")))
    questions = {}
    for name, entry in _get(data, "questions", dict, {}).items():
        if not isinstance(entry, dict):
            raise MalformedRecord(f"question {name!r} is not an object")
        questions[name] = (_get(entry, "score", float, 0.0), _get(entry, "possible", float, 0.0))
    timing = _get(data, "seconds", dict, {})
    seconds = {key: _get(timing, key, float, 0.0) for key in timing}
    record_id = _get(data, "id", str, "")
    return GradeRecord(
        file=_get(data, "file", str, record_id), id=record_id, status=_get(data, "status", str),
        detail=_get(data, "detail", str, ""), assignment=_get(data, "assignment", str, ""),
        total=_get(data, "total", float, 0.0), possible=_get(data, "possible", float, 0.0),
        questions=questions, tests=tests, flags=list(_strings(_get(data, "flags", list, []), "flags")),
        seconds=seconds)


def read_record(path: Path) -> GradeRecord:
    if path.is_symlink() or not path.is_file():
        raise MalformedRecord("not a regular file")
    try:                                            # no link, and no FIFO to block on, even if swapped in since
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise MalformedRecord(f"cannot be opened: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise MalformedRecord("not a regular file")
        raw = f.read(MAX_RECORD_BYTES + 1)           # the size on disk is not trusted: read at most this
    if len(raw) > MAX_RECORD_BYTES:
        raise MalformedRecord(f"larger than {MAX_RECORD_BYTES >> 20} MiB")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except MalformedRecord:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedRecord(f"not valid JSON: {type(exc).__name__}") from None
    return parse_record(data)


def load_records(records_dir: Path) -> tuple[list[GradeRecord], list[tuple[str, str]]]:
    """(records, [(file name, why skipped)]) from records_dir/*.json, in file-name order."""
    records, skipped = [], []
    for path in sorted(records_dir.glob("*.json")):
        try:
            records.append(read_record(path))
        except (MalformedRecord, OSError) as exc:
            skipped.append((path.name, str(exc)))
    return records, skipped


# ---------------------------------------------------------------- statistics

def natural_key(name: str) -> tuple:
    """q2 before q10, M4 before M18; names without a number last."""
    match = re.fullmatch(r"([A-Za-z_]*)(\d+)(.*)", name)
    return (0, match.group(1), int(match.group(2)), match.group(3)) if match else (1, name, 0, "")


@dataclass
class ScoreRow:
    question: str          # "total" for the whole assignment
    possible: float
    scores: list[float]

    def summary(self) -> dict[str, float | None]:
        s = self.scores
        return {"students": len(s), "mean": _mean(s), "median": statistics.median(s) if s else None,
                "sd": statistics.pstdev(s) if s else None, "min": min(s, default=None), "max": max(s, default=None),
                "mean_percent": _ratio(_mean(s), self.possible)}


@dataclass
class ItemRow:
    test: str
    question: str
    possible: float
    students: int
    passed: int
    difficulty: float | None       # mean score / possible; the pass rate for 0-point (public) tests
    discrimination: float | None   # point-biserial r of pass/fail with the rest-of-test score; None: undefined

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.students if self.students else None

    @property
    def note(self) -> str:
        if not self.students:
            return ""
        if self.passed == 0:
            return "nobody passed: check the prompt and the test"
        if self.discrimination is not None and self.discrimination < NEGATIVE:
            return "negative: weaker submissions pass it more often"
        if self.passed == self.students:
            return "everybody passed"
        if self.discrimination is not None and self.discrimination < 0.2:
            return "weak (< 0.2)"
        return ""

    @property
    def alarming(self) -> bool:
        """Worth a look at the test itself: nobody passes it, or weaker submissions pass it more often."""
        return bool(self.students) and (self.passed == 0 or (self.discrimination or 0.0) < NEGATIVE)


@dataclass
class MisconceptionRow:
    id: str
    title: str
    section: str
    students: int
    share: float | None            # of graded submissions
    tests: list[str]


@dataclass
class ClassReport:
    assignment: str
    records: list[GradeRecord]
    skipped: list[tuple[str, str]]
    status_counts: dict[str, int]
    scores: list[ScoreRow]         # "total" first, then one per question
    items: list[ItemRow]
    misconceptions: list[MisconceptionRow]
    flagged: list[tuple[GradeRecord, list[str]]] = field(default_factory=list)

    @property
    def graded(self) -> list[GradeRecord]:
        return [r for r in self.records if r.status == "graded"]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ratio(value: float | None, whole: float) -> float | None:
    return None if value is None or not whole else value / whole


def point_biserial(passed: list[bool], rest: list[float]) -> float | None:
    """Pearson r between pass (1) / fail (0) and the rest score; None when either does not vary."""
    n = len(passed)
    if n < 2:
        return None
    xs = [1.0 if p else 0.0 for p in passed]
    mx, my = sum(xs) / n, sum(rest) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in rest)
    if sxx <= 0 or syy <= 1e-9 * n:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, rest)) / math.sqrt(sxx * syy)


def score_rows(graded: list[GradeRecord]) -> list[ScoreRow]:
    rows = [ScoreRow("total", max((r.possible for r in graded), default=0.0), [r.total for r in graded])]
    names = sorted({q for r in graded for q in r.questions}, key=natural_key)
    for q in names:
        have = [r.questions[q] for r in graded if q in r.questions]
        rows.append(ScoreRow(q, max(p for _, p in have), [s for s, _ in have]))
    return rows


def item_rows(graded: list[GradeRecord]) -> list[ItemRow]:
    order: dict[str, str] = {}                     # test -> question, in first-seen (autograder) order
    for r in graded:
        for t in r.tests:
            order.setdefault(t.name, t.question)
    by_name = [{t.name: t for t in reversed(r.tests)} for r in graded]   # a repeated name: its first entry
    rows = []
    for name, question in order.items():
        pairs = [(r, tests[name]) for r, tests in zip(graded, by_name) if name in tests]
        possible = max(t.possible for _, t in pairs)
        passed = [t.passed for _, t in pairs]
        difficulty = (_mean([t.score for _, t in pairs]) / possible if possible
                      else sum(passed) / len(passed))
        rows.append(ItemRow(name, question, possible, len(pairs), sum(passed), difficulty,
                            point_biserial(passed, [r.total - t.score for r, t in pairs])))
    return sorted(rows, key=lambda row: natural_key(row.question))   # stable: keeps test order per question


def misconception_rows(records: list[GradeRecord], table: Table, graded: int) -> list[MisconceptionRow]:
    students: dict[str, set[int]] = {}
    tests: dict[str, dict[str, None]] = {}
    for index, r in enumerate(records):
        for t in r.tests:
            if t.passed:
                continue
            for mid in t.misconceptions:
                students.setdefault(mid, set()).add(index)
                tests.setdefault(mid, {})[t.name] = None
    rows = [MisconceptionRow(mid, *table.get(mid, ("", "")), len(who), len(who) / graded if graded else None,
                             list(tests[mid])) for mid, who in students.items()]
    return sorted(rows, key=lambda row: (-row.students, natural_key(row.id)))


def flagged(records: list[GradeRecord]) -> list[tuple[GradeRecord, list[str]]]:
    """Submissions that need a human look: not graded, or carrying integrity flags."""
    out = []
    for r in records:
        reasons = ([f"{r.status}: {r.detail}" if r.detail else r.status] if r.status != "graded" else [])
        reasons += r.flags
        if reasons:
            out.append((r, reasons))
    return out


def build_report(records: list[GradeRecord], skipped: list[tuple[str, str]], table: Table) -> ClassReport:
    counts = Counter(r.status for r in records)
    status_counts = {s: counts.pop(s, 0) for s in STATUSES} | dict(sorted(counts.items()))
    graded = [r for r in records if r.status == "graded"]
    assignment = Counter(r.assignment for r in records if r.assignment).most_common(1)
    return ClassReport(assignment=assignment[0][0] if assignment else "", records=records, skipped=skipped,
                       status_counts=status_counts, scores=score_rows(graded), items=item_rows(graded),
                       misconceptions=misconception_rows(records, table, len(graded)), flagged=flagged(records))


# ---------------------------------------------------------------- writing

def write_text_atomic(path: Path, text: str) -> None:
    """Replace path in one step, so that a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)                        # mkstemp makes 0600; the report is for the course staff
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _misconception_table(records: list[GradeRecord], ids_yaml: Path | None) -> Table:
    if ids_yaml is not None:
        return load_ids_file(ids_yaml)
    names = {r.assignment for r in records if re.fullmatch(r"[A-Za-z0-9_-]+", r.assignment)}
    table: Table = {}
    for name in sorted(names):                      # a name from a record never leaves ASSIGNMENTS_DIR
        table.update(load_misconceptions(ASSIGNMENTS_DIR / name))
    return table


def write_report(out_dir: Path | str, ids_yaml: Path | str | None = None) -> ClassReport:
    """Read OUT/records/, write OUT/report.html and OUT/report/*.csv; returns what it computed."""
    from .report_html import render_csv_tables, render_html   # matplotlib loads only when a report is written

    out_dir = Path(out_dir)
    records, skipped = load_records(out_dir / "records")
    report = build_report(records, skipped, _misconception_table(records, None if ids_yaml is None else Path(ids_yaml)))
    for name, text in render_csv_tables(report).items():
        write_text_atomic(out_dir / "report" / name, text)
    write_text_atomic(out_dir / "report.html", render_html(report))
    return report


def main(out_dir: Path | str, ids_yaml: Path | str | None = None) -> int:
    out_dir = Path(out_dir)
    if not (out_dir / "records").is_dir():
        print(f"[report] {out_dir / 'records'} does not exist: grade first (make grade ... OUT={out_dir})",
              file=sys.stderr)
        return 2
    report = write_report(out_dir, ids_yaml)
    unreadable = f", {len(report.skipped)} unreadable record files skipped" if report.skipped else ""
    print(f"[report] wrote {out_dir / 'report.html'} and {out_dir / 'report'}/*.csv "
          f"({len(report.records)} records{unreadable})")
    return 0
