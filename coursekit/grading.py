"""Grade notebooks with a built autograder zip, using otter's own grading code.

`grade_many` is the one entry point the harness, the tests and the TA command
(`coursekit.ta_grade`) share. It runs the same steps as `otter run`, inside one
long-lived parent process, with three differences that make a class batch safe
and fast:

* **No pickles.** otter's grading cell pickles its results inside the student's
  kernel and `otter run` unpickles them (dill) on the host; its log server
  unpickles whatever the kernel sends. Here the grading cell asks otter for the
  same Gradescope dictionary (`GradingResults.to_gradescope_dict`, the content
  of otter's results.json) and writes it as JSON; the host only ever
  `json.loads` it, with a size cap and a schema check. No log server runs.
* **Limits.** Every submission gets a fresh kernel in its own process group,
  under an address-space limit (RLIMIT_AS: a memory bomb raises MemoryError
  instead of swapping the machine) and a wall-clock limit (at the deadline the
  whole process group, kernel and children, gets SIGKILL). Printed output is
  capped per cell.
* **Warm kernels.** While submissions grade, spare kernels start and import
  torch, numpy, matplotlib and otter (silently, binding no name in the user
  namespace). Each kernel runs exactly one submission and is then killed, so
  nothing carries over from one student to the next.

Host-side problems (empty file, invalid JSON, a zip without a notebook, a
notebook of another assignment) are diagnosed before any kernel runs; a
foreign kernelspec is rewritten to python3.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .build import KERNELSPEC

DEFAULT_TIMEOUT_S = 300
RESULTS_MAX_BYTES = 16 << 20          # a results file larger than this is not read
NOTEBOOK_MAX_BYTES = 256 << 20        # a submission larger than this is not opened
ZIP_MAX_BYTES = 512 << 20             # uncompressed size of a submitted zip
OUTPUT_CAP_BYTES = 256 << 10          # printed output kept per cell (the rest is dropped)
KERNEL_START_TIMEOUT_S = 120
PREIMPORTS = ("numpy", "torch", "matplotlib.pyplot", "otter", "otter.execute", "otter.test_files")
KERNEL_NAME = KERNELSPEC["name"]
META_KEY = "coursekit_cell"            # cell metadata: the submission's own cell number


# ----------------------------------------------------------------------------- results


@dataclass
class QuestionResult:
    name: str
    score: float
    max_score: float
    output: str = ""

    @property
    def full_marks(self) -> bool:
        return self.max_score > 0 and abs(self.score - self.max_score) < 1e-9


@dataclass
class GradeResult:
    submission: Path
    status: str  # "ok", "timeout", "error"
    questions: dict[str, QuestionResult] = field(default_factory=dict)
    message: str = ""                     # why the row is zero (status != "ok") or notes ("ok")
    reason: str = ""                      # one-line status for tables: "ok", "timeout after 30 s", ...
    cell_errors: list[dict] = field(default_factory=list)   # {"cell", "first_line", "ename", "evalue"}
    cases: dict[str, list[dict]] = field(default_factory=dict)  # question -> test-case results
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0                  # execution + tests (warm kernel), host preparation excluded
    retry: bool = False                   # a failure of the grader itself (e.g. no kernel): grade again
    verified: bool = False                # the verification pass (verify.py) has been combined in
    flags: list[str] = field(default_factory=list)  # tampering findings and otter/verified disagreements

    @property
    def total(self) -> float:
        return sum(q.score for q in self.questions.values())

    @property
    def possible(self) -> float:
        return sum(q.max_score for q in self.questions.values())

    def score(self, question: str) -> float:
        return self.questions[question].score if question in self.questions else 0.0

    def to_json(self) -> dict:
        return {
            "submission": str(self.submission), "status": self.status, "reason": self.reason,
            "message": self.message, "seconds": round(self.seconds, 3), "retry": self.retry,
            "questions": {q.name: {"score": q.score, "max_score": q.max_score, "output": q.output}
                          for q in self.questions.values()},
            "cases": self.cases, "cell_errors": self.cell_errors, "notes": self.notes,
            "verified": self.verified, "flags": self.flags,
        }

    @classmethod
    def from_json(cls, data: dict) -> "GradeResult":
        questions = {name: QuestionResult(name, float(q["score"]), float(q["max_score"]), str(q.get("output", "")))
                     for name, q in data.get("questions", {}).items()}
        return cls(Path(data["submission"]), data["status"], questions, data.get("message", ""),
                   data.get("reason", ""), list(data.get("cell_errors", [])), dict(data.get("cases", {})),
                   list(data.get("notes", [])), float(data.get("seconds", 0.0)), bool(data.get("retry", False)),
                   bool(data.get("verified", False)), [str(f) for f in data.get("flags", [])])


class SubmissionError(Exception):
    """A submission that cannot be graded at all; the message is its status."""


def _number(x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"not a number: {x!r}")
    return float(x)


def parse_results_json(data: dict) -> dict[str, QuestionResult]:
    """Questions from otter's results.json layout (Gradescope's), skipping the public summary."""
    questions = {}
    for test in data.get("tests", []):
        if not isinstance(test, dict) or "max_score" not in test or test.get("name") == "Public Tests":
            continue
        name = str(test["name"])[:100]
        questions[name] = QuestionResult(name, _number(test.get("score") or 0.0), _number(test["max_score"]),
                                         str(test.get("output", ""))[:100_000])
    return questions


def _parse_cases(data) -> dict[str, list[dict]]:
    cases = {}
    if not isinstance(data, dict):
        return cases
    for question, items in list(data.items())[:200]:
        if not isinstance(items, list):
            continue
        cases[str(question)[:100]] = [
            {"name": str(c.get("name", ""))[:200], "passed": bool(c.get("passed")), "hidden": bool(c.get("hidden")),
             "points": _number(c["points"]) if isinstance(c.get("points"), (int, float)) else None,
             "message": str(c.get("message") or "")[:20_000]}
            for c in items[:500] if isinstance(c, dict)]
    return cases


# ----------------------------------------------------------------------------- the autograder


class Autograder:
    """An autograder zip unpacked once: its otter config, tests and support files."""

    def __init__(self, zip_path: Path, root: Path):
        from otter.run import AutograderConfig

        self.zip_path = Path(zip_path)
        self.source = root / "source"
        with zipfile.ZipFile(self.zip_path) as zf:
            zf.extractall(self.source)
        config_path = self.source / "otter_config.json"
        self.user_config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        self.config = AutograderConfig(self.user_config)
        if self.config.lang != "python":
            raise ValueError(f"{zip_path}: only Python autograders are supported (lang={self.config.lang!r})")
        self.assignment_name = self.config.assignment_name
        self.test_names = sorted(p.stem for p in (self.source / "tests").glob("*.py"))

    def install(self, submission_dir: Path) -> None:
        """What otter's runner prepare_files does, except that the autograder's copies always win."""
        files = self.source / "files"
        if files.exists():
            for src in files.iterdir():
                dst = submission_dir / src.name
                if dst.is_dir() and not dst.is_symlink():
                    shutil.rmtree(dst)
                elif dst.exists() or dst.is_symlink():
                    dst.unlink()
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        tests = submission_dir / "tests"
        if tests.is_dir() and not tests.is_symlink():
            shutil.rmtree(tests)
        elif tests.exists() or tests.is_symlink():
            tests.unlink()
        shutil.copytree(self.source / "tests", tests)
        (submission_dir.parent / "__init__.py").touch()
        (submission_dir / "__init__.py").touch()


# ----------------------------------------------------------------------------- submissions


def read_notebook_bytes(raw: bytes, label: str):
    """Bytes -> notebook, or SubmissionError naming what is wrong with the file."""
    import nbformat

    if not raw.strip():
        raise SubmissionError(f"empty file ({label})" if label else "empty file")
    if len(raw) > NOTEBOOK_MAX_BYTES:
        raise SubmissionError(f"notebook larger than {NOTEBOOK_MAX_BYTES >> 20} MB")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise SubmissionError("invalid notebook JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise SubmissionError(f"invalid notebook JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise SubmissionError("not a Jupyter notebook (JSON without cells/nbformat)")
    try:
        return nbformat.reads(json.dumps(data), as_version=4)
    except Exception as e:  # nbformat raises a variety of errors on malformed notebooks
        raise SubmissionError(f"not a readable Jupyter notebook ({type(e).__name__}: {str(e)[:200]})") from None


def _safe_members(zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    members, total = [], 0
    for info in zf.infolist():
        name = info.filename
        parts = Path(name).parts
        if info.is_dir() or name.startswith(("/", "\\")) or ".." in parts or "__MACOSX" in parts:
            continue
        total += info.file_size
        if total > ZIP_MAX_BYTES:
            raise SubmissionError(f"zip expands to more than {ZIP_MAX_BYTES >> 20} MB")
        members.append(info)
    return members


def load_submission(path: Path, staging: Path) -> tuple[object, str]:
    """Unpack one submission into `staging` (an empty folder): (notebook, notebook file name).

    A zip is unpacked (safely: no absolute or parent paths, size-capped) and must hold one
    notebook; the folder that holds it becomes the submission folder, as otter's export zip has it.
    """
    path = Path(path)
    if not path.exists():
        raise SubmissionError("file not found")
    if path.stat().st_size == 0:
        raise SubmissionError("empty file")
    if path.suffix.lower() == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                members = _safe_members(zf)
                notebooks = [m for m in members if m.filename.endswith(".ipynb")
                             and ".ipynb_checkpoints" not in Path(m.filename).parts]
                if not notebooks:
                    raise SubmissionError("no notebook in zip")
                top = min(len(Path(m.filename).parts) for m in notebooks)
                notebooks = [m for m in notebooks if len(Path(m.filename).parts) == top]
                if len(notebooks) > 1:
                    raise SubmissionError(f"more than one notebook in zip ({', '.join(m.filename for m in notebooks)})")
                base = Path(notebooks[0].filename).parent
                for m in members:
                    rel = Path(m.filename)
                    if base != Path(".") and base not in rel.parents:
                        continue
                    target = staging / rel.relative_to(base)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(m) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                name = Path(notebooks[0].filename).name
        except zipfile.BadZipFile:
            raise SubmissionError("not a valid zip file") from None
        # otter's log is a pickle; it is never read here, so it does not travel with the submission
        for log in staging.glob(".OTTER_LOG*"):
            log.unlink()
        raw = (staging / name).read_bytes()
    elif path.suffix.lower() == ".ipynb":
        name = path.name
        if path.stat().st_size > NOTEBOOK_MAX_BYTES:
            raise SubmissionError(f"notebook larger than {NOTEBOOK_MAX_BYTES >> 20} MB")
        raw = path.read_bytes()
        (staging / name).write_bytes(raw)  # otter.Notebook(...) in the first cell opens it
    else:
        raise SubmissionError(f"not a notebook or zip ({path.suffix or 'no extension'})")
    return read_notebook_bytes(raw, ""), name


def normalize_submission(nb, assignment_name: str | None) -> list[str]:
    """Check the assignment, force the python3 kernel, drop saved outputs. Returns notes."""
    notes = []
    meta = nb.metadata.get("otter", {}) if isinstance(nb.metadata.get("otter", {}), dict) else {}
    got = meta.get("assignment_name")
    if assignment_name and got != assignment_name:
        if got is None:
            raise SubmissionError(f"not a {assignment_name} notebook (its metadata names no assignment)")
        raise SubmissionError(f"notebook of another assignment ({str(got)[:40]!r}, not {assignment_name!r})")
    spec = nb.metadata.get("kernelspec") or {}
    if not isinstance(spec, dict) or spec.get("name") != KERNEL_NAME:
        old = spec.get("name") if isinstance(spec, dict) else spec
        nb.metadata["kernelspec"] = dict(KERNELSPEC)
        notes.append(f"kernel {str(old)[:40]!r} replaced by python3" if old else "no kernelspec: run with python3")
    code = 0
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            code += 1
            cell["outputs"] = []
            cell["execution_count"] = None
            cell.setdefault("metadata", {})[META_KEY] = code
    return notes


# ----------------------------------------------------------------------------- the grading notebook


_INIT_CELL = """\
from otter import Notebook as {nb_name}
{nb_name}.init_grading_mode({test_dir!r})
__import__("importlib").invalidate_caches()
"""

# Runs in the student's kernel after the notebook, like otter's own export cell; writes JSON, not a pickle.
_EXPORT_CELL = """\
from otter.execute import Checker as {checker}
for {loop_var} in {tests_glob!r}:
    {checker}.check_if_not_already_checked({loop_var})

