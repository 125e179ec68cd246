"""Misconception ids as data: titles and handout sections from misconceptions/ids.yaml.

ids.yaml maps each id to its title and handout section:

    M4: {title: evaluate without no_grad, section: "§1.1"}

The class report and the feedback writer both use `describe` so that a
student and the instructor see the same words for the same mistake. A missing
or malformed file yields an empty table: ids are then shown bare.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

IDS_FILE = Path("misconceptions") / "ids.yaml"
MAX_IDS_FILE_BYTES = 1 << 20

Table = dict[str, tuple[str, str]]   # id -> (title, section); either may be ""


def load_misconceptions(assignment_dir: Path | str) -> Table:
    """The id table of an assignment folder (assignments/<hw>); {} when there is none."""
    return load_ids_file(Path(assignment_dir) / IDS_FILE)


def load_ids_file(path: Path | str) -> Table:
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size > MAX_IDS_FILE_BYTES:
            return {}
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        print(f"[misconceptions] ignoring {path}: {exc}", file=sys.stderr)
        return {}
    if not isinstance(data, dict):
        return {}
    table: Table = {}
    split = []
    for key, entry in data.items():
        if isinstance(entry, dict):
            title, section = entry.get("title"), entry.get("section")
            if set(entry) - {"title", "section"}:
                split.append(str(key))
        else:                                   # "M4: evaluate without no_grad" is accepted too
            title, section = entry, None
        table[str(key)] = (_text(title), _section(section))
    if split:   # {title: a, b, section: ...}: YAML reads "b" as a key, and the title loses its end
        print(f"[misconceptions] {path}: {', '.join(split)} have keys besides title and section; "
              "quote titles that contain a comma", file=sys.stderr)
    return table


def describe(ids, table: Table) -> list[str]:
    """One line per distinct id, in order: "M4 — evaluate without no_grad (§1.1)"."""
    lines = []
    for mid in dict.fromkeys(str(i) for i in ids):
        title, section = table.get(mid, ("", ""))
        line = f"{mid} — {title}" if title else mid
        lines.append(f"{line} ({section})" if section else line)
    return lines


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def _section(value) -> str:
    text = _text(value)
    return f"§{text}" if text and text[0].isdigit() else text   # "1.1" -> "§1.1"
