"""A corpus of bad (and good) submissions, generated from the built solution and student notebooks.

It derives from whatever questions the build contains: the target of the function-level cases is the
first graded function of the first question (a function defined in a solution cell, `embed` for q2 at
the time of writing). `make_corpus(folder, solution, student)` writes the files and returns, per file,
what grading must report. Used by tests/test_grading_robustness.py and bench/grading_benchmark.py.
"""
from __future__ import annotations

import ast
import copy
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit.harness import inject


ORPHAN_SLEEP = "613"   # `sleep 613` is started by a looping submission; no such process may survive grading


@dataclass(frozen=True)
class Expect:
    status: str            # GradeResult.status: ok / timeout / error
    reason: str            # the start of the status column
    score: str             # "full", "zero", "partial" (lost points on the target's question only)
    message: str = ""      # a fragment of the status message or the feedback (case-insensitive)


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
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ast.unparse(node.args)
    raise KeyError(name)


def _with_cell(nb, source: str, after: int = 2):
    nb = copy.deepcopy(nb)
    nb.cells.insert(after, nbformat.v4.new_code_cell(source))
    return nb


def _write(nb, path: Path) -> None:
    nbformat.write(nb, str(path))


def make_corpus(folder: Path, solution: Path, student: Path) -> dict[str, Expect]:
    folder.mkdir(parents=True, exist_ok=True)
    sol = nbformat.read(str(solution), as_version=4)
    stu = nbformat.read(str(student), as_version=4)
    target, question = solution_functions(sol)[0]
    args = _signature(sol, target)
    imports = next(i for i, c in enumerate(sol.cells) if c.cell_type == "code" and "import torch" in c.source)
    cases: dict[str, Expect] = {}

    def add(name: str, nb, expect: Expect) -> None:
        _write(nb, folder / name)
        cases[name] = expect

    add("correct.ipynb", sol, Expect("ok", "ok", "full"))
    add("stub left as is.ipynb", stu, Expect("ok", "ok", "zero", "NotImplementedError"))

    text = (folder / "correct.ipynb").read_text(encoding="utf-8")
    (folder / "invalid json.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    cases["invalid json.ipynb"] = Expect("error", "invalid notebook JSON", "zero")
    (folder / "empty.ipynb").write_bytes(b"")
    cases["empty.ipynb"] = Expect("error", "empty file", "zero")

    other = copy.deepcopy(sol)
    other.metadata["otter"] = {"assignment_name": "hw05"}
    add("other assignment.ipynb", other, Expect("error", "notebook of another assignment", "zero", "hw05"))

    foreign = copy.deepcopy(sol)
    foreign.metadata["kernelspec"] = {"name": "conda-env-dl-py", "display_name": "Python [conda env:dl]",
                                      "language": "python"}
    add("foreign kernel.ipynb", foreign, Expect("ok", "ok", "full", "replaced by python3"))

    add("os_exit.ipynb", _with_cell(sol, "import os\nos._exit(1)", imports + 1),
        Expect("error", "kernel died (exit code 1)", "zero"))
    # the child process must die with the kernel (the whole process group is killed)
    add("loop top level.ipynb", _with_cell(sol, f"import subprocess\nsubprocess.Popen(['sleep', '{ORPHAN_SLEEP}'])\n"
                                                "while True:\n    pass", imports + 1),
        Expect("timeout", "timeout after", "zero", "still running code cell"))
    add("loop in function.ipynb", inject(sol, f"def {target}({args}):\n    while True:\n        pass\n"),
        Expect("timeout", "timeout after", "zero"))

    raising = copy.deepcopy(sol)
    cell = next(c for c in raising.cells if c.cell_type == "code" and re.search(rf"^def {target}\(", c.source, re.M))
    cell.source = 'raise RuntimeError("not finished")\n' + cell.source
    add("exception in a cell.ipynb", raising, Expect("ok", "ok", "partial", "RuntimeError: not finished"))

    syntax = copy.deepcopy(sol)
    cell = next(c for c in syntax.cells if c.cell_type == "code" and re.search(rf"^def {target}\(", c.source, re.M))
    cell.source = cell.source.replace(f"def {target}(", f"def {target}(:", 1)
    add("syntax error.ipynb", syntax, Expect("ok", "ok", "partial", "SyntaxError"))

    renamed = copy.deepcopy(sol)
    cell = next(c for c in renamed.cells if c.cell_type == "code" and re.search(rf"^def {target}\(", c.source, re.M))
    cell.source = re.sub(rf"\b{target}\b", f"my_{target}", cell.source)
    add("renamed function.ipynb", renamed, Expect("ok", "ok", "partial", "not defined"))

    add("memory bomb.ipynb",
        inject(sol, f"def {target}({args}):\n    ballast = b'x' * (64 << 30)\n    raise AssertionError\n"),
        Expect("ok", "ok (memory limit hit", "partial", "MemoryError"))
    add("prints megabytes.ipynb", _with_cell(sol, "for i in range(100_000):\n    print('x' * 80)", imports + 1),
        Expect("ok", "ok", "full"))

    blank = copy.deepcopy(sol)
    for c in blank.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    add("no outputs.ipynb", blank, Expect("ok", "ok", "full"))

    with zipfile.ZipFile(folder / "no notebook.zip", "w") as zf:
        zf.writestr("README.txt", "my answers are in the notebook")
    cases["no notebook.zip"] = Expect("error", "no notebook in zip", "zero")
    with zipfile.ZipFile(folder / "export.zip", "w") as zf:   # what grader.export() writes
        zf.writestr("hw07.ipynb", json.dumps(sol))
        zf.writestr(".OTTER_LOG", b"\x80\x04not really a pickle")
    cases["export.zip"] = Expect("ok", "ok", "full")

    named = copy.deepcopy(sol)
    named.cells.append(nbformat.v4.new_markdown_cell("Zoë: fertig ✓"))
    add("Zoë Müller – hw07 (final).ipynb", named, Expect("ok", "ok", "full"))
    return cases