def {fn}():
    import json, types
    from otter.test_files import GradingResults
    results = GradingResults({checker}.get_results())
    config = types.SimpleNamespace(**json.loads({config!r}))
    cases = {{
        name: [{{"name": r.test_case.name, "passed": bool(r.passed), "hidden": bool(r.test_case.hidden),
                 "points": r.test_case.points, "message": None if r.message is None else str(r.message)}}
                for r in tf.test_case_results]
        for name, tf in results.results.items()
    }}
    data = {{"gradescope": results.to_gradescope_dict(config), "cases": cases}}
    with open({path!r}, "w", encoding="utf-8") as f:
        json.dump(data, f, default=str)
{fn}()
"""


def _config_for_kernel(config) -> str:
    """The autograder settings `to_gradescope_dict` reads, as JSON (the kernel rebuilds a namespace)."""
    keys = ("show_hidden", "show_all_public", "force_public_test_summary", "warn_missing_pdf", "show_stdout",
            "points_possible", "score_threshold")
    return json.dumps({k: getattr(config, k, None) for k in keys})


def grading_notebook(nb, autograder: Autograder, submission_dir: Path, results_path: Path):
    """otter's GradingPreprocessor on the submission, with JSON init/export cells (no log server)."""
    from otter.execute.preprocessor import GradingPreprocessor
    from otter.utils import id_generator
    from traitlets.config import Config
    import nbformat

    class JsonGradingPreprocessor(GradingPreprocessor):
        def add_init_and_export_cells(self, nb):
            nb.cells.insert(0, nbformat.v4.new_code_cell(_INIT_CELL.format(
                nb_name=self._notebook_name, test_dir=self.test_dir)))
            nb.cells.append(nbformat.v4.new_code_cell(_EXPORT_CELL.format(
                checker=f"Checker_{id_generator()}", loop_var=f"t_{id_generator()}", fn=f"export_{id_generator()}",
                tests_glob=list(self.tests_glob), config=_config_for_kernel(autograder.config),
                path=str(results_path))))

    c = Config()
    c.GradingPreprocessor.cwd = str(submission_dir)
    c.GradingPreprocessor.test_dir = "./tests"
    c.GradingPreprocessor.tests_glob = sorted(f"./tests/{p.name}" for p in (submission_dir / "tests").glob("*.py"))
    c.GradingPreprocessor.results_path = str(results_path)
    c.GradingPreprocessor.seed = autograder.config.seed
    c.GradingPreprocessor.seed_variable = autograder.config.seed_variable
    c.GradingPreprocessor.otter_log = None
    c.GradingPreprocessor.variables = None
    c.GradingPreprocessor.logging_server_host = ""
    c.GradingPreprocessor.logging_server_port = 0
    c.GradingPreprocessor.force_python3_kernel = True
    gp = JsonGradingPreprocessor(config=c)
    nb, _ = gp.preprocess(nb)
    return nb


