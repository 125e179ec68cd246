"""The TA grading command survives every bad submission, and the zip's container entry point agrees.

The corpus (tests/grading_corpus.py) is generated from the committed solution and student notebooks
and graded as ONE batch (jobs=2) through `coursekit.ta_grade.run`, the function behind
`python -m coursekit grade`. Every case must get a row with the expected status and score, the good
submissions in the batch must keep identical full marks, the feedback must say what happened, and a
second run must resume from the records. Finally the autograder zip's own entry point (run_otter.py in
an emulated /autograder root, as in the Docker image and on Gradescope) must give the same scores as the
new engine.

COURSEKIT_TEST_TIMEOUT (seconds, default 30) is the per-submission limit of the batch: raise it if the
solution itself takes longer to run on a loaded machine.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coursekit import grading, ta_grade

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grading_corpus import ORPHAN_SLEEP, make_corpus  # noqa: E402

TIMEOUT = float(os.environ.get("COURSEKIT_TEST_TIMEOUT", "30"))


def _rows(out: Path) -> list[dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _records(out: Path, subs: Path, zip_path: Path) -> dict[str, dict]:
    """file name -> its record (files with the same content share one record)."""
    ag = ta_grade.sha256_file(zip_path)
    records = {}
    for sub in ta_grade.find_submissions(subs):
        key = ta_grade.record_key(ta_grade.sha256_file(sub), ag)
        records[sub.name] = json.loads((out / "results" / f"{key}.json").read_text(encoding="utf-8"))["result"]
    return records


@pytest.fixture(scope="module")
def batch(assignment, tmp_path_factory):
    root = tmp_path_factory.mktemp("ta-grade")
    dirs = assignment.release_dirs()
    cases = make_corpus(root / "submissions", dirs["solutions"] / assignment.notebook_name,
                        dirs["student"] / assignment.notebook_name)
    stdout = io.StringIO()
    start = time.monotonic()
    ta_grade.run(root / "submissions", root / "out", autograder_zip=assignment.autograder_zip(), jobs=2,
                 timeout=TIMEOUT, stdout=stdout, stderr=io.StringIO())
    seconds = time.monotonic() - start
    rows = {r["file"]: r for r in _rows(root / "out")}
    records = _records(root / "out", root / "submissions", assignment.autograder_zip())
    return {"root": root, "cases": cases, "rows": rows, "records": records,
            "stdout": stdout.getvalue(), "seconds": seconds, "zip": assignment.autograder_zip()}


def test_csv_has_otters_layout_and_a_row_per_submission(batch):
    out = batch["root"] / "out"
    header = (out / "grades.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    questions = ta_grade.question_names(batch["zip"])
    assert header == ["file", *questions, "total_points_earned", "percent_correct", "grading_status", "status", "flags"]
    first = _rows(out)[0]
    assert first["file"] == "points-per-question"
    assert sorted(batch["rows"]) == sorted(["points-per-question", *batch["cases"]])
    assert "Graded 18 submissions" in batch["stdout"] or f"Graded {len(batch['cases'])} submissions" in batch["stdout"]


@pytest.mark.parametrize("name", [
    "correct.ipynb", "stub left as is.ipynb", "invalid json.ipynb", "empty.ipynb", "other assignment.ipynb",
    "foreign kernel.ipynb", "os_exit.ipynb", "loop top level.ipynb", "loop in function.ipynb",
    "exception in a cell.ipynb", "syntax error.ipynb", "renamed function.ipynb", "memory bomb.ipynb",
    "prints megabytes.ipynb", "no outputs.ipynb", "no notebook.zip", "export.zip",
    "Zoë Müller – hw07 (final).ipynb"])
def test_case(batch, name):
    expect = batch["cases"][name]
    row, record = batch["rows"][name], batch["records"][name]
    possible = float(batch["rows"]["points-per-question"]["total_points_earned"])
    total = float(row["total_points_earned"])
    assert record["status"] == expect.status, (name, record["reason"], record["message"])
    assert row["status"].startswith(expect.reason), (name, row["status"])
    if expect.score == "full":
        assert total == possible, (name, total, record["message"])
    elif expect.score == "zero":
        assert total == 0, (name, total)
    else:
        assert 0 < total < possible, (name, total)
    stem = Path(name).stem
    feedback = (batch["root"] / "out" / "feedback" / f"{stem}.md").read_text(encoding="utf-8")
    if expect.message:
        text = " ".join([row["status"], record["message"], feedback]).lower()
        assert expect.message.lower() in text, (name, expect.message, feedback[:2000])


def test_good_rows_are_identical(batch):
    """Bad submissions in the same batch change nothing for the others."""
    reference = batch["records"]["correct.ipynb"]["questions"]
    for name, expect in batch["cases"].items():
        if expect.score == "full":
            got = batch["records"][name]["questions"]
            assert {q: v["score"] for q, v in got.items()} == {q: v["score"] for q, v in reference.items()}, name


def test_feedback_lists_failed_checks_with_their_message(batch):
    feedback = (batch["root"] / "out" / "feedback" / "stub left as is.md").read_text(encoding="utf-8")
    assert "hidden test" in feedback and "NotImplementedError" in feedback
    partial = (batch["root"] / "out" / "feedback" / "renamed function.md").read_text(encoding="utf-8")
    assert "points lost" in partial and "full marks" in partial


def test_timeouts_kill_the_whole_process_group(batch):
    """The looping submission started `sleep 613`; it died with its kernel. No kernel outlives the batch."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = stat.read_bytes().split(b"\0")
        except OSError:
            continue
        if args[:2] == [b"sleep", ORPHAN_SLEEP.encode()]:
            alive.append(stat.parent.name)
    assert not alive, f"processes started by a timed-out submission survived: {alive}"
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            children.append(stat.parent.name)
    assert not children, f"grading kernels still running: {children}"


