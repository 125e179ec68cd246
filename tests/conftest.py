"""Shared fixtures: each assignment, fresh builds, and grading of the committed release.

`assignment` is parametrized over assignments/* (COURSEKIT_HW=name, set by `make test HW=name`,
keeps one). A `-k` expression that names questions (`-k q6`, `-k "q6 or q7"`) also restricts the
misconception catalogue to those questions' variants (COURSEKIT_QUESTIONS, as `make test Q=q6`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from coursekit import batch, build, harness

QUESTION_ID = re.compile(r"\bq\d+[a-z]?\b")


def selected_assignments() -> list[str]:
    names = build.assignment_names()
    wanted = [n for n in os.environ.get("COURSEKIT_HW", "").split(",") if n]
    unknown = set(wanted) - set(names)
    if unknown:
        raise pytest.UsageError(f"COURSEKIT_HW names no assignment: {sorted(unknown)} (there: {names})")
    return wanted or names


def pytest_configure(config):
    keyword = config.getoption("keyword", "") or ""
    questions = QUESTION_ID.findall(keyword)
    if questions and not re.search(r"\bnot\b", keyword) and harness.QUESTIONS_ENV not in os.environ:
        os.environ[harness.QUESTIONS_ENV] = ",".join(questions)


@pytest.fixture(scope="session", params=selected_assignments())
def assignment(request) -> build.Assignment:
    return build.Assignment(request.param)


@pytest.fixture(scope="session")
def fresh_build(assignment, tmp_path_factory) -> Path:
    """A full build (solutions executed) into a temporary folder."""
    root = tmp_path_factory.mktemp(f"build-{assignment.name}-first")
    build.build(assignment, out_root=root, log=lambda *_: None)
    return root


@pytest.fixture(scope="session")
def second_build(assignment, tmp_path_factory) -> Path:
    """Another, independent full build (for the determinism test)."""
    root = tmp_path_factory.mktemp(f"build-{assignment.name}-second")
    build.build(assignment, out_root=root, log=lambda *_: None)
    return root


@pytest.fixture(scope="session")
def release_grades(assignment) -> dict[str, dict]:
    """The committed solution and student notebooks, graded as `make grade` grades them (otter's pass too)."""
    dirs = assignment.release_dirs()
    paths = {"solution": dirs["solutions"] / assignment.notebook_name,
             "student": dirs["student"] / assignment.notebook_name}
    records = batch.grade_notebooks(list(paths.values()), assignment.autograder_zip(), jobs=2, otter_pass=True)
    return dict(zip(paths, records))