# ----------------------------------------------------------------------------- kernels


def default_memory_limit(kernels: int) -> int:
    """Address-space limit per kernel: a share of the machine's memory, between 2 and 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return int(min(8 << 30, max(2 << 30, 0.75 * total / max(1, kernels))))


_LAUNCHER = """\
import resource, sys
limit = int(sys.argv.pop(1))
if limit > 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
if sys.path and sys.path[0] == "":
    del sys.path[0]
from ipykernel import kernelapp as app
app.launch_new_instance()
"""


def _kernel_spec_dir(root: Path, memory_limit: int) -> Path:
    """A private kernelspec `python3` that starts ipykernel under the memory limit."""
    spec_dir = root / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-c", _LAUNCHER, str(int(memory_limit)), "-f", "{connection_file}"],
            "display_name": "Python 3 (grading)", "language": "python", "metadata": {"debugger": False}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return spec_dir.parent


@dataclass(eq=False)
class Kernel:
    km: object
    workdir: Path
    pgid: int | None
    started: float
    warm_s: float = 0.0
    log: object = None          # the kernel's stdout/stderr file

    def log_tail(self, n: int = 400) -> str:
        try:
            text = (self.workdir / "kernel.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = [l for l in text.splitlines() if l.strip() and "running over TCP without encryption" not in l]
        return "\n".join(lines)[-n:]

    @property
    def submission_dir(self) -> Path:
        return self.workdir / "submission"

    def kill(self) -> None:
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def exit_code(self) -> int | None:
        proc = getattr(getattr(self.km, "provisioner", None), "process", None)
        return None if proc is None else proc.poll()


def _kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYDEVD_DISABLE_FILE_VALIDATION="1", MPLBACKEND="module://matplotlib_inline.backend_inline")
    env.pop("JPY_SESSION_NAME", None)
    return env


def _make_client_class():
    from nbclient import NotebookClient
    from nbformat import v4

    class CappedClient(NotebookClient):
        """nbclient with printed output capped per cell (a print loop cannot fill the grader's memory)."""

        @asynccontextmanager
        async def async_setup_kernel(self, **kwargs):
            # The engine owns the kernel and its cleanup. nbclient's own version would also install
            # SIGINT/SIGTERM handlers that turn a TA's Ctrl-C into "kernel died" for the submission
            # being graded (recorded as final); without them Ctrl-C stops the batch and nothing
            # half-graded is recorded.
            if self.kc is None:
                await self.async_start_new_kernel_client()
            yield

        async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
            self._ck_current = cell_index
            return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

        def output(self, outs, msg, display_id, cell_index):
            content = msg.get("content", {})
            size = len(content.get("text", "")) + sum(len(str(v)) for v in (content.get("data") or {}).values())
            used = self._ck_bytes.get(cell_index, 0)
            self._ck_bytes[cell_index] = used + size
            if used + size > OUTPUT_CAP_BYTES and msg["msg_type"] != "error":
                if used <= OUTPUT_CAP_BYTES:
                    outs.append(v4.new_output("stream", name="stderr", text=(
                        f"\n[grader: output of this cell beyond {OUTPUT_CAP_BYTES >> 10} KiB dropped]\n")))
                return None
            return super().output(outs, msg, display_id, cell_index)

    return CappedClient


# ----------------------------------------------------------------------------- the engine


class Engine:
    """Grades many submissions with one autograder: `jobs` at a time, kernels pre-started."""

    def __init__(self, autograder_zip: Path, jobs: int | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 memory_limit: int | None = None, spares: int | None = None,
                 preimports: tuple[str, ...] = PREIMPORTS, tmp_root: Path | None = None):
        self.autograder_zip = Path(autograder_zip)
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout = float(timeout)
        self.spares = self.jobs if spares is None else max(0, spares)
        self.memory_limit = default_memory_limit(self.jobs + self.spares) if memory_limit is None else memory_limit
        self.preimports = tuple(preimports)
        self.tmp_root = tmp_root
        self._live: set[Kernel] = set()

    # -- kernels

    async def _start_kernel(self) -> Kernel:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager

        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="k-", dir=self._tmp))
        for sub in ("source", "submission", "results"):
            (workdir / sub).mkdir()
        ksm = KernelSpecManager(kernel_dirs=[str(self._kernel_dirs)], ensure_native_kernel=False)
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)
        kernel = Kernel(km, workdir, None, started)
        self._live.add(kernel)
        kernel.log = open(workdir / "kernel.log", "wb")
        await km.start_kernel(cwd=str(workdir / "submission"), env=_kernel_env(),
                              stdout=kernel.log, stderr=subprocess.STDOUT,
                              extra_arguments=["--HistoryManager.hist_file=:memory:"])
        kernel.pgid = os.getpgid(km.provisioner.process.pid)
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=KERNEL_START_TIMEOUT_S)
            if self.preimports:
                code = "".join(f"try:\n    __import__({m!r})\nexcept Exception:\n    pass\n" for m in self.preimports)
                await asyncio.wait_for(kc.execute_interactive(code, silent=True, store_history=False,
                                                              output_hook=lambda msg: None),
                                       KERNEL_START_TIMEOUT_S)
        finally:
            kc.stop_channels()
        kernel.warm_s = time.monotonic() - started
        return kernel

    async def _dispose(self, kernel: Kernel) -> None:
        kernel.kill()
        try:
            await asyncio.wait_for(kernel.km.shutdown_kernel(now=True), 10)
        except Exception:
            pass
        kernel.kill()
        try:
            await kernel.km.cleanup_resources()
        except Exception:
            pass
        if kernel.log is not None:
            kernel.log.close()
        self._live.discard(kernel)
        shutil.rmtree(kernel.workdir, ignore_errors=True)

    # -- one submission

    async def _grade(self, path: Path, pool: "_Pool") -> GradeResult:
        staging = Path(tempfile.mkdtemp(prefix="s-", dir=self._tmp))
        try:
            try:
                nb, name = await asyncio.to_thread(load_submission, path, staging)
                notes = normalize_submission(nb, self.ag.assignment_name)
            except SubmissionError as e:
                pool.cancel_one()
                return GradeResult(path, "error", message=str(e), reason=str(e))
            try:
                kernel = await pool.get()
            except Exception as e:
                return GradeResult(path, "error", message=f"no kernel: {e}", reason="grader error: kernel did not start",
                                   retry=True)
            try:
                return await self._run(path, nb, name, notes, staging, kernel)
            finally:
                await self._dispose(kernel)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def _run(self, path: Path, nb, name: str, notes: list[str], staging: Path, kernel: Kernel) -> GradeResult:
        from nbclient.exceptions import DeadKernelError

        sub = kernel.submission_dir
        for item in staging.iterdir():
            shutil.move(str(item), str(sub / item.name))
        # The first cell opens `otter.Notebook("<assignment>.ipynb")`: give the notebook that name, as a
        # student's upload has it, whatever the TA's copy is called.
        if self.ag.assignment_name and name != f"{self.ag.assignment_name}.ipynb":
            expected = sub / f"{self.ag.assignment_name}.ipynb"
            if not expected.exists():
                shutil.copy2(sub / name, expected)
        self.ag.install(sub)
        results_path = kernel.workdir / "results" / f"results-{os.urandom(8).hex()}.json"
        nb = grading_notebook(nb, self.ag, sub, results_path)

        client = self._client_class(nb, km=kernel.km, kernel_name=KERNEL_NAME, allow_errors=True, timeout=None,
                                    startup_timeout=60, resources={"metadata": {"path": str(sub)}},
                                    record_timing=False, shutdown_kernel="immediate")
        client._ck_bytes, client._ck_current = {}, None
        timed_out = False

        def on_deadline():
            nonlocal timed_out
            timed_out = True
            kernel.kill()

        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.timeout, on_deadline)
        start = time.monotonic()
        failure = None
        try:
            # Killing the kernel at the deadline makes nbclient raise DeadKernelError within ~1 s;
            # the outer limit is a backstop should it not notice.
            await asyncio.wait_for(client.async_execute(), self.timeout + 60)
        except (DeadKernelError, asyncio.TimeoutError) as e:
            failure = e
        except Exception as e:  # nbclient/jupyter errors: the kernel misbehaved
            failure = e
        finally:
            timer.cancel()
            seconds = time.monotonic() - start
            kc = getattr(client, "kc", None)
            if kc is not None:
                try:
                    kc.stop_channels()
                except Exception:
                    pass
        cell_errors = _cell_errors(nb)
        memory_hit = any(_is_memory_error(e) for e in cell_errors)
        if memory_hit:
            notes.append(f"a cell ran out of memory (limit {self.memory_limit / (1 << 30):.1f} GiB per kernel)")
        base = dict(cell_errors=cell_errors, notes=notes, seconds=seconds)

        if timed_out or isinstance(failure, asyncio.TimeoutError):
            where = _running_cell(nb, client._ck_current)
            msg = f"timeout after {self.timeout:.0f} s" + (f" (still running {where})" if where else "")
            return GradeResult(path, "timeout", message=msg, reason=f"timeout after {self.timeout:.0f} s", **base)
        if failure is not None:
            code = kernel.exit_code()
            if isinstance(failure, DeadKernelError) or code is not None:
                if code is not None and code < 0:
                    why = f"kernel died (signal {-code}" + (", out of memory?)" if -code == signal.SIGKILL else ")")
                else:
                    why = f"kernel died (exit code {code})" if code is not None else "kernel died"
                where = _running_cell(nb, client._ck_current)
                tail = kernel.log_tail()
                return GradeResult(path, "error", message=why + (f" while running {where}" if where else "")
                                   + (f"; kernel output: {tail}" if tail else ""), reason=why, **base)
            why = f"grader error: {type(failure).__name__}: {str(failure)[:300]}"
            return GradeResult(path, "error", message=why, reason="grader error", retry=True, **base)

        kernel.kill()   # nothing of the submission runs while its results are read
        try:
            data = json.loads(_read_capped(results_path, RESULTS_MAX_BYTES))
            questions = parse_results_json(data["gradescope"])
            cases = _parse_cases(data.get("cases"))
        except FileNotFoundError:
            last = nb.cells[-1] if nb.cells else None
            err = next((o for o in (last.outputs if last is not None else []) if o.get("output_type") == "error"), None)
            why = "no results: the grading cell failed" + (f" ({err.get('ename')}: {str(err.get('evalue'))[:200]})"
                                                            if err else "")
            return GradeResult(path, "error", message=why, reason="no results (grading cell failed)", **base)
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
            return GradeResult(path, "error", message=f"unreadable results: {e}", reason="unreadable results", **base)

        reason = "ok"
        if not memory_hit and any(_is_memory_error({"ename": "", "evalue": c["message"]})
                                  or "MemoryError" in c["message"] for cs in cases.values() for c in cs):
            memory_hit = True
            notes.append(f"a test ran out of memory (limit {self.memory_limit / (1 << 30):.1f} GiB per kernel)")
        if memory_hit:
            reason = "ok (memory limit hit)"
        return GradeResult(path, "ok", questions, message="; ".join(notes), reason=reason, cases=cases, **base)

    # -- many

    async def grade(self, submissions: list[Path], on_result=None) -> list[GradeResult]:
        self._tmp = Path(tempfile.mkdtemp(prefix="coursekit-grade-", dir=self.tmp_root))
        try:
            self.ag = Autograder(self.autograder_zip, self._tmp / "autograder")
            import nbclient, otter.execute.preprocessor  # noqa: F401  (imported once, before kernels start)
            self._kernel_dirs = _kernel_spec_dir(self._tmp, self.memory_limit)
            self._client_class = _make_client_class()
            pool = _Pool(self, demand=len(submissions))
            queue: asyncio.Queue = asyncio.Queue()
            for i, path in enumerate(submissions):
                queue.put_nowait((i, path))
            results: list[GradeResult | None] = [None] * len(submissions)

            async def worker():
                while True:
                    try:
                        i, path = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    try:
                        result = await self._grade(path, pool)
                    except Exception as e:  # never lose a row
                        result = GradeResult(path, "error", message=f"grader error: {type(e).__name__}: {e}",
                                             reason="grader error", retry=True)
                    results[i] = result
                    if on_result:
                        on_result(result)

            try:
                await asyncio.gather(*(worker() for _ in range(min(self.jobs, len(submissions)) or 1)))
            finally:
                await pool.close()
                for kernel in list(self._live):
                    await self._dispose(kernel)
            return results  # type: ignore[return-value]
        finally:
            for kernel in list(self._live):
                kernel.kill()
            shutil.rmtree(self._tmp, ignore_errors=True)


