"""Build-time validation of an assignment's master, with errors that name file:line.

Rules (README "Instructors" and docs/ARCHITECTURE.md):

- Points: a question's header `points` is required and must equal the sum of
  its tests' `points` (every test states its points; public tests carry 0).
  A manual question (`manual: true`) has no tests and takes the header's points.
- Names: master files are `NN_<id>_<topic>.py` (files without a question, such as
  the intro, are free); every question in a file is named `<id>` or `<id>` plus
  a letter (q8a, q8b); its hidden tests call the checks module
  `checks/<package>/<id>.py`, and its catalogue is `misconceptions/<id>.py`.
- Coverage: every autograded question has at least one hidden test and, in its
  catalogue, at least one misconception (a wrong variant) and one correct alternative.
- Keys: question headers and test configs accept only the keys otter 7 reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .master import Cell, read_cells

if TYPE_CHECKING:
    from .build import Assignment

QUESTION_KEYS = {"name", "points", "manual", "check_cell", "export", "all_or_nothing"}
TEST_KEYS = {"hidden", "points", "success_message", "failure_message"}
TEST_CONFIG = re.compile(r'^""" # BEGIN TEST CONFIG\n(?P<body>.*?)""" # END TEST CONFIG', re.S)
FILE_NAME = re.compile(r"^\d+_(?P<id>[a-z]+\d+)_\w+$")


