"""The class report on a synthetic class of grade records with known misconceptions.

The records are written directly in docs/GRADE_RECORDS.md's schema, so these
tests need no grading: 30 submissions (26 graded, 2 timeouts, 1 error, 1 not
graded), misconceptions M27 x7, M4 x5, M18 x3, M1 x1, file names a student
could choose to attack the page or a spreadsheet, and malformed record files.
"""
from __future__ import annotations

import base64
import csv
import io
import json
import math
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from coursekit import report
from coursekit.misconceptions import describe, load_ids_file, load_misconceptions
from coursekit.report_html import csv_cell, printable

TESTS = [  # (question, test, points), in the autograder's order
    ("q1", "test_q1_public", 0.0),
    ("q1", "test_train_step_hidden", 4.0),
    ("q1", "test_evaluate_memory_hidden", 2.0),
    ("q2", "test_batch_axes_hidden", 3.0),
    ("q3", "test_broadcast_hidden", 3.0),
    ("q5", "test_accumulate_hidden", 4.0),
    ("q5", "test_accumulate_scale_hidden", 2.0),
    ("q6", "test_shift_mask_hidden", 4.0),
    ("q7", "test_nobody_passes_hidden", 2.0),
    ("q8a", "test_everyone_passes_hidden", 1.0),
    ("q8b", "test_weak_pass_hidden", 1.0),
]
GRADED = 26
NOT_GRADED = {26: ("timeout", "ran past 300 s"), 27: ("timeout", "ran past 300 s"),
              28: ("error", "the notebook is not valid JSON"), 29: ("not graded", "not a notebook")}
ODD_NAMES = {0: "<script>alert('x')</script>.ipynb", 1: "=cmd|' /C calc'!A0.ipynb", 2: "bad\udcff name.ipynb",
             3: "@SUM(A1).zip", 4: "\u202egnp.exe.ipynb", 5: "-2+3.ipynb", 26: "<img src=x onerror=alert(1)>.zip"}
FLAGS = {0: ["name holds markup"], 2: ["undecodable name"], 4: ["name reorders text"],
         10: ["otter pass disagrees on q1: 10.0 vs 8.0"], 11: ['=HYPERLINK("http://evil")'], 27: ["kernel killed"]}
EXPECTED_MISCONCEPTIONS = {"M27": 7, "M4": 5, "M18": 3, "M1": 1}
MALFORMED = {  # record file name -> bytes
    "broken.json": b'{"schema": 1, "status": "graded", ',
    "list.json": b"[1, 2, 3]",
    "nan.json": b'{"status": "graded", "id": "x", "total": NaN}',
    "latin1.json": b'{"status": "graded", "id": "caf\xe9"}',
    "no_status.json": b'{"id": "nobody", "tests": []}',
    "bad_test.json": b'{"status": "graded", "id": "y", "tests": [{"name": 3, "passed": true}]}',
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "huge_int.json": b'{"status": "graded", "id": "z", "total": 1' + b"0" * 400 + b"}",
}


def failure(i: int, test: str) -> tuple[float, list[str]] | None:
    """(score, misconceptions) when student i fails the test, None when they pass."""
    if test == "test_evaluate_memory_hidden" and i < 5:
        return 0.0, ["M4"]
    if test == "test_train_step_hidden" and i == 1:
        return 0.0, ["M4", "M1"]                   # a second M4 hit: still one student
    if test == "test_accumulate_hidden" and 5 <= i < 8:
        return 1.0, ["M18"]
    if test == "test_accumulate_scale_hidden" and i == 5:
        return 0.0, ["M18"]
    if test == "test_shift_mask_hidden" and i % 4 == 0:
        return 0.0, ["M27"]
    if test in ("test_batch_axes_hidden", "test_broadcast_hidden") and i >= 18:
        return 0.0, []
    if test == "test_nobody_passes_hidden":
        return 0.0, []
    if test == "test_weak_pass_hidden" and i < 18:
        return 0.0, []
    return None


def make_record(i: int) -> dict:
    name = ODD_NAMES.get(i, f"student{i:02d}.ipynb")
    status, detail = NOT_GRADED.get(i, ("graded", ""))
    tests, questions = [], {}
    if status == "graded":
        for question, test, points in TESTS:
            failed = failure(i, test)
            score = points if failed is None else failed[0]
            tests.append({"name": test, "question": question, "score": score, "possible": points,
                          "passed": failed is None, "message": "" if failed is None else f"{test} failed <b>",
                          "misconceptions": [] if failed is None else failed[1]})
            q = questions.setdefault(question, {"score": 0.0, "possible": 0.0})
            q["score"] += score
            q["possible"] += points
    total = sum(t["score"] for t in tests)
    return {"schema": 1, "assignment": "demo", "file": name, "id": f"s{i:02d}", "sha256": "0" * 64,
            "status": status, "detail": detail, "total": total, "possible": sum(p for _, _, p in TESTS),
            "otter_total": total if status == "graded" else None, "questions": questions, "tests": tests,
            "flags": FLAGS.get(i, []), "seconds": {"examiner": 2.0 + i * 0.25, "otter": 3.0, "total": 5.0 + i * 0.5},
            "output": "", "mac": "ab" * 32}


