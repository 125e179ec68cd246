"""Progress bars for long loops (grading a class, the misconception catalogue), drawn by tqdm.

    for result in progress(results, total=len(todo), desc="grading"):
        ...

Bars go to stderr and disappear when stderr is not a terminal (CI logs, pytest's
capture), so logs keep only the summary lines the caller prints.
"""
from __future__ import annotations

import sys
from typing import Iterable, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "", stream=None,
             unit: str = "notebook") -> tqdm:
    """`iterable`, yielding the same items, with a bar showing count, rate and time left.

    The returned tqdm object also takes `set_postfix(ok=..., failed=...)` for running counts."""
    stream = stream or sys.stderr
    return tqdm(iterable, total=total, desc=desc, file=stream, unit=unit, dynamic_ncols=True,
                disable=not getattr(stream, "isatty", lambda: False)())
