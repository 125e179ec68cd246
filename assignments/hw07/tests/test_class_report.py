"""A synthetic class through `coursekit grade`: the report counts the misconceptions the class really has.

30 notebooks built from the solution: 5 with M4 (evaluate without no_grad), 3 with M18 (summed losses,
one backward), 2 with both, 20 correct. Graded as `make grade` grades them; the report's
misconception table must count exactly those students, and every test gets a row in the item analysis.
"""
from __future__ import annotations

import csv
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from coursekit import build, harness

pytestmark = pytest.mark.slow


def _variant(variants, question, vid):
    return next(v for v in variants if v.question == question and v.id == vid)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    assignment = build.Assignment("hw07")
    variants = harness.load_catalogue(assignment, questions=None)
    m4, m18 = _variant(variants, "q1", "M4"), _variant(variants, "q5", "M18")
    solution = nbformat.read(assignment.release_dirs()["solutions"] / assignment.notebook_name, as_version=4)
    folder = tmp_path_factory.mktemp("class")
    plan = ["m4"] * 5 + ["m18"] * 3 + ["both"] * 2 + ["correct"] * 20
    for i, kind in enumerate(plan):
        nb = solution
        if kind in ("m4", "both"):
            nb = harness.inject(nb, m4.source)
        if kind in ("m18", "both"):
            nb = harness.inject(nb, m18.source)
        nbformat.write(nb, folder / f"student{i:02d}.ipynb")
    out = tmp_path_factory.mktemp("out")
    subprocess.run([sys.executable, "-m", "coursekit", "grade", str(folder), "--out", str(out), "--hw", "hw07",
                    "--jobs", "2"], check=True)
    return out


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_misconception_counts_are_the_class_s(graded_class):
    counts = {r["id"]: int(r["students"]) for r in _rows(graded_class / "report" / "misconceptions.csv")}
    assert counts.get("M4") == 7, counts
    assert counts.get("M18") == 5, counts
    assert set(counts) == {"M4", "M18"}, f"misconceptions nobody made were reported: {counts}"


def test_every_test_has_an_item_row_and_the_html_holds_its_figures(graded_class):
    import json

    tests = {r["test"] for r in _rows(graded_class / "report" / "tests.csv")}
    record = json.loads(next((graded_class / "records").glob("*.json")).read_text(encoding="utf-8"))
    assert {t["name"] for t in record["tests"]} <= tests, "a test without a row in the item analysis"

    class Images(HTMLParser):
        sources: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag == "img":
                self.sources.append(dict(attrs).get("src", ""))

    parser = Images()
    parser.feed((graded_class / "report.html").read_text(encoding="utf-8"))
    assert parser.sources and all(s.startswith("data:image/png;base64,") for s in parser.sources)


def test_feedback_names_the_section(graded_class):
    feedback = (graded_class / "feedback" / "student00.ipynb.md").read_text(encoding="utf-8")
    assert "M4" in feedback and "§1.1" in feedback
