"""Tampering must not pay: each technique scores no more than the same wrong answers without it,
and the grade result flags it. Honest notebooks keep their scores and get no flag."""
from __future__ import annotations

import nbformat
import pytest

from coursekit import harness, verify

import tamper_corpus  # tests/tamper_corpus.py

TECHNIQUES = sorted(tamper_corpus.TECHNIQUES)


@pytest.fixture(scope="module")
def graded(assignment, tmp_path_factory):
    solution_path = assignment.release_dirs()["solutions"] / assignment.notebook_name
    solution = nbformat.read(solution_path, as_version=4)
    base = tamper_corpus.base_notebook(solution, harness.load_catalogue(assignment))
    notebooks = {"solution": solution, "base": base}
    notebooks.update({t: tamper_corpus.tampered(base, t) for t in TECHNIQUES})
    root = tmp_path_factory.mktemp("tamper")
    paths = []
    for name, nb in notebooks.items():
        path = root / name / assignment.notebook_name
        path.parent.mkdir()
        nbformat.write(nb, path)
        paths.append(path)
    results = verify.grade_verified(paths, assignment.autograder_zip(), jobs=2, timeout=60)  # patch-builtins hangs its kernel
    return dict(zip(notebooks, results))


def test_honest_notebooks_keep_their_scores_unflagged(graded):
    for name in ("solution", "base"):
        result = graded[name]
        assert result.status == "ok", result.message
        assert not result.flags, f"{name} was flagged: {result.flags}"
    assert all(q.full_marks for q in graded["solution"].questions.values())
    assert graded["base"].total < graded["solution"].total


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_tampering_does_not_pay_and_is_flagged(graded, technique):
    base, result = graded["base"], graded[technique]
    for name, question in base.questions.items():
        got = result.score(name)
        assert got <= question.score + 1e-9, (f"{technique}: {name} scored {got} > {question.score} without "
                                              f"tampering; flags: {result.flags}")
    assert result.total <= base.total + 1e-9
    assert result.flags, f"{technique} was not flagged (status {result.status}: {result.message})"
