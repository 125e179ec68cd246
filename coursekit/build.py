"""Build an assignment's releases from its authored master.

    assignments/<hw>/assignment.yaml     otter's ASSIGNMENT CONFIG
    assignments/<hw>/notebook/*.py       the master notebook, as text (see master.py)
    assignments/<hw>/files/              shipped to students and the autograder (otter `files:`; optional)
    assignments/<hw>/checks/             hidden check packages, autograder only (`autograder_files:`)
    assignments/<hw>/grader/             copied into autograder/<hw>/ (requirements, GPU grading docs)

produce (all generated, committed, never edited by hand):

    student/<hw>/      the release: notebook with stubs, public tests, shipped files
    solutions/<hw>/    the solution notebook, executed, with its figures
    autograder/<hw>/   <hw>-autograder.zip for otter run / otter grade / Gradescope

The master is validated first (validate.py: errors name file:line); an otter
failure is re-raised naming the question and file it comes from. Everything otter makes random (cell ids, the zip's name, entry order and
timestamps, the pass emoji in check output) is normalized, so a second build
changes no byte.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from . import REPO_ROOT, master, validate

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
CONFIG_KEYS_SET_BY_BUILD = ("files", "autograder_files", "name", "requirements")
SOLUTION_EXECUTION_TIMEOUT_S = 600


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Assignment:
    """Where one assignment's sources and releases live."""

    name: str
    root: Path = REPO_ROOT
    only: tuple[str, ...] = ()  # trial builds: question ids to keep (plus the files without a question)

    @property
    def source_dir(self) -> Path:
        return self.root / "assignments" / self.name

    @property
    def notebook_sources(self) -> list[Path]:
        sources = sorted((self.source_dir / "notebook").glob("*.py"))
        if self.only:  # files are named NN_<id>_<topic>.py (validated); q8 keeps q8a..q8d, and so does q8a
            families = {re.sub(r"(\d)[a-z]$", r"\1", q) for q in self.only}
            sources = [p for p in sources if validate.file_question_id(p) in families | {None}]
        return sources

    @property
    def shipped_files(self) -> list[Path]:
        files = self.source_dir / "files"
        return sorted(p for p in files.iterdir() if not _ignored(p)) if files.exists() else []

    @property
    def check_packages(self) -> list[Path]:
        checks = self.source_dir / "checks"
        return sorted(p for p in checks.iterdir() if not _ignored(p)) if checks.exists() else []

    @property
    def grader_files(self) -> list[Path]:
        grader = self.source_dir / "grader"
        return sorted(p for p in grader.iterdir() if not _ignored(p)) if grader.exists() else []

    @property
    def notebook_name(self) -> str:
        return f"{self.name}.ipynb"

    @property
    def zip_name(self) -> str:
        return f"{self.name}-autograder.zip"

    def release_dirs(self, out_root: Path | None = None) -> dict[str, Path]:
        base = out_root or self.root
        return {kind: base / kind / self.name for kind in ("student", "solutions", "autograder")}

    def autograder_zip(self, out_root: Path | None = None) -> Path:
        return self.release_dirs(out_root)["autograder"] / self.zip_name


def assignment_names(root: Path = REPO_ROOT) -> list[str]:
    """Every assignment under root/assignments/ (a folder with an assignment.yaml)."""
    folder = Path(root) / "assignments"
    return sorted(p.name for p in folder.iterdir() if (p / "assignment.yaml").is_file()) if folder.is_dir() else []


def _ignored(path: Path) -> bool:
    return path.name.startswith(".") or path.name == "__pycache__" or path.suffix == ".pyc"


# ----------------------------------------------------------------------------- master


def assemble_master(assignment: Assignment) -> nbformat.NotebookNode:
    """The otter master notebook: config raw cell + every source file's cells, in name order."""
    config_path = assignment.source_dir / "assignment.yaml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    clash = [k for k in CONFIG_KEYS_SET_BY_BUILD if k in config]
    if clash:
        raise BuildError(f"{config_path}: {clash} are set by the build from the folder layout; remove them")
    config["name"] = assignment.name
    config["files"] = [p.name for p in assignment.shipped_files]
    config["autograder_files"] = [p.name for p in assignment.check_packages]
    if (assignment.source_dir / "grader" / "requirements.txt").exists():
        config["requirements"] = "requirements.txt"

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(nbformat.v4.new_raw_cell("# ASSIGNMENT CONFIG\n" + yaml.safe_dump(config, sort_keys=False)))
    sources = assignment.notebook_sources
    if not sources:
        raise BuildError(f"no notebook sources in {assignment.source_dir / 'notebook'}")
    for path in sources:
        nb.cells.extend(master.to_notebook_cell(c) for c in master.read_cells(path))
    return nb