class ValidationError(ValueError):
    """Every problem found, one "file:line: message" per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("the master has problems:\n" + "\n".join(f"  {p}" for p in problems))


@dataclass
class QuestionTest:
    origin: str
    source: str
    hidden: bool
    points: float | None


@dataclass
class Question:
    name: str
    config: dict
    origin: str  # file:line of the `# BEGIN QUESTION` cell
    path: Path
    tests: list[QuestionTest] = field(default_factory=list)
    key_origins: dict[str, str] = field(default_factory=dict)  # header key -> file:line

    @property
    def manual(self) -> bool:
        return bool(self.config.get("manual"))

    @property
    def hidden_tests(self) -> list[QuestionTest]:
        return [t for t in self.tests if t.hidden]


def file_question_id(path: Path) -> str | None:
    """`q2` for 02_q2_batching.py; None for a file named otherwise (e.g. 00_intro.py)."""
    match = FILE_NAME.match(Path(path).stem)
    return match.group("id") if match else None


def _key_origin(cell: Cell, key: str) -> str:
    """file:line of `key:` inside a cell (a cell's source starts on the line after its `# %%` header)."""
    path = cell.origin.rsplit(":", 1)[0]
    for i, line in enumerate(cell.source.splitlines()):
        if line.startswith(f"{key}:"):
            return f"{path}:{cell.line + 1 + i}"
    return cell.origin


def _yaml(text: str, origin: str, problems: list[str]) -> dict:
    try:
        value = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        problems.append(f"{origin}: not valid YAML: {exc}")
        return {}
    if not isinstance(value, dict):
        problems.append(f"{origin}: expected `key: value` lines, got {value!r}")
        return {}
    return value


def read_questions(path: Path, problems: list[str]) -> list[Question]:
    """The questions of one master file; structural problems are appended to `problems`."""
    questions: list[Question] = []
    current: Question | None = None
    in_tests = False
    for cell in read_cells(path):
        text = cell.source.strip()
        if cell.kind == "raw" and text.startswith("# BEGIN QUESTION"):
            if current is not None:
                problems.append(f"{cell.origin}: `# BEGIN QUESTION` inside question {current.name!r} "
                                f"(opened at {current.origin}): close it with `# END QUESTION`")
            config = _yaml(text.removeprefix("# BEGIN QUESTION"), cell.origin, problems)
            for key in sorted(set(config) - QUESTION_KEYS):
                problems.append(f"{_key_origin(cell, key)}: unknown question key {key!r} "
                                f"(allowed: {', '.join(sorted(QUESTION_KEYS))})")
            if "name" not in config:
                problems.append(f"{cell.origin}: the question has no `name`")
            current = Question(str(config.get("name", "?")), config, cell.origin, Path(path),
                               key_origins={key: _key_origin(cell, key) for key in config})
            questions.append(current)
            in_tests = False
        elif cell.kind == "raw" and text.startswith("# END QUESTION"):
            if current is None:
                problems.append(f"{cell.origin}: `# END QUESTION` without a `# BEGIN QUESTION`")
            current, in_tests = None, False
        elif cell.kind == "raw" and text.startswith("# BEGIN TESTS"):
            in_tests = True
        elif cell.kind == "raw" and text.startswith("# END TESTS"):
            in_tests = False
        elif cell.kind == "code" and in_tests and current is not None:
            current.tests.append(_read_test(cell, problems))
    if current is not None:
        problems.append(f"{current.origin}: question {current.name!r} is never closed with `# END QUESTION`")
    return questions


def _read_test(cell: Cell, problems: list[str]) -> QuestionTest:
    match = TEST_CONFIG.match(cell.source)
    config = _yaml(match.group("body"), cell.origin, problems) if match else {}
    for key in sorted(set(config) - TEST_KEYS):
        problems.append(f"{_key_origin(cell, key)}: unknown test key {key!r} "
                        f"(allowed: {', '.join(sorted(TEST_KEYS))})")
    points = config.get("points")
    return QuestionTest(cell.origin, cell.source, bool(config.get("hidden", False)),
                    points if isinstance(points, (int, float)) else None)


def _check_points(q: Question, problems: list[str]) -> None:
    points = q.config.get("points")
    where = q.key_origins.get("points", q.origin)
    if not isinstance(points, (int, float)) or isinstance(points, bool):
        problems.append(f"{where}: question {q.name!r} needs `points: <number>` in its header")
        return
    if q.manual:
        if q.tests:
            problems.append(f"{where}: manual question {q.name!r} has test cells; a manual question is graded by hand")
        return
    for test in q.tests:
        if test.points is None:
            problems.append(f"{test.origin}: a test of {q.name!r} has no `points` in its TEST CONFIG "
                            "(public tests carry `points: 0`)")
    total = sum(t.points or 0 for t in q.tests)
    if abs(total - points) > 1e-9:
        problems.append(f"{where}: question {q.name!r} has `points: {points:g}` in its header but its tests "
                        f"carry {total:g}: make them equal")


def _check_names(q: Question, checks_package: Path | None, problems: list[str]) -> None:
    family = file_question_id(q.path)
    if family is None or not re.fullmatch(rf"{re.escape(family)}[a-z]?", q.name):
        problems.append(f"{q.origin}: question {q.name!r} is in {q.path.name}; a question lives in "
                        f"NN_{re.sub(r'[a-z]$', '', q.name)}_<topic>.py")
        return
    if q.manual or checks_package is None:
        return
    if not (checks_package / f"{family}.py").exists():
        problems.append(f"{q.origin}: question {q.name!r} has no checks module {checks_package / (family + '.py')}")
    imported = re.compile(rf"\bfrom\s+{checks_package.name}\s+import\s+([\w, ]+)|\b{checks_package.name}\.(\w+)")
    for test in q.hidden_tests:
        for match in imported.finditer(test.source):
            modules = [m.strip() for m in (match.group(1) or match.group(2)).split(",")]
            foreign = [m for m in modules if m != family and not m.startswith("_")]
            if foreign:
                problems.append(f"{test.origin}: a hidden test of {q.name!r} uses {checks_package.name}."
                                f"{foreign[0]}; it should use {checks_package.name}.{family}")


def _check_catalogue(q: Question, catalogue_dir: Path, problems: list[str]) -> None:
    from .harness import read_catalogue_file

    family = file_question_id(q.path)
    path = catalogue_dir / f"{family}.py"
    if not path.exists():
        problems.append(f"{q.origin}: question {q.name!r} has no misconception catalogue {path.parent.name}/{path.name}")
        return
    try:
        variants = [v for v in read_catalogue_file(path) if v.question == q.name]
    except Exception as exc:  # a broken catalogue is reported, not raised: the other problems still show
        problems.append(f"{path}:1: cannot read the catalogue: {type(exc).__name__}: {exc}")
        return
    if not any(not v.correct for v in variants):
        problems.append(f"{path}:1: no misconception (a Variant with correct=False) for {q.name!r}")
    if not any(v.correct for v in variants):
        problems.append(f"{path}:1: no correct alternative (a Variant with correct=True) for {q.name!r}")


def validate(assignment: Assignment) -> list[Question]:
    """The questions of the assignment's (selected) master files; ValidationError lists every problem."""
    problems: list[str] = []
    questions: list[Question] = []
    for path in assignment.notebook_sources:
        questions.extend(read_questions(path, problems))
    packages = [p for p in assignment.check_packages if p.is_dir()]
    if len(packages) > 1:
        problems.append(f"{assignment.source_dir / 'checks'}: one checks package expected, found "
                        f"{[p.name for p in packages]}")
    checks_package = packages[0] if len(packages) == 1 else None
    seen: dict[str, str] = {}
    for q in questions:
        if q.name in seen:
            problems.append(f"{q.origin}: question {q.name!r} is already defined at {seen[q.name]}")
        seen.setdefault(q.name, q.origin)
        _check_points(q, problems)
        _check_names(q, checks_package, problems)
        if q.manual:
            continue
        if checks_package is None:
            problems.append(f"{q.origin}: question {q.name!r} is autograded but "
                            f"{assignment.source_dir / 'checks'} holds no checks package")
        if not q.hidden_tests:
            problems.append(f"{q.origin}: question {q.name!r} has no hidden test (`hidden: true` in a TEST CONFIG)")
        _check_catalogue(q, assignment.source_dir / "misconceptions", problems)
    if problems:
        raise ValidationError(problems)
    return questions
