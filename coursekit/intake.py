"""TRUSTED SIDE: read a folder of submissions once, defensively, into the grader's own copies.

Every entry of the folder gets an `Entry` (and so a row in grades.csv): file
names are kept as bytes and shown escaped, each file is read once and hashed
(what is graded is what was hashed), zips are opened in memory with their
entry count and size capped, notebooks are parsed as JSON with size caps and
no work that grows faster than their size.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 64 << 20
MAX_ZIP_ENTRIES = 500
MAX_ZIP_BYTES = 128 << 20
MAX_NOTEBOOK_BYTES = 32 << 20
MAX_CELLS = 3_000


class NotGradable(Exception):
    """Why a file gets no grade; the message is its row's detail."""


@dataclass
class Entry:
    file: str                      # the name as shown: non-UTF-8 bytes escaped
    id: str                        # unique, file-system-safe
    sha256: str = ""
    status: str = "graded"         # "not graded" | "error" decided at intake; otherwise graded later
    detail: str = ""
    notebook_name: str = ""
    cells: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # the notebook and the files beside it in a zip


def display_name(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def _stem_id(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-") or "submission"
    return stem[:80]


def unique_ids(names: list[str]) -> list[str]:
    """A distinct, safe id per name, stable for the same folder (collisions get -2, -3, ...)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        base = _stem_id(name)
        n = seen.get(base.lower(), 0) + 1
        seen[base.lower()] = n
        out.append(base if n == 1 else f"{base}-{n}")
    return out


def list_folder(folder: Path) -> list[Entry]:
    raws = sorted(os.listdir(os.fsencode(folder)))
    names = [display_name(r) for r in raws]
    entries = []
    for raw, name, ident in zip(raws, names, unique_ids(names)):
        entry = Entry(file=name, id=ident)
        entries.append(entry)
        path = os.path.join(os.fsencode(folder), raw)
        try:
            _read(entry, path, raw)
        except NotGradable as why:
            entry.status, entry.detail = "not graded", str(why)
        except ValueError as why:  # the file is a submission but cannot be graded
            entry.status, entry.detail = "error", str(why)
    return entries


def _read(entry: Entry, path: bytes, raw: bytes) -> None:
    if raw.startswith(b"."):
        raise NotGradable("hidden file (its name starts with a dot)")
    if os.path.islink(path):
        raise NotGradable("a symbolic link, not a file")
    if os.path.isdir(path):
        raise NotGradable("a folder, not a notebook or zip")
    suffix = os.path.splitext(raw)[1].lower()
    if suffix not in (b".ipynb", b".zip"):
        raise NotGradable(f"not a notebook or zip ({display_name(suffix) or 'no extension'})")
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    entry.sha256 = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"file larger than {MAX_FILE_BYTES >> 20} MB")
    if not data.strip():
        raise ValueError("empty file")
    if suffix == b".zip":
        entry.notebook_name, notebook, entry.files = _from_zip(data)
    else:
        entry.notebook_name, notebook = "submission.ipynb", data
        entry.files = {entry.notebook_name: data}
    entry.cells = notebook_cells(notebook)


def _from_zip(data: bytes) -> tuple[str, bytes, dict[str, bytes]]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise ValueError("not a valid zip file") from None
    if len(infos) > MAX_ZIP_ENTRIES:
        raise ValueError(f"the zip has {len(infos):,} entries (at most {MAX_ZIP_ENTRIES} are read)")
    members = [i for i in infos if not i.is_dir() and _safe_member(i.filename)]
    notebooks = [i for i in members if i.filename.endswith(".ipynb")]
    if not notebooks:
        raise ValueError("no notebook in the zip")
    depth = min(i.filename.count("/") for i in notebooks)
    top = [i for i in notebooks if i.filename.count("/") == depth]
    if len(top) > 1:
        raise ValueError(f"more than one notebook in the zip ({', '.join(i.filename[:60] for i in top[:3])})")
    base = top[0].filename.rpartition("/")[0]
    files, total = {}, 0
    for info in members:
        rel = info.filename[len(base) + 1:] if base else info.filename
        if base and not info.filename.startswith(base + "/") or rel.startswith(".OTTER_LOG"):
            continue
        total += info.file_size
        if total > MAX_ZIP_BYTES:
            raise ValueError(f"the zip expands to more than {MAX_ZIP_BYTES >> 20} MB")
        try:
            with zf.open(info) as f:
                content = f.read(info.file_size + 1)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError):
            raise ValueError(f"unreadable zip entry {info.filename[:80]!r}") from None
        if len(content) > info.file_size:
            raise ValueError("the zip's entries are larger than they claim")
        files[rel] = content
    name = top[0].filename.rpartition("/")[2]
    return name, files[name], files


def _safe_member(name: str) -> bool:
    parts = name.split("/")
    return not (name.startswith(("/", "\\")) or ".." in parts or "__MACOSX" in parts or "\\" in name
                or any(p.startswith(".") and p != ".OTTER_LOG" for p in parts[:-1]) or "\x00" in name)


def notebook_cells(data: bytes) -> list[str]:
    """The code cells' sources, in order; ValueError naming what is wrong with the notebook."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"notebook larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError("invalid notebook JSON (not UTF-8 text)") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"invalid notebook JSON ({str(e)[:120]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a Jupyter notebook (JSON without a list of cells)")
    if len(nb["cells"]) > MAX_CELLS:
        raise ValueError(f"more than {MAX_CELLS} cells")
    cells = []
    for cell in nb["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            if isinstance(source, list):
                source = "".join(s for s in source if isinstance(s, str))
            cells.append(source if isinstance(source, str) else "")
    return cells


def notebook_assignment(data: bytes) -> str | None:
    try:
        meta = json.loads(data.decode("utf-8-sig")).get("metadata", {})
        name = meta.get("otter", {}).get("assignment_name")
        return name if isinstance(name, str) else None
    except (ValueError, AttributeError, RecursionError):
        return None


def check_assignment(entry: Entry, assignment: str) -> None:
    """A notebook of another assignment is an error row, not a zero from checks that never fit."""
    if entry.status != "graded" or not assignment:
        return
    got = notebook_assignment(entry.files.get(entry.notebook_name, b""))
    if got != assignment:
        entry.status = "error"
        entry.detail = (f"notebook of another assignment ({got[:40]!r}, not {assignment!r})" if got
                        else f"not a {assignment} notebook (its metadata names no assignment)")


def write_copy(entry: Entry, folder: Path) -> Path:
    """The grader's own copy of what it hashed, laid out as the student had it."""
    folder.mkdir(parents=True)
    for rel, content in entry.files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return folder
