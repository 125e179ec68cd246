"""Every misconception in the catalogue loses points through the real autograder, with a message
that names it; every correct alternative keeps full marks.

The catalogue is assignments/<hw>/misconceptions/qN.py. Variants are graded as notebooks exactly as
`make grade` grades them (each notebook in a sandbox, the examiner's checks from outside), and the
final grade is what counts.
"""
from __future__ import annotations

import pytest

from coursekit import harness
from coursekit.build import Assignment

CATALOGUE = harness.load_catalogue(Assignment("hw07"))


@pytest.fixture(scope="module")
def graded(assignment):
    solution = assignment.release_dirs()["solutions"] / assignment.notebook_name
    return harness.grade_variants(CATALOGUE, solution, assignment.autograder_zip(), jobs=2)


@pytest.mark.parametrize("variant", CATALOGUE, ids=[f"{v.question}-{v.id}" for v in CATALOGUE])
def test_variant(graded, variant):
    result = graded[(variant.question, variant.id)]
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


def test_catalogue_covers_the_spec():
    """Each spec misconception of a question that exists in the master has at least one variant."""
    ids = {v.id.split("-")[0] for v in CATALOGUE if not v.correct}
    spec = {"q1": range(1, 9), "q2": (9, 10), "q3": range(11, 15), "q4": range(15, 18), "q5": range(18, 24),
            "q6": range(24, 31), "q7": range(31, 34)}
    present = {v.question[:2] for v in CATALOGUE}
    missing = [f"M{i}" for q, numbers in spec.items() if q in present for i in numbers if f"M{i}" not in ids]
    assert not missing, f"spec misconceptions without a variant: {missing}"