class _Pool:
    """Keeps up to `spares` kernels starting or ready, never more than submissions still need."""

    def __init__(self, engine: Engine, demand: int):
        self.engine = engine
        self.demand = demand            # submissions that may still ask for a kernel
        self.ready: asyncio.Queue = asyncio.Queue()
        self.starting = 0
        self.tasks: set[asyncio.Task] = set()
        self._refill()

    def _refill(self) -> None:
        target = min(self.demand, self.engine.spares + 0)
        while self.ready.qsize() + self.starting < max(target, 0):
            self.starting += 1
            task = asyncio.ensure_future(self._start())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _start(self) -> None:
        try:
            kernel = await self.engine._start_kernel()
        except Exception as e:  # handed to the submission that takes it
            kernel = e
        finally:
            self.starting -= 1
        self.ready.put_nowait(kernel)

    def cancel_one(self) -> None:
        self.demand -= 1

    async def get(self) -> Kernel:
        if self.ready.qsize() + self.starting == 0:
            self.starting += 1
            task = asyncio.ensure_future(self._start())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        item = await self.ready.get()
        self.demand -= 1
        self._refill()
        if isinstance(item, Exception):
            raise item
        return item

    async def close(self) -> None:
        for task in list(self.tasks):
            try:
                await task
            except Exception:
                pass
        while not self.ready.empty():
            item = self.ready.get_nowait()
            if isinstance(item, Kernel):
                await self.engine._dispose(item)


