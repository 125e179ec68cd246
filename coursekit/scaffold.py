"""`coursekit new NAME`: a new assignment with one example question that builds and grades.

    assignments/NAME/assignment.yaml                   otter's config (the build adds name, files, ...)
    assignments/NAME/notebook/00_intro.py              title and the notebook's imports
    assignments/NAME/notebook/01_q1_example.py         q1: prompt, stub + solution, public and hidden test
    assignments/NAME/checks/NAME_checks/q1.py          q1's hidden checks (+ __init__.py, _common.py)
    assignments/NAME/misconceptions/q1.py              q1's catalogue: one misconception, one correct alternative
    assignments/NAME/misconceptions/ids.yaml           titles and handout sections of the misconception ids

The result passes validation, builds, gives the solution full marks and the
stub zero, and the catalogue's variants behave (tests/test_scaffold.py).
Copy 01_q1_example.py to add questions (README, "Instructors").
"""
from __future__ import annotations

import re
from pathlib import Path

from . import REPO_ROOT

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PLACEHOLDER = "__HW__"

FILES: dict[str, str] = {}

FILES["assignment.yaml"] = """\
# otter-grader 7.0.0 ASSIGNMENT CONFIG. `name`, `files`, `autograder_files` and
# `requirements` are filled in by the build from the folder layout.
export_cell:
  pdf: false            # no pandoc/LaTeX needed: grader.export() writes the zip directly
  instructions: "Save the notebook, then run this cell. Submit the zip it writes."
generate: true
tests:
  files: true           # public tests as files in student/__HW__/tests/
  ok_format: false      # exception-based tests: def test_x(<names from the notebook>)
check_all_cell: false
"""

FILES["notebook/00_intro.py"] = """\
# %% [markdown]
# # __HW__
#
# Each exercise gives a stub whose body raises `NotImplementedError`. Replace
# the body; keep the function's name and signature (the grader calls them by
# name). Run `grader.check("qN")` after an exercise for public feedback; hidden
# tests decide the score.

# %%
import torch
"""

FILES["notebook/01_q1_example.py"] = '''\
# %% [raw]
# # BEGIN QUESTION
# name: q1
# points: 2

# %% [markdown]
# ### q1 — Mean squared error (an example question)
#
# Write `mean_squared_error(prediction, target)`: two tensors of the same shape
# to a 0-d tensor, the mean over all entries of `(prediction - target) ** 2`.

# %% [raw]
# # BEGIN SOLUTION

# %%
def mean_squared_error(prediction, target):
    """Two tensors of one shape -> 0-d tensor: the mean of the squared differences."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q1: write mean_squared_error")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return ((prediction - target) ** 2).mean()
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_mean_squared_error_example(mean_squared_error):
    import torch
    out = mean_squared_error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0]))
    assert isinstance(out, torch.Tensor), f"mean_squared_error should return a tensor, got {type(out).__name__}"
    assert out.shape == (), f"mean_squared_error should return a 0-d tensor, got shape {tuple(out.shape)}"
    assert out.item() == 2.0, "the mean of (0, 4) is 2"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_mean_squared_error_hidden(mean_squared_error):
    from __HW___checks import q1
    q1.check_mean_squared_error(mean_squared_error)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
'''

FILES["checks/__HW___checks/__init__.py"] = '''\
"""Hidden checks for __HW__, one module per question (q1.py, ...).

Shipped only in the autograder zip. Each `check_*` function takes the student's
objects, raises `CheckFailure` (an AssertionError) whose message names the
mistake, and returns None when it passes. The hidden test cells of the master
call these functions.
"""

# Modules the examiner's sandbox may import (docs/CHECKS_CONTRACT.md); these checks need none.
SANDBOX_MODULES = ()
'''

FILES["checks/__HW___checks/_common.py"] = '''\
"""Helpers shared by the checks: the failure type and seeded inputs."""
from __future__ import annotations

import torch


class CheckFailure(AssertionError):
    """A hidden check's verdict: the message is what the student reads."""


def fail(message: str) -> None:
    raise CheckFailure(message)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
'''

FILES["checks/__HW___checks/q1.py"] = '''\
"""q1: mean squared error. The student's code is called before the expected value is computed."""
from __future__ import annotations

import torch

from ._common import fail, generator


def check_mean_squared_error(mean_squared_error) -> None:
    g = generator(1)
    prediction, target = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    yours = mean_squared_error(prediction.clone(), target.clone())
    if not isinstance(yours, torch.Tensor) or yours.shape != ():
        fail(f"mean_squared_error should return a 0-d tensor, got {type(yours).__name__} "
             f"{tuple(getattr(yours, 'shape', ()))}")
    squared = (prediction - target) ** 2
    if torch.allclose(yours, squared.sum()):
        fail("mean_squared_error returned the sum of the squared errors, not their mean (M1)")
    if not torch.allclose(yours, squared.mean()):
        fail(f"mean_squared_error gave {yours.item():.4f}; the mean of the squared differences is "
             f"{squared.mean().item():.4f}")
'''

FILES["misconceptions/q1.py"] = '''\
"""q1 variants: a misconception the checks must catch and a correct alternative that keeps full marks."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M1", "q1", note="sums the squared errors instead of averaging them", expect=("not their mean",),
            source=\'\'\'
def mean_squared_error(prediction, target):
    return ((prediction - target) ** 2).sum()
\'\'\'),
    Variant("mse-loss", "q1", correct=True, note="torch's own mse_loss", source=\'\'\'
def mean_squared_error(prediction, target):
    return torch.nn.functional.mse_loss(prediction, target)
\'\'\'),
]
'''

FILES["misconceptions/ids.yaml"] = """\
# Misconception ids: the title students and instructors see, and the handout section it comes from.
M1: {title: sums the squared errors instead of averaging them, section: ""}
"""


def new_assignment(name: str, root: Path = REPO_ROOT) -> Path:
    """Create root/assignments/NAME/ from the templates above; refuses to overwrite."""
    if not NAME.match(name):
        raise SystemExit(f"{name!r}: an assignment's name is lower-case letters, digits and underscores, "
                         "starting with a letter (it names the checks package NAME_checks)")
    folder = Path(root) / "assignments" / name
    if folder.exists():
        raise SystemExit(f"{folder} exists already")
    for relative, text in FILES.items():
        path = folder / relative.replace(PLACEHOLDER, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace(PLACEHOLDER, name), encoding="utf-8")
    return folder