@pytest.fixture(scope="module")
def ids_yaml(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ids") / "ids.yaml"
    path.write_text('M1: {title: gradients never cleared, section: "§1.1"}\n'
                    'M4: {title: evaluate without no_grad, section: "§1.1"}\n'
                    "M18: {title: one backward over graph-connected losses, section: 1.5}\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("out")
    records = out / "records"
    records.mkdir()
    for i in range(30):
        (records / f"s{i:02d}.json").write_text(json.dumps(make_record(i)), encoding="ascii")
    for name, raw in MALFORMED.items():
        (records / name).write_bytes(raw)
    (records / "folder.json").mkdir()
    os.mkfifo(records / "fifo.json")
    os.symlink(records / "s10.json", records / "link.json")
    (records / "notes.txt").write_text("not a record")        # not *.json: not a record file at all
    return out


@pytest.fixture(scope="module")
def built(out_dir, ids_yaml) -> report.ClassReport:
    return report.write_report(out_dir, ids_yaml=ids_yaml)


def read_csv(out_dir: Path, name: str) -> list[dict[str, str]]:
    text = (out_dir / "report" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def test_counts_equal_the_known_class(built, out_dir):
    assert built.status_counts == {"graded": GRADED, "timeout": 2, "error": 1, "not graded": 1}
    assert {m.id: m.students for m in built.misconceptions} == EXPECTED_MISCONCEPTIONS
    assert [m.id for m in built.misconceptions] == list(EXPECTED_MISCONCEPTIONS)     # most frequent first
    rows = read_csv(out_dir, "misconceptions.csv")
    assert {r["id"]: int(r["students"]) for r in rows} == EXPECTED_MISCONCEPTIONS
    m4 = next(r for r in rows if r["id"] == "M4")
    assert (m4["title"], m4["section"]) == ("evaluate without no_grad", "§1.1")
    assert float(m4["share_of_graded"]) == pytest.approx(5 / GRADED, abs=1e-4)
    assert m4["tests"] == "test_evaluate_memory_hidden; test_train_step_hidden"
    assert next(r for r in rows if r["id"] == "M18")["section"] == "§1.5"
    assert next(r for r in rows if r["id"] == "M27")["title"] == ""                 # not in ids.yaml: bare id
    assert {r["status"]: int(r["submissions"]) for r in read_csv(out_dir, "status.csv")} == built.status_counts


def test_every_test_has_an_item_row(built, out_dir):
    rows = {r["test"]: r for r in read_csv(out_dir, "tests.csv")}
    assert list(rows) == [t for _, t, _ in TESTS]
    assert all(int(r["students"]) == GRADED for r in rows.values())
    assert rows["test_nobody_passes_hidden"]["passed"] == "0"
    assert rows["test_nobody_passes_hidden"]["discrimination_point_biserial"] == ""   # zero variance
    assert rows["test_everyone_passes_hidden"]["discrimination_point_biserial"] == ""
    assert float(rows["test_weak_pass_hidden"]["discrimination_point_biserial"]) < 0
    assert "nobody passed" in rows["test_nobody_passes_hidden"]["note"]
    assert float(rows["test_accumulate_hidden"]["difficulty"]) == pytest.approx((23 * 4 + 3 * 1) / (GRADED * 4),
                                                                                 abs=1e-4)
    assert float(rows["test_q1_public"]["difficulty"]) == 1.0                       # 0 points: the pass rate


def test_discrimination_is_the_point_biserial_with_the_rest_score(built):
    graded = [make_record(i) for i in range(GRADED)]
    test = "test_batch_axes_hidden"
    xs = [float(next(t for t in r["tests"] if t["name"] == test)["passed"]) for r in graded]
    ys = [r["total"] - next(t for t in r["tests"] if t["name"] == test)["score"] for r in graded]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    r = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
         / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)))
    item = next(i for i in built.items if i.test == test)
    assert item.discrimination == pytest.approx(r)
    assert 0 < r <= 1


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.images, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def test_html_parses_and_embeds_its_figures(built, out_dir):
    page = _Page()
    page.feed((out_dir / "report.html").read_text(encoding="utf-8"))
    page.close()
    assert "script" not in page.tags and page.tags.count("img") == len(page.images)
    assert len(page.images) >= 6                  # scores, per question, pass rates, item map, misconceptions, time
    for image in page.images:
        assert image["alt"] and image["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(image["src"].split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    text = "".join(page.text)
    assert "<script>alert('x')</script>.ipynb" in text         # shown as text, not run
    assert "<img src=x onerror=alert(1)>.zip" in text
    assert "bad\\udcff name.ipynb" in text and "\\u202egnp.exe.ipynb" in text
    assert "point-biserial" in text and "M4" in text and "evaluate without no_grad" in text
    assert f"{len(MALFORMED) + 3} files in records/ could not be read" in text


def test_csv_cells_cannot_start_a_formula(built, out_dir):
    files = {r["file"] for r in read_csv(out_dir, "times.csv")}
    assert "'=cmd|' /C calc'!A0.ipynb" in files and "'@SUM(A1).zip" in files and "'-2+3.ipynb" in files
    assert "bad\\udcff name.ipynb" in files                   # undecodable name: visible, valid UTF-8
    reasons = {r["id"]: r["reasons"] for r in read_csv(out_dir, "flagged.csv")}
    assert reasons["s11"] == "'=HYPERLINK(\"http://evil\")"
    assert set(reasons) == {"s00", "s02", "s04", "s10", "s11", "s26", "s27", "s28", "s29"}
    assert csv_cell(-0.25) == -0.25 and csv_cell("\tx") == "'\tx"
    assert csv_cell("\rx") == "\\x0dx"                        # CR is shown escaped, so it cannot start a cell
    for path in (out_dir / "report").glob("*.csv"):
        for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8"))):
            assert not any(c.startswith(("=", "+", "@")) for c in row), (path.name, row)


def test_malformed_records_are_skipped_and_counted(built, out_dir):
    skipped = dict(built.skipped)
    assert set(skipped) == set(MALFORMED) | {"folder.json", "link.json", "fifo.json"}
    assert len(built.records) == 30
    assert {r["record_file"] for r in read_csv(out_dir, "skipped.csv")} == set(skipped)


def test_main_prints_where_and_refuses_a_folder_without_records(out_dir, ids_yaml, tmp_path, capsys):
    assert report.main(out_dir, ids_yaml=ids_yaml) == 0
    assert str(out_dir / "report.html") in capsys.readouterr().out
    assert report.main(tmp_path) == 2
    (tmp_path / "records").mkdir()
    assert report.main(tmp_path) == 0                        # an empty batch still gets a (short) report
    assert (tmp_path / "report.html").is_file()


def test_describe_names_the_handout_section(ids_yaml, tmp_path, capsys):
    table = load_ids_file(ids_yaml)
    assert describe(["M4", "M27", "M4", "M18"], table) == [
        "M4 — evaluate without no_grad (§1.1)", "M27", "M18 — one backward over graph-connected losses (§1.5)"]
    assert load_misconceptions(tmp_path) == {}                 # no ids.yaml yet: bare ids
    (tmp_path / "misconceptions").mkdir()
    (tmp_path / "misconceptions" / "ids.yaml").write_text("M3: {title: a tensor, not a float, section: 1.1}\n")
    assert load_misconceptions(tmp_path) == {"M3": ("a tensor", "§1.1")}
    assert "quote titles that contain a comma" in capsys.readouterr().err
    (tmp_path / "misconceptions" / "ids.yaml").write_text("M1: [unclosed", encoding="utf-8")
    assert load_misconceptions(tmp_path) == {}


def test_printable_makes_hidden_characters_visible():
    assert printable("a\x00b\u202ec\udcffd") == "a\\x00b\\u202ec\\udcffd"
    assert len(printable("x" * 10_000)) == 300


def test_odd_but_valid_records_still_render(tmp_path):
    """One graded record with more tests than a figure shows, mathtext-looking names and no timings; one bare error."""
    records = tmp_path / "records"
    records.mkdir()
    tests = [{"name": f"test_${i}$_\\frac{{", "question": f"q{i % 20}", "score": 0.0, "possible": 1.0,
              "passed": False, "message": "", "misconceptions": [f"M{i}", "$x$"]} for i in range(100)]
    (records / "a.json").write_text(json.dumps({"status": "graded", "id": "a", "file": "a", "total": 0,
                                                "possible": 100, "tests": tests}))
    (records / "b.json").write_text(json.dumps({"status": "error", "id": "b"}))
    result = report.write_report(tmp_path)
    assert result.status_counts["graded"] == 1 and result.status_counts["error"] == 1
    assert len(result.items) == 100 and all(i.discrimination is None for i in result.items)
    assert result.misconceptions[0].students == 1
    page = _Page()
    page.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert all(image["src"].startswith("data:image/png;base64,") for image in page.images)
