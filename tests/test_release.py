"""The release contract, for every assignment: deterministic, fresh, leak-free, full marks for the
solution, zero for the stubs; masters that jupytext reads and writes back byte for byte."""
from __future__ import annotations

import re
import zipfile

import nbformat
import pytest

from coursekit import build, master

RELEASE_KINDS = ("student", "solutions", "autograder")


@pytest.mark.slow  # the freshness test below already rebuilds once and compares with the committed release
def test_rebuild_is_byte_identical(assignment, fresh_build, second_build):
    first, second = fresh_build, second_build
    for kind in RELEASE_KINDS:
        a = build.tree_digest(assignment.release_dirs(first)[kind])
        b = build.tree_digest(assignment.release_dirs(second)[kind])
        assert a == b, f"{kind}/ differs between two builds: {sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))}"


def test_committed_release_is_fresh(assignment, fresh_build):
    fresh = fresh_build
    for kind in RELEASE_KINDS:
        committed = build.tree_digest(assignment.release_dirs()[kind])
        rebuilt = build.tree_digest(assignment.release_dirs(fresh)[kind])
        stale = sorted(k for k in committed.keys() | rebuilt.keys() if committed.get(k) != rebuilt.get(k))
        assert not stale, (f"{kind}/{assignment.name} is stale ({stale[:5]}...): run `make release` "
                           "and commit the result.")


def test_solution_scores_full_marks(release_grades):
    record = release_grades["solution"]
    assert record["status"] == "graded", record["detail"]
    assert record["questions"], "the autograder reported no questions"
    short = {q: (r["score"], r["possible"]) for q, r in record["questions"].items() if r["score"] < r["possible"]}
    assert not short, f"the solution loses points (score, possible): {short}"
    assert record["otter_total"] == record["possible"], f"otter's own pass: {record['otter_total']}, {record['flags']}"
    assert not record["flags"], record["flags"]


def test_untouched_student_notebook_scores_zero(release_grades):
    record = release_grades["student"]
    assert record["status"] == "graded", f"grading the untouched release crashed: {record['detail']}"
    nonzero = {q: r["score"] for q, r in record["questions"].items() if r["score"] != 0}
    assert not nonzero, f"the untouched student notebook scores points: {nonzero}"
    assert record["otter_total"] == 0, f"otter's own pass gives the stubs {record['otter_total']}"
    assert set(record["questions"]) == set(release_grades["solution"]["questions"])


# ----------------------------------------------------------------------------- leaks

MIN_SIGNIFICANT_CHARS = 10
SOLUTION_MARKERS = ("# BEGIN SOLUTION", "# END SOLUTION", "# BEGIN PROMPT", "# END PROMPT")


def _significant(line: str) -> str | None:
    text = line.strip()
    if len(re.sub(r"\W", "", text)) < MIN_SIGNIFICANT_CHARS or text.startswith(("#", "import ", "from ")):
        return None
    return text


def _solution_lines(assignment) -> tuple[set[str], list[str]]:
    """Significant lines of every solution body in the master, and cells that would leak whole."""
    secret, public, unmarked = set(), set(), []
    in_solution_block = False
    for path in assignment.notebook_sources:
        for cell in master.read_cells(path):
            if cell.kind == "raw":
                if cell.source.startswith("# BEGIN SOLUTION"):
                    in_solution_block = True
                elif cell.source.startswith("# END SOLUTION"):
                    in_solution_block = False
                continue
            if cell.kind != "code":
                if not in_solution_block:
                    public.update(filter(None, map(_significant, cell.source.splitlines())))
                continue
            inside = False
            has_marker = False
            for line in cell.source.splitlines():
                stripped = line.rstrip()
                if stripped.endswith("# BEGIN SOLUTION") or "# BEGIN SOLUTION NO PROMPT" in stripped:
                    inside, has_marker = True, True
                    continue
                if stripped.endswith("# END SOLUTION"):
                    inside = False
                    continue
                sig = _significant(line)
                if inside or stripped.endswith("# SOLUTION"):
                    has_marker = True
                    if sig:
                        secret.add(sig.removesuffix("# SOLUTION").strip())
                elif sig and not any(m in line for m in SOLUTION_MARKERS):
                    public.add(sig)
            if in_solution_block and not has_marker:
                unmarked.append(cell.origin)
    # files shipped to students (the memory probe) are public by design
    for shipped in assignment.shipped_files:
        if shipped.suffix == ".py":
            public.update(filter(None, map(_significant, shipped.read_text().splitlines())))
    return secret - public, unmarked


def _student_text(assignment) -> dict[str, str]:
    root = assignment.release_dirs()["student"]
    texts = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            texts[str(path.relative_to(root))] = path.read_text(encoding="utf-8", errors="replace")
    nb = nbformat.read(root / assignment.notebook_name, as_version=4)
    texts["(notebook cell sources)"] = "\n".join(c.source for c in nb.cells)
    return texts


