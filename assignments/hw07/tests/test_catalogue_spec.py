"""The catalogue covers every misconception the assignment spec lists (docs/ASSIGNMENT_SPEC.md, M1-M33)."""
from __future__ import annotations

from coursekit import build, harness

CATALOGUE = harness.load_catalogue(build.Assignment("hw07"), questions=None)


def test_catalogue_covers_the_spec():
    """Each spec misconception of a question that exists in the master has at least one variant."""
    ids = {v.id.split("-")[0] for v in CATALOGUE if not v.correct}
    spec = {"q1": range(1, 9), "q2": (9, 10), "q3": range(11, 15), "q4": range(15, 18), "q5": range(18, 24),
            "q6": range(24, 31), "q7": range(31, 34)}
    present = {v.question[:2] for v in CATALOGUE}
    missing = [f"M{i}" for q, numbers in spec.items() if q in present for i in numbers if f"M{i}" not in ids]
    assert not missing, f"spec misconceptions without a variant: {missing}"
