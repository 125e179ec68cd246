"""The student flow, for real: JupyterLab in headless Chromium, driven by keyboard and menus.

One test fills every exercise with the solution through the editor, runs all
cells, reads each `grader.check` output and exports the submission zip; the
other runs the untouched stubs and checks that every failure reads as a short
message. Screenshots of the notebook after "Run All" land in artifacts/browser/.
"""
from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path

import pytest

from answers import code_cells, exercise_answers

pytestmark = pytest.mark.browser

CHECK_CELL = re.compile(r'^grader\.check\("(\w+)"\)$')
MAX_LINES_PER_FAILED_CASE = 6        # "❌ Test case failed", where, the line, the message
KERNEL_NOISE = ("without encryption", "Traceback (most recent call last)")


def check_cells(notebook: Path) -> dict[str, int]:
    """Question name -> index of its `grader.check` cell."""
    return {m.group(1): i for i, src in code_cells(notebook) if (m := CHECK_CELL.match(src.strip()))}


def cell_count(notebook: Path) -> int:
    return len(json.loads(notebook.read_text(encoding="utf-8"))["cells"])


def export_cell(notebook: Path) -> int:
    return next(i for i, src in code_cells(notebook) if "grader.export(" in src)


def run_all_and_capture(nb, notebook: Path, folder: Path, label: str, timings: dict
                        ) -> tuple[dict[str, str], list[str]]:
    """Run > Run All Cells, check every cell ran, screenshot.

    Returns each check's output, and the kernel noise a student sees anywhere
    (read now: Python shows a repeated warning only the first time).
    """
    timings[f"{label}: Run All"] = nb.run_all(timeout_s=600)
    prompts = nb.prompts()
    assert prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), \
        f"Run All left cells unexecuted: {prompts}"
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {q: nb.output_text(i) for q, i in check_cells(notebook).items()}
    for q, i in check_cells(notebook).items():
        nb.cell(i).screenshot(path=str(folder / f"check-{q}.png"))
    (folder / "checks.txt").write_text(
        "".join(f"--- grader.check({q!r})\n{text}\n\n" for q, text in outputs.items()), encoding="utf-8")
    nb.screenshot_pages(folder, "notebook")
    seen = {i: nb.output_text(i) for i, _ in code_cells(notebook)}
    noise = [f"cell {i} shows {phrase!r}:\n{text}"
             for phrase in KERNEL_NOISE for i, text in seen.items() if phrase in text]
    return outputs, noise


def test_solution_through_the_editor(assignment, lab, release_copy, notebook_page, artifacts, timings):
    started = time.monotonic()
    name = assignment.notebook_name
    notebook = release_copy / name
    answers = exercise_answers(notebook, assignment.release_dirs()["solutions"] / name)
    nb = notebook_page
    nb.open(lab.lab_url(f"{release_copy.name}/{name}"), cells=cell_count(notebook))

    for index, text in answers.items():
        nb.replace_cell_text(index, text)
    nb.save()
    saved = dict(code_cells(notebook))
    for index, text in answers.items():     # what was typed is what the file holds
        assert saved[index] == text, f"cell {index} holds {saved[index][:200]!r}"

    outputs, noise = run_all_and_capture(nb, notebook, artifacts / assignment.name / "solution",
                                         f"{assignment.name} solution", timings)
    for q, text in outputs.items():
        assert re.match(rf"^{q} passed!", text), f"{q} after the solution:\n{text}"

    # The export cell, as the README says: save, then run it; it writes the zip to submit.
    nb.save()
    zips_before = set(release_copy.glob("*.zip"))
    nb.run_cell(export_cell(notebook))
    new_zips = set(release_copy.glob("*.zip")) - zips_before
    assert len(new_zips) == 1, f"the export cell wrote {sorted(new_zips)}"
    with zipfile.ZipFile(new_zips.pop()) as archive:
        assert name in archive.namelist(), archive.namelist()
        exported = json.loads(archive.read(name))
    exported_code = {i: "".join(c["source"]) for i, c in enumerate(exported["cells"])}
    for index, text in answers.items():
        assert exported_code[index] == text, f"the zip's notebook lacks the answer in cell {index}"
    export_output = nb.output_text(export_cell(notebook))
    assert "Your submission has been exported" in export_output, export_output
    timings[f"{assignment.name} solution: whole test"] = time.monotonic() - started
    assert not noise, "\n".join(noise)     # checked last: everything above still ran


def test_untouched_stubs_read_as_messages(assignment, lab, release_copy, notebook_page, artifacts, timings):
    started = time.monotonic()
    name = assignment.notebook_name
    notebook = release_copy / name
    nb = notebook_page
    nb.open(lab.lab_url(f"{release_copy.name}/{name}"), cells=cell_count(notebook))
    outputs, noise = run_all_and_capture(nb, notebook, artifacts / assignment.name / "stub",
                                         f"{assignment.name} stub", timings)
    for q, text in outputs.items():
        assert text.startswith(f"{q} results:"), f"{q} on the stubs:\n{text}"
        cases = re.split(r"\n\s*\n(?=\s*\S+ - \d+ result:)", text)[1:]
        failed = [case for case in cases if "Test case failed" in case]
        assert failed, f"{q}: the stubs passed every public check:\n{text}"
        for case in failed:
            lines = [line for line in case.splitlines() if line.strip()]
            assert len(lines) <= MAX_LINES_PER_FAILED_CASE + 1, f"{q}: a wall of text:\n{case}"
            assert re.search(r"(NotImplementedError: \w+: write \w+|AssertionError: \S)", case), \
                f"{q}: the failure does not say what to do:\n{case}"
    timings[f"{assignment.name} stub: whole test"] = time.monotonic() - started
    assert not noise, "\n".join(noise)     # checked last: everything above still ran