def stage_master(assignment: Assignment, stage: Path) -> Path:
    """Write the master notebook and the files its config names into `stage`."""
    stage.mkdir(parents=True, exist_ok=True)
    master = stage / assignment.notebook_name
    nbformat.write(assemble_master(assignment), master)
    for src in assignment.shipped_files + assignment.check_packages:
        _copy(src, stage / src.name)
    requirements = assignment.source_dir / "grader" / "requirements.txt"
    if requirements.exists():
        shutil.copy2(requirements, stage / "requirements.txt")
    # The hidden checks use the autograder's own copy of the shipped files
    # (e.g. the memory probe), never the one in the student's folder.
    for package in assignment.check_packages:
        if package.is_dir():
            for shipped in assignment.shipped_files:
                if shipped.suffix == ".py":
                    shutil.copy2(shipped, stage / package.name / shipped.name)
    return master


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    else:
        shutil.copy2(src, dst)


class OtterAssignError(BuildError):
    def __init__(self, returncode: int, output: str):
        self.output = output
        lines = [line for line in output.strip().splitlines() if line.strip()]
        self.summary = lines[-1] if lines else f"exit status {returncode}"
        super().__init__(f"otter assign failed ({returncode}):\n{output}")


def run_otter_assign(master_notebook: Path, result: Path) -> None:
    cmd = [sys.executable, "-m", "otter", "assign", "--no-run-tests", str(master_notebook), str(result)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=master_notebook.parent)
    if proc.returncode != 0:
        raise OtterAssignError(proc.returncode, f"{proc.stdout}\n{proc.stderr}")


def _question_at(cell: master.Cell) -> str:
    """" on question qN" for the question a cell belongs to (by position in its file), else ""."""
    path = Path(cell.origin.rsplit(":", 1)[0])
    before = [q for q in validate.read_questions(path, []) if int(q.origin.rsplit(":", 1)[1]) <= cell.line]
    return f" on question {before[-1].name}" if before else ""


def otter_assign(assignment: Assignment, staged_master: Path, result: Path) -> None:
    """otter assign on the whole master; on failure, find the question whose file makes it fail.

    otter's tracebacks name neither, so each question file is assigned again on its own
    (with the files that hold no question); the first that fails is named."""
    try:
        run_otter_assign(staged_master, result)
        return
    except OtterAssignError as whole:
        failure = whole
    cell_number = re.search(r"cell number (\d+)", failure.summary)
    if cell_number:  # otter counts the master's cells from 1, the config cell first
        cells = [c for path in assignment.notebook_sources for c in master.read_cells(path)]
        index = int(cell_number.group(1)) - 2
        if 0 <= index < len(cells):
            raise BuildError(f"{cells[index].origin}: otter assign fails{_question_at(cells[index])}: "
                             f"{failure.summary}\n--- otter's output ---\n{failure.output}") from None
    for path in assignment.notebook_sources:
        family = validate.file_question_id(path)
        if family is None:
            continue
        alone = dataclasses.replace(assignment, only=(family,))
        with tempfile.TemporaryDirectory(prefix="otter-locate-") as tmp:
            try:
                run_otter_assign(stage_master(alone, Path(tmp) / "master"), Path(tmp) / "dist")
            except OtterAssignError as exc:
                names = [q.name for q in validate.read_questions(path, [])]
                raise BuildError(f"{path}:1: otter assign fails on question {', '.join(names) or family} "
                                 f"of this file: {exc.summary}\n--- otter's output ---\n{exc.output}") from None
    raise BuildError(f"otter assign fails on the whole master but on no question file alone: "
                     f"{failure.summary}\n--- otter's output ---\n{failure.output}") from None


# ----------------------------------------------------------------------------- normalize


def stable_cell_ids(nb: nbformat.NotebookNode) -> None:
    """Cell ids from content, so an unchanged cell keeps its id across builds."""
    seen: dict[str, int] = {}
    for cell in nb.cells:
        digest = hashlib.sha1(f"{cell.cell_type}\0{cell.source}".encode()).hexdigest()[:12]
        seen[digest] = seen.get(digest, 0) + 1
        cell["id"] = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"


