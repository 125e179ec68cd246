"""A corpus of bad (and good) submission files, generated from the committed solution and student notebooks.

`make_corpus(folder, solution, student)` writes the files and returns, per file name, what grading must
report (`Expect`). Every file's bytes are unique, so a test finds its record by sha256 whatever the grader
makes of its name. The function-level cases target the first graded function of the first question.
Used by tests/test_grading_robustness.py and bench/grading_benchmark.py.
"""
from __future__ import annotations

import ast
import copy
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit.harness import inject

ORPHAN_SLEEP = "613"   # `sleep 613` is started by a looping submission; no such process may survive grading
NON_UTF8_NAME = os.fsdecode(b"caf\xe9 r\xe9sum\xe9 \xff.ipynb")   # Latin-1 bytes, as LMS exports write them
FORMULA_NAME = "=cmd|' -C calc'!A0.ipynb"
DASH_NAME = "-rf --help.ipynb"
UNICODE_NAME = "Zoë Müller – homework (final).ipynb"
BIG_CELL_LINES = 6000
CASE_NAMES = ["correct.ipynb", "stub left as is.ipynb", "invalid json.ipynb", "empty.ipynb", "other assignment.ipynb",
              "foreign kernel.ipynb", "os_exit.ipynb", "loop top level.ipynb", "exception in a cell.ipynb",
              "syntax error.ipynb", "renamed function.ipynb", "memory bomb.ipynb", "prints megabytes.ipynb",
              "no outputs.ipynb", "6000-line cell.ipynb", "no notebook.zip", "export.zip", "zip bomb.zip",
              "200k entries.zip", UNICODE_NAME, NON_UTF8_NAME, DASH_NAME, FORMULA_NAME, "a.ipynb", "a.zip",
              ".hidden.ipynb", "report.pdf"]


@dataclass(frozen=True)
class Expect:
    status: tuple[str, ...]   # record statuses accepted (graded | timeout | error | not graded)
    score: str                # "full", "zero", "partial" (some points lost), "none" (not graded: total 0)
    detail: str = ""          # regex (case-insensitive) that the record's detail or the feedback must match


GRADED_FULL = Expect(("graded",), "full")


def solution_functions(nb) -> list[tuple[str, str]]:
    """(function name, question) for every function defined in a solution cell, in notebook order."""
    found, pending = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        check = re.search(r'grader\.check\("(q\w+)"\)', cell.source)
        if check:
            found += [(name, check.group(1)) for name in pending]
            pending = []
        elif "otter_assign_solution_cell" in cell.metadata.get("tags", []):
            pending += [n.name for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef)]
    return found


def _signature(nb, name: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "code":
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ast.unparse(node.args)
    raise KeyError(name)


def _labelled(nb, label: str):
    """A copy of nb with a markdown cell naming the case: every file's bytes differ."""
    nb = copy.deepcopy(nb)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"corpus case: {label.encode('ascii', 'backslashreplace').decode()}"))
    return nb


def _with_cell(nb, source: str, after: int):
    nb = copy.deepcopy(nb)
    nb.cells.insert(after, nbformat.v4.new_code_cell(source))
    return nb


def _target_cell(nb, target: str):
    return next(c for c in nb.cells if c.cell_type == "code" and re.search(rf"^def {target}\(", c.source, re.M))


