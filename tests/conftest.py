"""Shared fixtures: the assignment, fresh builds, and grading of the committed release."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "assignments" / "hw07" / "checks"))
sys.path.insert(0, str(REPO / "assignments" / "hw07" / "files"))

from coursekit import build, grading  # noqa: E402


@pytest.fixture(scope="session")
def assignment() -> build.Assignment:
    return build.Assignment("hw07")


@pytest.fixture(scope="session")
def fresh_builds(assignment, tmp_path_factory) -> tuple[Path, Path]:
    """Two independent full builds (solutions executed) into temporary folders."""
    roots = []
    for label in ("first", "second"):
        root = tmp_path_factory.mktemp(f"build-{label}")
        build.build(assignment, out_root=root, log=lambda *_: None)
        roots.append(root)
    return roots[0], roots[1]


@pytest.fixture(scope="session")
def release_grades(assignment) -> dict[str, grading.GradeResult]:
    """The committed solution and student notebooks, graded by the committed autograder."""
    dirs = assignment.release_dirs()
    paths = {"solution": dirs["solutions"] / assignment.notebook_name,
             "student": dirs["student"] / assignment.notebook_name}
    results = grading.grade_many(list(paths.values()), assignment.autograder_zip(), jobs=2)
    return dict(zip(paths, results))
