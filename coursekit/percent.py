"""Read the authored master: notebooks written as text in jupytext's percent format.

A source file is a sequence of cells, each opened by a header line:

    # %%                 a code cell (its lines are kept verbatim)
    # %% [markdown]      a markdown cell (each line is commented: "# text")
    # %% [raw]           a raw cell, e.g. otter's "# BEGIN QUESTION" delimiters

Markdown and raw lines drop their leading "# " (or a bare "#"). Blank lines
around a cell's body are trimmed. Text before the first header must be blank.
Keeping the master as text makes every change reviewable as a plain diff and
lets linters read the solution code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HEADER = re.compile(r"^# %%(?:\s+\[(?P<kind>markdown|md|raw)\])?\s*$")


@dataclass(frozen=True)
class Cell:
    kind: str  # "code" | "markdown" | "raw"
    source: str
    origin: str  # "file:line" of the header, for error messages


class SourceFormatError(ValueError):
    pass


def _uncomment(line: str, origin: str) -> str:
    if line.startswith("# "):
        return line[2:]
    if line.rstrip() == "#" or line.strip() == "":
        return ""
    raise SourceFormatError(f"{origin}: markdown/raw lines must start with '# ', got {line!r}")


def _trim(lines: list[str]) -> str:
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def parse(text: str, name: str = "<source>") -> list[Cell]:
    cells: list[Cell] = []
    kind: str | None = None
    origin = name
    body: list[str] = []

    def flush() -> None:
        if kind is None:
            if _trim(list(body)):
                raise SourceFormatError(f"{name}: text before the first '# %%' header")
            return
        cells.append(Cell(kind, _trim(body), origin))

    for lineno, line in enumerate(text.splitlines(), start=1):
        match = HEADER.match(line)
        if match:
            flush()
            raw_kind = match.group("kind")
            kind = {"md": "markdown", None: "code"}.get(raw_kind, raw_kind)
            origin = f"{name}:{lineno}"
            body = []
        elif kind in ("markdown", "raw"):
            body.append(_uncomment(line, f"{name}:{lineno}"))
        else:
            body.append(line)
    flush()
    return cells


def read_cells(path: Path) -> list[Cell]:
    return parse(path.read_text(encoding="utf-8"), name=str(path))


def to_notebook_cell(cell: Cell):
    import nbformat  # here, so that reading sources needs only the standard library

    factory = {
        "code": nbformat.v4.new_code_cell,
        "markdown": nbformat.v4.new_markdown_cell,
        "raw": nbformat.v4.new_raw_cell,
    }[cell.kind]
    return factory(cell.source)