def test_records_are_written_atomically_and_resume(batch):
    out, subs = batch["root"] / "out", batch["root"] / "submissions"
    assert not [p for p in out.rglob("*.tmp")]
    before = (out / "grades.csv").read_text(encoding="utf-8")
    stdout = io.StringIO()
    start = time.monotonic()
    ta_grade.run(subs, out, autograder_zip=batch["zip"], jobs=2, timeout=TIMEOUT, stdout=stdout, stderr=io.StringIO())
    assert time.monotonic() - start < 30
    assert "0 to grade" in stdout.getvalue()
    assert (out / "grades.csv").read_text(encoding="utf-8") == before

    # a lost record (an interrupted run) is graded again, and only that one
    key = ta_grade.record_key(ta_grade.sha256_file(subs / "renamed function.ipynb"),
                              ta_grade.sha256_file(batch["zip"]))
    (out / "results" / f"{key}.json").unlink()
    stdout = io.StringIO()
    ta_grade.run(subs, out, autograder_zip=batch["zip"], jobs=2, timeout=TIMEOUT, stdout=stdout, stderr=io.StringIO())
    assert "1 to grade" in stdout.getvalue()
    assert (out / "grades.csv").read_text(encoding="utf-8") == before


# ----------------------------------------------------------------------------- the container entry point

_SHIM = """\
import runpy, sys
import otter.run.run_autograder as ra
root, original = sys.argv[1], ra.main
ra.main = lambda autograder_dir, **kw: original(root, **kw)   # run_otter.py hard-codes /autograder
runpy.run_path(root + "/source/run_otter.py", run_name="__main__")
"""


def emulate_container(zip_path: Path, notebook: Path, root: Path) -> dict[str, tuple[float, float]]:
    """The Docker/Gradescope path: /autograder/{source,submission,results}, run_otter.py, results.json."""
    import zipfile

    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    (root / "submission_metadata.json").write_text("{}")
    shutil.copy2(notebook, root / "submission" / "hw07.ipynb")
    proc = subprocess.run([sys.executable, "-c", _SHIM, str(root)], capture_output=True, text=True, timeout=600)
    results = root / "results" / "results.json"
    assert results.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(results.read_text())
    return {q.name: (q.score, q.max_score) for q in grading.parse_results_json(data).values()}


def test_container_entry_point_gives_the_same_scores(batch):
    names = ["correct.ipynb", "stub left as is.ipynb", "renamed function.ipynb"]
    subs = batch["root"] / "submissions"
    with ThreadPoolExecutor(2) as pool:
        emulated = list(pool.map(lambda n: emulate_container(batch["zip"], subs / n,
                                                             batch["root"] / "container" / Path(n).stem), names))
    for name, container in zip(names, emulated):
        engine = {q: (v["score"], v["max_score"]) for q, v in batch["records"][name]["questions"].items()}
        assert container == engine, (name, container, engine)


def test_cli_has_grade_and_release():
    proc = subprocess.run([sys.executable, "-m", "coursekit", "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0 and "grade" in proc.stdout and "release" in proc.stdout
