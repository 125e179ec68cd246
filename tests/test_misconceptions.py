"""Every misconception in the catalogue loses points through the real autograder, with a message
that names it; every correct alternative keeps full marks.

The catalogue is assignments/hw07/misconceptions/qN.py. Variants are graded as notebooks by the
committed autograder zip (otter's own grading code, a fresh single-use kernel per notebook).
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
    if variant.correct:
        assert not result.lost_points, (f"correct alternative {variant.id} lost points on {variant.question} "
                                        f"({result.score}/{result.max_score}):\n{result.output}")
    else:
        assert result.lost_points, f"misconception {variant.id} ({variant.note}) kept full marks on {variant.question}"
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
