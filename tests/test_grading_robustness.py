"""The TA grading command survives every bad submission file, names each row safely, and resumes.

The corpus (tests/grading_corpus.py: empty and invalid files, another assignment, zips with and without a
notebook, a zip bomb, 200k zip entries, non-UTF-8 / spaced / dashed / formula file names, colliding stems,
a dotfile, a PDF, a 6,000-line cell, loops, exits, memory bombs) is generated from the committed build and
graded as ONE batch through `python -m coursekit grade`. Every file must get a row whose status and score
are what the case expects, with a record and feedback that say why; CSV cells must be safe to open in a
spreadsheet; a second run must resume from the verified records and regrade a forged one. Finally the
autograder zip's own entry point (run_otter.py in an emulated /autograder root, as in the Docker image and
on Gradescope) must agree with the grades.

COURSEKIT_TEST_TIMEOUT (seconds, default 120) is the per-submission limit of the batch.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import unicodedata
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grade_cli import (FIXED_COLUMNS, PYTHON, REPO, TRAILING_COLUMNS, Release, check_csv_cells, grade,
                       leftover_processes, question_names, sha256_file)
from grading_corpus import CASE_NAMES, DASH_NAME, FORMULA_NAME, NON_UTF8_NAME, ORPHAN_SLEEP, UNICODE_NAME, make_corpus


@pytest.fixture(scope="module")
def batch(assignment, tmp_path_factory):
    release = Release.of(assignment.name)
    root = tmp_path_factory.mktemp("ta-grade")
    cases = make_corpus(root / "submissions", release.solution, release.student)
    shas = {name: sha256_file(root / "submissions" / name) for name in cases}
    graded = grade(root / "submissions", root / "out", release.name)
    assert graded.returncode == 0, graded.explain()
    by_sha, by_file = graded.records_by_sha(), graded.records_by_file()
    return {"root": root, "cases": cases, "shas": shas, "batch": graded, "release": release,
            "records": {name: by_sha.get(sha) or by_file.get(name) for name, sha in shas.items()}}


def _row(batch, name):
    return batch["batch"].row(batch["records"][name]["id"])


def test_a_row_and_a_record_for_every_file(batch):
    missing = [name for name, record in batch["records"].items() if record is None]
    assert not missing, f"no record for {missing}"
    assert len(batch["batch"].rows) == len(batch["cases"]), [r["file"] for r in batch["batch"].rows]


def test_csv_layout(batch):
    header = (batch["root"] / "out" / "grades.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    questions = question_names(batch["release"].autograder)
    assert header == [*FIXED_COLUMNS, *questions, *TRAILING_COLUMNS]


@pytest.mark.parametrize("name", CASE_NAMES, ids=lambda n: n.encode("ascii", "backslashreplace").decode())
def test_case(batch, name):
    expect, record = batch["cases"][name], batch["records"][name]
    row = _row(batch, name)
    feedback = batch["batch"].feedback(record["id"])
    why = f"{name}: status {record['status']!r}, detail {record.get('detail')!r}"
    assert record["status"] in expect.status and row["status"] == record["status"], why
    total, possible = float(row["total"] or 0), float(row["possible"] or 0)
    if expect.score == "full":
        assert total == possible > 0 and not row["flags"], (why, total, possible, row["flags"])
    elif expect.score in ("zero", "none"):
        assert total == 0, (why, total)
    else:
        assert 0 < total < possible, (why, total, possible)
    if expect.status != ("graded",):
        assert record.get("detail"), f"{why}: a row that is not graded says why"
    if expect.detail:
        text = f"{record.get('detail', '')}\n{feedback}"
        assert re.search(expect.detail, text, re.I), (why, expect.detail, feedback[:1500])


def test_good_rows_are_identical(batch):
    """Bad submissions in the same batch change nothing for the others."""
    questions = question_names(batch["release"].autograder)
    reference = {q: _row(batch, "correct.ipynb")[q] for q in questions}
    for name, expect in batch["cases"].items():
        if expect.score == "full":
            assert {q: _row(batch, name)[q] for q in questions} == reference, name


def test_file_names_become_safe_distinct_ids_and_cells(batch):
    rows = batch["batch"].rows
    ids = [batch["records"][name]["id"] for name in batch["cases"]]
    assert len(set(ids)) == len(ids), "ids collide (a.ipynb and a.zip share a stem)"
    for id_ in ids:
        assert id_ and id_ not in (".", "..") and not re.search(r"[/\\\x00-\x1f]", id_), id_
        assert (batch["root"] / "out" / "feedback" / f"{id_}.md").is_file(), id_
    assert not check_csv_cells(rows), "formula cells reached the CSV unescaped"
    assert _row(batch, FORMULA_NAME)["file"].startswith("'="), _row(batch, FORMULA_NAME)["file"]
    assert _row(batch, DASH_NAME)["file"].startswith("'-"), _row(batch, DASH_NAME)["file"]
    shown = _row(batch, NON_UTF8_NAME)["file"]
    assert "caf" in shown and not any(unicodedata.category(c) == "Cs" for c in shown), repr(shown)
    assert _row(batch, UNICODE_NAME)["file"] == UNICODE_NAME


def test_a_big_cell_costs_seconds_not_minutes(batch):
    big, correct = batch["records"]["6000-line cell.ipynb"], batch["records"]["correct.ipynb"]
    assert big["seconds"]["total"] < correct["seconds"]["total"] + 30, (big["seconds"], correct["seconds"])


def test_zips_are_capped(batch):
    for name in ("zip bomb.zip", "200k entries.zip"):
        assert batch["records"][name].get("seconds", {}).get("total", 0) < 60, (name, batch["records"][name])


def test_timeouts_leave_no_process(batch):
    assert not leftover_processes(batch["batch"], markers=(f"sleep {ORPHAN_SLEEP}",))


def test_resume_keeps_verified_records_and_regrades_forged_ones(batch):
    root, release = batch["root"], batch["release"]
    out, subs = root / "out", root / "submissions"
    before = (out / "grades.csv").read_bytes()
    again = grade(subs, out, release.name)
    assert again.returncode == 0 and again.seconds < 60, again.explain()
    assert (out / "grades.csv").read_bytes() == before

    # a record whose MAC no longer verifies (an inflated total) is graded again; so is a lost one
    forged_id = batch["records"]["renamed function.ipynb"]["id"]
    path = out / "records" / f"{forged_id}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    honest_total = record["total"]
    record["total"] = record["possible"]
    path.write_text(json.dumps(record), encoding="utf-8")
    (out / "records" / f"{batch['records']['correct.ipynb']['id']}.json").unlink()
    again = grade(subs, out, release.name)
    assert again.returncode == 0, again.explain()
    assert json.loads(path.read_text(encoding="utf-8"))["total"] == honest_total
    assert (out / "grades.csv").read_bytes() == before


# ----------------------------------------------------------------------------- the container entry point

_SHIM = """\
import runpy, sys
import otter.run.run_autograder as ra
root, original = sys.argv[1], ra.main
ra.main = lambda autograder_dir, **kw: original(root, **kw)   # run_otter.py hard-codes /autograder
runpy.run_path(root + "/source/run_otter.py", run_name="__main__")
"""


def emulate_container(zip_path: Path, notebook: Path, notebook_name: str, root: Path) -> dict[str, float]:
    """The Docker/Gradescope path: /autograder/{source,submission,results}, run_otter.py, results.json."""
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    (root / "submission_metadata.json").write_text("{}")
    shutil.copy2(notebook, root / "submission" / notebook_name)
    proc = subprocess.run([sys.executable, "-c", _SHIM, str(root)], capture_output=True, text=True, timeout=600)
    results = root / "results" / "results.json"
    assert results.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    scores: dict[str, float] = {}
    for test in json.loads(results.read_text())["tests"]:
        question = test["name"].split(" ")[0]   # otter names per-question entries "q1" or "q1 - 1"
        if test.get("max_score") is not None:
            scores[question] = scores.get(question, 0.0) + float(test.get("score") or 0)
    return scores


def test_container_entry_point_agrees_with_the_grades(batch, assignment):
    names = ["correct.ipynb", "stub left as is.ipynb", "renamed function.ipynb"]
    subs, release = batch["root"] / "submissions", batch["release"]
    with ThreadPoolExecutor(2) as pool:
        emulated = list(pool.map(lambda n: emulate_container(release.autograder, subs / n, assignment.notebook_name,
                                                             batch["root"] / "container" / Path(n).stem), names))
    questions = question_names(release.autograder)
    for name, container in zip(names, emulated):
        row = _row(batch, name)
        assert {q: container.get(q, 0.0) for q in questions} == {q: float(row[q] or 0) for q in questions}, name


def test_cli_offers_the_contract():
    proc = subprocess.run([str(PYTHON), "-m", "coursekit", "grade", "--help"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0
    for flag in ("--out", "--hw", "--jobs", "--timeout", "--no-otter-pass", "--no-sandbox", "--force"):
        assert flag in proc.stdout, flag
