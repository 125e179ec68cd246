"""Read an assignment's master: notebooks kept as text in jupytext's percent format.

    # %%                 a code cell
    # %% [markdown]      a markdown cell (every line commented: "# text")
    # %% [raw]           a raw cell, e.g. otter's "# BEGIN QUESTION" delimiters

jupytext does the parsing, so a master file also opens in JupyterLab as a
notebook (with jupytext's extension) and writes back byte for byte
(`tests/test_release.py` checks the round trip). This module adds only what
the build and its validation need on top: each cell's origin as "file:line".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FORMAT = "py:percent"
CELL_HEADER = re.compile(r"^# %%")


@dataclass(frozen=True)
class Cell:
    kind: str  # "code" | "markdown" | "raw"
    source: str
    origin: str  # "file:line" of the cell's header, for error messages

    @property
    def line(self) -> int:
        return int(self.origin.rsplit(":", 1)[1])


class SourceFormatError(ValueError):
    pass


def read_notebook(path: Path):
    """The master file as a notebook (jupytext's reader)."""
    import jupytext

    return jupytext.reads(Path(path).read_text(encoding="utf-8"), fmt=FORMAT)


def write_text(nb) -> str:
    """The text jupytext writes for nb: a master read with read_notebook comes back unchanged."""
    import jupytext

    return jupytext.writes(nb, fmt=FORMAT)


def read_cells(path: Path) -> list[Cell]:
    """The master file's cells with the line of each cell's header."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    nb = read_notebook(path)
    header_lines = [n for n, line in enumerate(text.splitlines(), start=1) if CELL_HEADER.match(line)]
    if len(header_lines) != len(nb.cells):
        raise SourceFormatError(f"{path}:1: {len(header_lines)} '# %%' headers but jupytext reads "
                                f"{len(nb.cells)} cells: every cell must start with a '# %%' header")
    return [Cell(cell.cell_type, cell.source, f"{path}:{line}") for cell, line in zip(nb.cells, header_lines)]


def to_notebook_cell(cell: Cell):
    import nbformat

    factory = {
        "code": nbformat.v4.new_code_cell,
        "markdown": nbformat.v4.new_markdown_cell,
        "raw": nbformat.v4.new_raw_cell,
    }[cell.kind]
    return factory(cell.source)