MEMORY_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def normalize_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    stable_cell_ids(nb)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            # otter's check output picks a random emoji; the export cell names a timestamped zip.
            if "grader.check" in cell.source or "grader.export" in cell.source:
                cell.outputs = []
                cell.execution_count = None
            cell.outputs = merge_streams(cell.get("outputs", []))
            for output in cell.get("outputs", []):
                # object reprs carry memory addresses that change every run
                if "text" in output:
                    output["text"] = MEMORY_ADDRESS.sub(" at 0x…", output["text"])
                plain = output.get("data", {}).get("text/plain")
                if isinstance(plain, str):
                    output["data"]["text/plain"] = MEMORY_ADDRESS.sub(" at 0x…", plain)
    return nb


def merge_streams(outputs: list) -> list:
    """The kernel splits printed text into chunks by timing; merge neighbours of one stream."""
    merged = []
    for output in outputs:
        if (output.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == output.get("name")):
            merged[-1]["text"] += output["text"]
        else:
            merged.append(output)
    return merged


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


def normalized_zip(src: Path, dst: Path, extra: dict[str, bytes] | None = None) -> None:
    """Rewrite a zip with sorted entries, fixed timestamps and permissions."""
    entries: dict[str, bytes] = {}
    with zipfile.ZipFile(src) as zin:
        for info in zin.infolist():
            if not info.is_dir():
                entries[info.filename] = zin.read(info)
    entries.update(extra or {})
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            mode = 0o755 if name in ("run_autograder", "setup.sh") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(info, entries[name])


# ----------------------------------------------------------------------------- execute


def execute_notebook(nb: nbformat.NotebookNode, cwd: Path, timeout: int = SOLUTION_EXECUTION_TIMEOUT_S) -> None:
    """Run every cell in a fresh kernel (in place); any error fails the build."""
    from nbclient import NotebookClient

    # The export cell re-runs every public test and writes a zip; the build needs neither.
    for cell in nb.cells:
        if cell.cell_type == "code" and "grader.export" in cell.source:
            cell.metadata.setdefault("tags", []).append("skip-execution")
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
        allow_errors=False,
    )
    client.execute()
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "skip-execution" in tags:
            tags.remove("skip-execution")
            if not tags:
                del cell.metadata["tags"]


# ----------------------------------------------------------------------------- release


def build(assignment: Assignment, out_root: Path | None = None, execute_solutions: bool = True,
          log=print) -> dict[str, Path]:
    """Regenerate student/, solutions/ and autograder/ for `assignment` under out_root."""
    targets = assignment.release_dirs(out_root)
    with tempfile.TemporaryDirectory(prefix=f"{assignment.name}-build-") as tmp:
        tmp = Path(tmp)
        log(f"[build] validating and assembling the master from {len(assignment.notebook_sources)} source files")
        validate.validate(assignment)
        staged_master = stage_master(assignment, tmp / "master")
        log("[build] otter assign")
        otter_assign(assignment, staged_master, tmp / "dist")
        dist = tmp / "dist"
        staged = {kind: tmp / "out" / kind for kind in targets}

        # student release: otter's student folder, normalized
        _copy(dist / "student", staged["student"])
        student_nb = staged["student"] / assignment.notebook_name
        write_notebook(normalize_notebook(nbformat.read(student_nb, as_version=4)), student_nb)

        # solutions: the solution notebook run top to bottom in a copy of the student folder
        _copy(dist / "student", staged["solutions"])
        solution_nb = nbformat.read(dist / "autograder" / assignment.notebook_name, as_version=4)
        if execute_solutions:
            log("[build] executing the solution notebook")
            run_dir = tmp / "solution-run"
            _copy(dist / "student", run_dir)
            execute_notebook(solution_nb, run_dir)
        write_notebook(normalize_notebook(solution_nb), staged["solutions"] / assignment.notebook_name)
        for extra in sorted((assignment.source_dir / "solutions").glob("*")) if (
                assignment.source_dir / "solutions").exists() else []:
            _copy(extra, staged["solutions"] / extra.name)

        # autograder: one normalized zip plus the grader's own files
        staged["autograder"].mkdir(parents=True)
        zips = sorted((dist / "autograder").glob("*.zip"))
        if len(zips) != 1:
            raise BuildError(f"expected one autograder zip from otter assign, found {zips}")
        normalized_zip(zips[0], staged["autograder"] / assignment.zip_name)
        for src in assignment.grader_files:
            _copy(src, staged["autograder"] / src.name)

        for kind, target in targets.items():
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(staged[kind], target)
            log(f"[build] wrote {target}")
    return targets


def tree_digest(path: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under path (for freshness checks)."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    }
