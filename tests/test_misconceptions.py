"""Every misconception in the catalogue loses points through the real autograder, with a message
that names it; every correct alternative keeps full marks.

The catalogue is assignments/<hw>/misconceptions/qN.py. Variants are graded as notebooks exactly as
`make grade` grades them (each notebook in a sandbox, the examiner's checks from outside), and the
final grade is what counts.
"""
from __future__ import annotations

import re

import pytest

from coursekit import harness
from coursekit import build

CATALOGUE = [(name, v) for name in build.assignment_names()
             for v in harness.load_catalogue(build.Assignment(name))]


def _core(catalogue):
    """The default suite's share: every wrong variant named by a bare id (M4, not M4-loop) and the first
    correct alternative of each question. `make test-slow` grades the whole catalogue."""
    first_correct = {}
    for name, v in catalogue:
        if v.correct:
            first_correct.setdefault((name, v.question), v.id)
    return {(name, v.question, v.id) for name, v in catalogue
            if (not v.correct and re.fullmatch(r"M\d+", v.id)) or first_correct.get((name, v.question)) == v.id}


CORE = _core(CATALOGUE)
PARAMS = [pytest.param(name, v, id=f"{name}-{v.question}-{v.id}",
                       marks=() if (name, v.question, v.id) in CORE else pytest.mark.slow) for name, v in CATALOGUE]


@pytest.fixture(scope="module")
def graded(request):
    """The selected variants of every assignment, graded in one batch each: {(assignment, question, id): result}."""
    selected = {(item.callspec.params["name"], item.callspec.params["variant"].question,
                 item.callspec.params["variant"].id)
                for item in request.session.items if getattr(item, "originalname", "") == "test_variant"}
    results = {}
    for name in build.assignment_names():
        assignment = build.Assignment(name)
        variants = [v for n, v in CATALOGUE if n == name and (n, v.question, v.id) in selected]
        if variants:
            solution = assignment.release_dirs()["solutions"] / assignment.notebook_name
            graded = harness.grade_variants(variants, solution, assignment.autograder_zip(), jobs=2)
            results.update({(name, *key): value for key, value in graded.items()})
    return results


@pytest.mark.parametrize("name,variant", PARAMS)
def test_variant(graded, name, variant):
    result = graded[(name, variant.question, variant.id)]
    assert result.status == "ok", f"grading the variant failed: {result.output}"
    assert not any("grader error" in f for f in result.flags), f"the grader failed on {variant.id}: {result.flags}"
    if variant.correct:
        assert not result.lost_points, (f"correct alternative {variant.id} lost points on {variant.question} "
                                        f"({result.score}/{result.max_score}):\n{result.output}")
    else:
        assert result.lost_points, f"misconception {variant.id} ({variant.note}) kept full marks on {variant.question}"
        if result.expected_id:
            assert result.expected_id in result.misconceptions, (
                f"misconception {variant.id} lost points but the failed tests report {result.misconceptions or 'no id'}, "
                f"not {result.expected_id}:\n{result.output}")
        missing = result.missing_fragments()
        assert not missing, (f"misconception {variant.id} lost points but the feedback does not name it "
                             f"(missing {missing}):\n{result.output}")