def _lines(text: str) -> set[str]:
    """Whole lines, stripped (a solution line must match a line, not part of one)."""
    return {line.strip() for line in text.splitlines()}


def test_no_code_cell_inside_a_solution_block_lacks_markers(assignment):
    _, unmarked = _solution_lines(assignment)
    assert not unmarked, (f"code cells inside a raw BEGIN/END SOLUTION block without solution markers are "
                          f"copied to students unchanged: {unmarked}")


def test_student_release_contains_no_solution_line(assignment):
    secret, _ = _solution_lines(assignment)
    assert secret, "the leak check found no solution line: is the parser still right?"
    leaks = [(name, line) for name, text in _student_text(assignment).items()
             for line in secret & _lines(text)]
    assert not leaks, f"solution lines in the student release: {leaks[:10]}"


def _hidden_test_bodies(assignment) -> dict[str, str]:
    bodies = {}
    with zipfile.ZipFile(assignment.autograder_zip()) as zf:
        for name in zf.namelist():
            if name.startswith("tests/") and name.endswith(".py"):
                source = zf.read(name).decode()
                for match in re.finditer(r"@test_case\(([^)]*)\)\n(def .*?)(?=\n@test_case|\Z)", source, re.S):
                    if "hidden=True" in match.group(1):
                        bodies[f"{name}:{match.group(2).splitlines()[0]}"] = match.group(2)
    return bodies


def test_student_release_contains_no_hidden_test(assignment):
    hidden = _hidden_test_bodies(assignment)
    assert hidden, "no hidden tests found in the autograder zip"
    texts = _student_text(assignment)
    for label, body in hidden.items():
        header = body.splitlines()[0]
        for name, text in texts.items():
            assert header not in text, f"hidden test {label} appears in student/{name}"
    packages = [p.name for p in assignment.check_packages]
    for name, text in texts.items():
        assert "hidden=True" not in text, f"hidden-test material in student/{name}"
        assert not any(p in text for p in packages), f"the checks package is named in student/{name}"


def test_student_release_contains_no_check_module(assignment):
    """No check module is shipped, and none of their function headers or long lines shows up."""
    shipped = {p.name for p in assignment.shipped_files}
    root = assignment.release_dirs()["student"]
    texts = _student_text(assignment)
    public = {l.strip() for p in assignment.shipped_files if p.suffix == ".py" for l in p.read_text().splitlines()}
    # lines the master itself shows students (e.g. a constant of answer choices) are public too
    secret, _ = _solution_lines(assignment)
    public |= {l for p in assignment.notebook_sources for l in _lines(p.read_text())} - secret
    for package in assignment.check_packages:
        assert not (root / package.name).exists(), f"{package.name} is shipped to students"
        for module in package.rglob("*.py"):
            if module.name in shipped:
                continue
            lines = {l.strip() for l in module.read_text().splitlines()
                     if (l.strip().startswith("def ") or len(re.sub(r"\W", "", l)) >= 40)
                     and l.strip() not in public and not l.strip().startswith(("import ", "from "))}
            for name, text in texts.items():
                found = sorted(lines & _lines(text))
                assert not found, f"{module.name} lines appear in student/{name}: {found[:3]}"


def test_student_release_is_what_students_need(assignment):
    root = assignment.release_dirs()["student"]
    nb = nbformat.read(root / assignment.notebook_name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "student notebook has outputs"
    sources = "\n".join(c.source for c in nb.cells)
    assert "grader.export(pdf=False" in sources, "export must not need pandoc/LaTeX"
    for path in assignment.shipped_files:
        assert (root / path.name).exists(), f"{path.name} is not shipped to students"
    with zipfile.ZipFile(assignment.autograder_zip()) as zf:
        names = zf.namelist()
        assert all(info.date_time == build.ZIP_EPOCH for info in zf.infolist())
    assert names == sorted(names)


def test_masters_round_trip_through_jupytext(assignment):
    """A master opens as a notebook (jupytext) and writes back unchanged: no diff noise from editing in JupyterLab."""
    changed = [p.name for p in assignment.notebook_sources
               if master.write_text(master.read_notebook(p)) != p.read_text(encoding="utf-8")]
    assert not changed, f"jupytext does not write these masters back byte for byte: {changed}"


def test_cells_carry_the_line_of_their_header(tmp_path):
    path = tmp_path / "01_q1_x.py"
    path.write_text("# %% [markdown]\n# # Title\n#\n# body\n\n# %%\nx = 1\n\n# %% [raw]\n# # BEGIN QUESTION\n# name: q1\n")
    cells = master.read_cells(path)
    assert [(c.kind, c.source, c.line) for c in cells] == [
        ("markdown", "# Title\n\nbody", 1), ("code", "x = 1", 6), ("raw", "# BEGIN QUESTION\nname: q1", 9)]
    assert cells[2].origin == f"{path}:9"