def _zip_bomb(path: Path, notebook_name: str) -> None:
    """One notebook entry of 1 GiB of zeros: about 1 MB on disk."""
    chunk = b"\0" * (16 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open(notebook_name, "w", force_zip64=True) as f:
        for _ in range(64):
            f.write(chunk)


def _many_entries(path: Path, notebook_name: str, notebook: str, n: int = 200_000) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(notebook_name, notebook)
        for i in range(n):
            zf.writestr(f"junk/{i:06d}.txt", b"")


def make_corpus(folder: Path, solution: Path, student: Path) -> dict[str, Expect]:
    folder.mkdir(parents=True, exist_ok=True)
    nb_name = Path(solution).name
    sol = nbformat.read(str(solution), as_version=4)
    stu = nbformat.read(str(student), as_version=4)
    target, _ = solution_functions(sol)[0]
    args = _signature(sol, target)
    imports = next(i for i, c in enumerate(sol.cells) if c.cell_type == "code" and "import torch" in c.source)
    cases: dict[str, Expect] = {}

    def add(name: str, nb, expect: Expect) -> None:
        nbformat.write(_labelled(nb, name), str(folder / name))
        cases[name] = expect

    add("correct.ipynb", sol, GRADED_FULL)
    add("stub left as is.ipynb", stu, Expect(("graded",), "zero", r"NotImplementedError|write (its|the) body"))

    text = nbformat.writes(_labelled(sol, "invalid"))
    (folder / "invalid json.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    cases["invalid json.ipynb"] = Expect(("error",), "none", r"json|not a (valid )?notebook")
    (folder / "empty.ipynb").write_bytes(b"")
    cases["empty.ipynb"] = Expect(("error",), "none", r"empty")

    other = copy.deepcopy(sol)
    other.metadata["otter"] = {"assignment_name": "hw05"}
    add("other assignment.ipynb", other, Expect(("error", "not graded"), "none", r"hw05|another assignment"))
    foreign = copy.deepcopy(sol)
    foreign.metadata["kernelspec"] = {"name": "conda-env-dl-py", "display_name": "Python [conda env:dl]",
                                      "language": "python"}
    add("foreign kernel.ipynb", foreign, GRADED_FULL)

    add("os_exit.ipynb", _with_cell(sol, "import os\nos._exit(1)", imports + 1),
        Expect(("error", "graded"), "zero", r"exit|died|ended|stopped|lost|crash"))
    add("loop top level.ipynb", _with_cell(sol, f"import subprocess\nsubprocess.Popen(['sleep', '{ORPHAN_SLEEP}'])\n"
                                                "while True:\n    pass", imports + 1),
        Expect(("timeout",), "none", r"time"))

    raising = copy.deepcopy(sol)
    cell = _target_cell(raising, target)
    cell.source = 'raise RuntimeError("not finished")\n' + cell.source
    add("exception in a cell.ipynb", raising, Expect(("graded",), "partial", r"not defined|not finished|RuntimeError"))
    syntax = copy.deepcopy(sol)
    cell = _target_cell(syntax, target)
    cell.source = cell.source.replace(f"def {target}(", f"def {target}(:", 1)
    add("syntax error.ipynb", syntax, Expect(("graded",), "partial", r"SyntaxError|not defined"))
    renamed = copy.deepcopy(sol)
    cell = _target_cell(renamed, target)
    cell.source = re.sub(rf"\b{target}\b", f"my_{target}", cell.source)
    add("renamed function.ipynb", renamed, Expect(("graded",), "partial", rf"not defined|{target}"))

    add("memory bomb.ipynb",
        inject(sol, f"def {target}({args}):\n    ballast = b'x' * (64 << 30)\n    raise AssertionError\n"),
        Expect(("graded",), "partial", r"MemoryError|memory"))
    add("prints megabytes.ipynb", _with_cell(sol, "for i in range(100_000):\n    print('x' * 80)", imports + 1),
        GRADED_FULL)
    blank = copy.deepcopy(sol)
    for c in blank.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    add("no outputs.ipynb", blank, GRADED_FULL)
    lines = "\n".join(f"value_{i} = {i} * 2  # an experiment left in" for i in range(BIG_CELL_LINES))
    add("6000-line cell.ipynb", _with_cell(sol, lines, imports + 1), GRADED_FULL)

    with zipfile.ZipFile(folder / "no notebook.zip", "w") as zf:
        zf.writestr("README.txt", "my answers are in the notebook")
    cases["no notebook.zip"] = Expect(("error", "not graded"), "none", r"no notebook|\.ipynb")
    with zipfile.ZipFile(folder / "export.zip", "w") as zf:   # what grader.export() writes
        zf.writestr(nb_name, nbformat.writes(_labelled(sol, "export.zip")))
        zf.writestr(".OTTER_LOG", b"\x80\x04not really a pickle")
    cases["export.zip"] = GRADED_FULL
    _zip_bomb(folder / "zip bomb.zip", nb_name)
    cases["zip bomb.zip"] = Expect(("error", "not graded"), "none", r"large|size|limit|bomb|exceed|cap|more than|expands")
    _many_entries(folder / "200k entries.zip", nb_name, nbformat.writes(_labelled(sol, "200k entries")))
    cases["200k entries.zip"] = Expect(("error", "not graded"), "none", r"entries|too many|limit|exceed|cap")

    for name in (UNICODE_NAME, NON_UTF8_NAME, DASH_NAME, FORMULA_NAME, "a.ipynb"):
        add(name, sol, GRADED_FULL)
    with zipfile.ZipFile(folder / "a.zip", "w") as zf:   # the same stem as a.ipynb
        zf.writestr(nb_name, nbformat.writes(_labelled(sol, "a.zip")))
    cases["a.zip"] = GRADED_FULL

    add(".hidden.ipynb", sol, Expect(("not graded",), "none", r"hidden|dot|starts with"))
    (folder / "report.pdf").write_bytes(b"%PDF-1.4\n% my written answers\n%%EOF\n")
    cases["report.pdf"] = Expect(("not graded",), "none", r"not a notebook|pdf|\.ipynb|unsupported|type")
    assert sorted(cases) == sorted(CASE_NAMES), "CASE_NAMES lists every case"
    return cases