def _read_capped(path: Path, limit: int) -> str:
    """A regular file's text, at most `limit` bytes; no symlinks (the kernel could have planted one)."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("results are not a regular file")
        with os.fdopen(fd, "rb") as f:
            fd = None
            raw = f.read(limit + 1)
    finally:
        if fd is not None:
            os.close(fd)
    if len(raw) > limit:
        raise ValueError(f"results larger than {limit >> 20} MB")
    return raw.decode("utf-8")


def _cell_errors(nb) -> list[dict]:
    errors = []
    for cell in nb.cells:
        number = cell.get("metadata", {}).get(META_KEY)
        if number is None:
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = next((line for line in cell.source.splitlines() if line.strip()), "")[:80]
                errors.append({"cell": number, "first_line": first, "ename": str(out.get("ename"))[:100],
                               "evalue": str(out.get("evalue"))[:500]})
    return errors


def _is_memory_error(err: dict) -> bool:
    return err["ename"] == "MemoryError" or "can't allocate memory" in err["evalue"] or \
        "not enough memory" in err["evalue"].lower()


def _running_cell(nb, index: int | None) -> str:
    """Which cell was running when the kernel stopped, in the student's numbering."""
    if index is None or index >= len(nb.cells):
        return ""
    cell = nb.cells[index]
    number = cell.get("metadata", {}).get(META_KEY)
    if number is None:
        return "the hidden tests" if index == len(nb.cells) - 1 else "the grader's setup"
    first = next((line for line in cell.source.splitlines() if line.strip()), "")[:60]
    return f"code cell {number}: {first!r}"


# ----------------------------------------------------------------------------- entry points


def grade_many(submissions: Iterable[Path], autograder_zip: Path, jobs: int | None = None,
               timeout: float = DEFAULT_TIMEOUT_S,
               on_result: Callable[[GradeResult], None] | None = None, **engine_options) -> list[GradeResult]:
    """Grade every submission (`jobs` at a time); results in input order."""
    submissions = [Path(s) for s in submissions]
    if not submissions:
        return []
    engine = Engine(autograder_zip, jobs=jobs, timeout=timeout, **engine_options)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(engine.grade(submissions, on_result))
    # called from a running event loop (e.g. a notebook): grade in a thread with its own loop
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, engine.grade(submissions, on_result)).result()


def grade_one(submission: Path, autograder_zip: Path, timeout: float = DEFAULT_TIMEOUT_S) -> GradeResult:
    return grade_many([submission], autograder_zip, jobs=1, timeout=timeout, spares=0)
