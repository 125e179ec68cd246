"""Every misconception in the catalogue loses points through the real autograder, with a message
that names it; every correct alternative keeps full marks.

The catalogue is assignments/<hw>/misconceptions/qN.py. Variants are graded as notebooks exactly as
`make grade` grades them (each notebook in a sandbox, the examiner's checks from outside), and the
final grade is what counts.
"""
from __future__ import annotations

import pytest

from coursekit import harness
from coursekit import build

CATALOGUE = [(name, v) for name in build.assignment_names()
             for v in harness.load_catalogue(build.Assignment(name))]


@pytest.fixture(scope="module")
def graded():
    """Every assignment's catalogue, graded once: {(assignment, question, id): VariantResult}."""
    results = {}
    for name in build.assignment_names():
        assignment = build.Assignment(name)
        variants = [v for n, v in CATALOGUE if n == name]
        if variants:
            solution = assignment.release_dirs()["solutions"] / assignment.notebook_name
            graded = harness.grade_variants(variants, solution, assignment.autograder_zip(), jobs=2)
            results.update({(name, *key): value for key, value in graded.items()})
    return results


@pytest.mark.parametrize("name,variant", CATALOGUE, ids=[f"{n}-{v.question}-{v.id}" for n, v in CATALOGUE])
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
