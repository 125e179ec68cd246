"""Packaging and course-kit hygiene: pins agree, tests reach coursekit through the editable install,
and nothing outside an assignment's own folder (and its generated releases) names that assignment."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from coursekit import REPO_ROOT, build

SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", "node_modules"}
GENERATED = ("student", "solutions", "autograder")


def _requirement_pins(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def test_pyproject_pins_are_the_requirements_pins():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(project["dependencies"]) == sorted(_requirement_pins(REPO_ROOT / "requirements.txt"))
    assert project["scripts"]["coursekit"] == "coursekit.cli:main"
    constraints = set(_requirement_pins(REPO_ROOT / "constraints.txt"))
    requirements = {re.sub(r"\[.*\]", "", pin) for pin in _requirement_pins(REPO_ROOT / "requirements.txt")}
    assert requirements <= constraints, f"pinned in requirements.txt only: {sorted(requirements - constraints)}"


def _repository_files():
    for path in sorted(REPO_ROOT.rglob("*")):
        relative = path.relative_to(REPO_ROOT)
        if (path.is_file() and not set(relative.parts) & SKIPPED_DIRS
                and not any(p.endswith(".egg-info") for p in relative.parts)):
            yield relative


def test_no_sys_path_inserts_in_tests_or_bench():
    offenders = [str(r) for r in _repository_files()
                 if r.parts[0] in ("tests", "bench") and r.suffix == ".py"
                 and re.search(r"sys\.path\.(insert|append)", (REPO_ROOT / r).read_text())]
    assert not offenders, f"reach coursekit through the editable install (make install), not sys.path: {offenders}"


def test_only_an_assignments_own_folders_name_it():
    """Code and configuration outside assignments/<name>/ and the generated student/, solutions/,
    autograder/ never name an assignment. Markdown documentation may use one as its worked example."""
    names = build.assignment_names()
    pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, names)) + r")(?![0-9])", re.I)
    offenders = []
    for relative in _repository_files():
        if relative.parts[0] in GENERATED or relative.parts[0] == "assignments" or relative.suffix == ".md":
            continue
        try:
            text = (REPO_ROOT / relative).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()[:80]}")
    assert not offenders, "assignment names outside their folders:\n" + "\n".join(offenders)


def test_assignment_files_name_no_other_assignment():
    names = build.assignment_names()
    offenders = []
    for name in names:
        others = [n for n in names if n != name]
        if not others:
            continue
        pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, others)) + r")(?![0-9])", re.I)
        for path in sorted((REPO_ROOT / "assignments" / name).rglob("*.py")):
            if pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders, f"these files name another assignment: {offenders}"
