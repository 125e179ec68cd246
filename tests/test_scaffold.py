"""`coursekit new NAME`: the scaffolded assignment builds, the solution gets full marks, the stub zero,
and its catalogue behaves (the misconception loses its points with a message that names it, the
correct alternative keeps them). Built and graded in a temporary folder, never in the repository.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from coursekit import batch, build, harness


@pytest.fixture(scope="module")
def scaffold_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("scaffold")
    subprocess.run([sys.executable, "-m", "coursekit", "new", "demo", "--root", str(root)], check=True,
                   capture_output=True)
    assignment = build.Assignment("demo", root=root)
    build.build(assignment, execute_solutions=False, log=lambda *_: None)
    return assignment


def test_new_refuses_bad_or_existing_names(tmp_path):
    from coursekit import scaffold

    with pytest.raises(SystemExit, match="lower-case letters"):
        scaffold.new_assignment("HW-8", root=tmp_path)
    scaffold.new_assignment("hw8", root=tmp_path)
    with pytest.raises(SystemExit, match="exists already"):
        scaffold.new_assignment("hw8", root=tmp_path)


def test_solution_full_marks_and_stub_zero(scaffold_release):
    dirs = scaffold_release.release_dirs()
    solution, student = batch.grade_notebooks([dirs["solutions"] / "demo.ipynb", dirs["student"] / "demo.ipynb"],
                                              scaffold_release.autograder_zip(), jobs=2)
    assert solution["status"] == "graded" and student["status"] == "graded", (solution["detail"], student["detail"])
    assert {q: (r["score"], r["possible"]) for q, r in solution["questions"].items()} == {"q1": (2.0, 2.0)}
    assert {q: r["score"] for q, r in student["questions"].items()} == {"q1": 0.0}


def test_catalogue_entries_behave(scaffold_release):
    variants = harness.read_catalogue(scaffold_release.source_dir / "misconceptions")
    solution = scaffold_release.release_dirs()["solutions"] / "demo.ipynb"
    results = harness.grade_variants(variants, solution, scaffold_release.autograder_zip(), jobs=2)
    wrong, correct = results[("q1", "M1")], results[("q1", "mse-loss")]
    assert wrong.lost_points and not wrong.missing_fragments(), wrong.output
    assert not correct.lost_points, correct.output
