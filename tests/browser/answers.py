"""What a student types: the solution notebook's code, without otter's markers.

The student release and the executed solutions come from the same master, so
each student code cell that differs from every solution cell is an exercise,
and its answer is the solution cell that opens with the same name (`def
train_step` / `Q8_UNMASKED_PPL`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

_PROMPT_OPEN, _PROMPT_CLOSE = '""" # BEGIN PROMPT', '""" # END PROMPT'
_MARKER_LINES = {"# BEGIN SOLUTION NO PROMPT", "# BEGIN SOLUTION", "# END SOLUTION"}
_LEADING_NAME = re.compile(r"\s*(def\s+\w+|class\s+\w+|\w+)")


def code_cells(notebook: Path) -> list[tuple[int, str]]:
    """(index among all cells, source) of each code cell."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "code"]


def student_answer(solution_source: str) -> str:
    """A solution cell as a student would write it: stub prompts and markers removed."""
    kept, in_prompt = [], False
    for line in solution_source.splitlines():
        stripped = line.strip()
        if stripped == _PROMPT_OPEN:
            in_prompt = True
        elif stripped == _PROMPT_CLOSE:
            in_prompt = False
        elif not in_prompt and stripped not in _MARKER_LINES:
            kept.append(re.sub(r"\s+# SOLUTION$", "", line))
    return "\n".join(kept)


def exercise_answers(student_nb: Path, solution_nb: Path) -> dict[int, str]:
    """Student cell index -> the text that replaces the stub in that cell."""
    solutions = [source for _, source in code_cells(solution_nb)]
    by_name = {_LEADING_NAME.match(s).group(1): s for s in solutions if _LEADING_NAME.match(s)}
    answers = {}
    for index, source in code_cells(student_nb):
        if source in solutions:
            continue                      # shared cell (imports, demos, grader.check)
        name = _LEADING_NAME.match(source)
        if name is None or name.group(1) not in by_name:
            raise LookupError(f"no solution cell opens like student cell {index}: {source[:60]!r}")
        answers[index] = student_answer(by_name[name.group(1)])
    return answers
