"""Every honest way of writing a correct answer keeps full marks, with no flag.

The styles (honest_styles.py: helper classes, dataclasses, nn.Module subclasses, lambdas, partials,
decorators, computed globals, helpers in other cells, closures, recursion, prints, a failing experiment
cell, ...) are graded in ONE batch through `python -m coursekit grade`, as a TA runs it, without otter's
in-kernel pass (each style also scores 73/73 under plain `otter run`: `PYTHONPATH=tests python assignments/hw07/tests/honest_styles.py --otter`).
"""
from __future__ import annotations

import pytest

import honest_styles
from grade_cli import Release, grade, sha256_file

RELEASE = Release.of(honest_styles.ASSIGNMENT)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("honest-styles")
    styles = honest_styles.write_styles(root / "submissions", RELEASE.solution)
    batch = grade(root / "submissions", root / "out", RELEASE.name)
    assert batch.returncode == 0, batch.explain()
    shas = {name: sha256_file(root / "submissions" / name) for name in styles}
    return styles, shas, batch


def test_at_least_twenty_four_styles():
    assert len(honest_styles.STYLES) >= 24
    assert len({s.id for s in honest_styles.STYLES}) == len(honest_styles.STYLES)


def test_one_row_per_style(graded):
    styles, _, batch = graded
    assert len(batch.rows) == len(styles), [r["file"] for r in batch.rows]


@pytest.mark.parametrize("style", honest_styles.STYLES, ids=lambda s: s.id)
def test_style_keeps_full_marks_unflagged(graded, style):
    styles, shas, batch = graded
    name = next(n for n, s in styles.items() if s is style)
    row = batch.row_for_sha(shas[name])
    assert row["status"] == "graded", (style.id, row["status"], batch.record(row["id"]).get("detail"))
    failed = [(t["name"], t.get("message", "")[:300]) for t in batch.record(row["id"])["tests"]
              if t.get("possible") and not t.get("passed")]
    assert float(row["total"]) == float(row["possible"]) > 0 and not failed, \
        f"{style.id} ({style.note}) lost points: {failed}"
    assert row["flags"] == "", f"{style.id} was flagged: {row['flags']}"
