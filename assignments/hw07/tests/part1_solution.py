"""Part 1 (q1, q4, q5) in-process: the solution's functions, the catalogue and the hidden checks.

Shared by test_part1_memory.py and gpu_memory_check.py (beside this file). Needs torch,
numpy, matplotlib and jupytext (coursekit.master reads the master with it; the harness's
catalogue side uses the standard library), so it also runs on a bare GPU machine with a
copy of the repository: without an installed coursekit, the repository's own is used.

The solution is loaded from the master sources: each file's setup cells (the code
before its `# BEGIN QUESTION`) and the code cells between the raw `# BEGIN SOLUTION` /
`# END SOLUTION` delimiters, executed as they are (the `# BEGIN PROMPT` strings in them
are inert).
"""
from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

HW = Path(__file__).resolve().parents[1]
# As in the autograder: the checks package and the shipped files (the memory probe) are importable.
_paths = [HW / "checks", HW / "files"]
if importlib.util.find_spec("coursekit") is None:  # a bare GPU machine: the project is not installed
    _paths.append(HW.parents[1])
for _path in _paths:
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402

from coursekit.harness import Variant, defined_names, read_catalogue  # noqa: E402,F401
from coursekit.master import read_cells  # noqa: E402
from hw07_checks import q1, q4, q5  # noqa: E402
from hw07_checks._common import CheckFailure  # noqa: E402

SOURCES = ("01_q1_switches.py", "04_q4_memory.py", "05_q5_accumulation.py")
CHECKS = {  # name in the notebook -> the hidden checks that receive it
    "train_step": [q1.check_train_step],
    "evaluate": [q1.check_evaluate, q1.check_evaluate_memory],
    "SWITCHES": [q1.check_switches],
    "adam_static_bytes": [q4.check_adam_static_bytes],
    "saved_activation_bytes": [q4.check_saved_activation_bytes, q4.check_saved_activation_bytes_no_leak],
    "memory_timeline": [q4.check_memory_timeline],
    "plot_memory_timeline": [q4.check_plot_memory_timeline],
    "OOM_CAUSE": [q4.check_oom_cause],
    "accumulate_gradients": [q5.check_accumulate_gradients, q5.check_accumulation_memory],
    "accumulated_train_step": [q5.check_accumulated_train_step],
    "checkpointed_forward": [q5.check_checkpointed_forward, q5.check_checkpoint_memory],
}
MEMORY_CHECKS = {q1.check_evaluate_memory, q4.check_saved_activation_bytes_no_leak, q4.check_memory_timeline,
                 q5.check_accumulation_memory, q5.check_checkpoint_memory}


def _solution_cells() -> list:
    cells = [(c.source, c.origin) for c in read_cells(HW / "notebook" / "00_intro.py") if c.kind == "code"]
    for name in SOURCES:
        setup, inside = True, False
        for cell in read_cells(HW / "notebook" / name):
            text = cell.source.strip()
            if cell.kind == "raw":
                setup = setup and not text.startswith("# BEGIN QUESTION")
                inside = text == "# BEGIN SOLUTION" or (inside and text != "# END SOLUTION")
            elif cell.kind == "code" and (setup or inside):
                cells.append((cell.source, cell.origin))
    return [compile(source, origin, "exec") for source, origin in cells]


CELLS = _solution_cells()


def solution_namespace(extra_source: str = "") -> dict:
    """Fresh globals of the solution (plus a variant's replacement definitions, as the harness injects them)."""
    threads = torch.get_num_threads()
    ns: dict = {"__name__": "hw07_solution"}
    try:
        for code in CELLS:
            exec(code, ns)
        if extra_source:
            exec(compile(extra_source, "<variant>", "exec"), ns)
    finally:  # the setup cell pins one thread and freezes the heap: not for the rest of the session
        torch.set_num_threads(threads)
        gc.unfreeze()
    return ns


def catalogue() -> dict[str, Variant]:
    """q1, q4 and q5's variants by id."""
    return {v.id: v for v in read_catalogue(HW / "misconceptions", ["q1", "q4", "q5"])}


def run_check(check, value) -> str | None:
    """None when the check passes, else its message."""
    try:
        check(value)
    except CheckFailure as exc:
        return str(exc)
    return None


def failed_checks(variant: Variant) -> list[tuple[object, str]]:
    """(check, message) for every check of the names a variant replaces that fails on the variant."""
    ns = solution_namespace(variant.source)
    return [(check, message) for name in defined_names(variant.source) for check in CHECKS.get(name, ())
            if (message := run_check(check, ns[name])) is not None]
