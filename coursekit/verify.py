"""Verified grading: scores that student code cannot reach.

otter runs the hidden tests inside the student's own kernel, after the
student's top-level code, so a submission can patch what the tests rely on.
The verification pass grades the same notebook again in a fresh process that

1. loads the autograder's test files and check modules, and takes every
   reference the checks compare with, **before** any student code exists;
2. deletes the unpacked autograder from disk (hidden tests are not readable
   by student code in this pass);
3. takes only the student's *definitions* from the notebook: imports,
   functions without decorators, and constants (literals and plain
   arithmetic; UPPER_CASE answers computed by an expression are evaluated
   after the definitions, under the same checks). Other top-level
   statements never run;
4. runs each test function itself (not through otter's runner), with every
   student function wrapped so that what it returns must be plain data
   (exact `torch.Tensor`, int, float, ... — no subclasses or proxies);
5. after each test, compares a snapshot of the objects the checks rely on
   (torch's and math's functions, `torch.Tensor`'s methods, builtins, the
   check modules, the memory probe, sys.modules): any change is tampering,
   and the question scores 0 in this pass;
6. reports each question's result on a private pipe, signed with a key the
   parent passes on stdin, so printed or forged results do not count.

The final score of a question is the lower of otter's and the verified one;
any difference is flagged (`combine`). Remaining risk, stated in the README:
code in a process can reach anything in that process (ctypes, frame
inspection); this pass makes tampering detectable and unrewarded for every
technique in tests/test_tamper.py, not impossible in principle.
"""
from __future__ import annotations

import ast
import hashlib
import hmac
import json
import os
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

VERIFY_TIMEOUT_S = 300
PER_TEST_TIMEOUT_S = 60
MAX_CAPTURED_OUTPUT = 20_000


# ----------------------------------------------------------------------------- definitions


ALLOWED_CALLS_IN_CONSTANTS = {"math.log", "math.exp", "math.sqrt", "math.log2", "abs", "round", "min", "max",
                              "float", "int", "set", "frozenset", "tuple", "list", "dict", "sorted"}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _plain_value(node: ast.AST) -> bool:
    """A constant's value: literals, containers of them, arithmetic, a few pure calls, dotted names."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_plain_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _plain_value(k) for k in node.keys) and all(_plain_value(v) for v in node.values)
    if isinstance(node, ast.BinOp):
        return _plain_value(node.left) and _plain_value(node.right)
    if isinstance(node, ast.UnaryOp):
        return _plain_value(node.operand)
    if isinstance(node, ast.Call):
        return (_dotted(node.func) in ALLOWED_CALLS_IN_CONSTANTS and not node.keywords
                and all(_plain_value(a) for a in node.args))
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _dotted(node) is not None  # e.g. F.cross_entropy as a default, math.pi
    return False


def _plain_signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    defaults = fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]
    return not fn.decorator_list and all(_plain_value(d) for d in defaults)


def extract_definitions(nb: nbformat.NotebookNode) -> tuple[str, str, list[str]]:
    """The notebook's definitions, its computed constants, and what was left out (with why).

    Definitions: imports, undecorated functions with plain defaults, assignments of plain values.
    Computed constants: UPPER_CASE names assigned any other expression (an answer computed with
    torch, say); the worker evaluates them after the definitions, under the same tamper checks.
    Every other top-level statement is left out."""
    kept, computed, skipped = [], [], []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        source = "\n".join(line for line in str(cell.get("source", "")).splitlines()
                           if not line.lstrip().startswith(("%", "!")))  # IPython magics are not Python
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            skipped.append(f"cell {index}: syntax error ({exc.msg}), nothing taken from it")
            continue
        for node in tree.body:
            text = ast.get_source_segment(source, node) or ""
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                kept.append(text)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _plain_signature(node):
                    kept.append(text)
                else:
                    skipped.append(f"cell {index}: function {node.name} has decorators or computed defaults")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not all(isinstance(t, ast.Name) for t in targets):
                    continue
                if _plain_value(node.value):
                    kept.append(text)
                elif all(t.id.isupper() for t in targets):
                    computed.append(text)
    return "\n\n".join(kept) + "\n", "\n\n".join(computed) + "\n", skipped


# ----------------------------------------------------------------------------- parent side


@dataclass
class VerifiedQuestion:
    name: str
    score: float
    max_score: float
    failures: list[tuple[str, str]] = field(default_factory=list)  # (test, message)
    tamper: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    status: str  # "ok", "timeout", "error"
    questions: dict[str, VerifiedQuestion] = field(default_factory=dict)
    skipped_definitions: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)  # process-level findings (forged reports, early exit)
    message: str = ""


def load_notebook(submission: Path) -> nbformat.NotebookNode:
    """The submission's notebook (.ipynb, or the one in an exported .zip), read as otter's pass reads it."""
    import tempfile

    from .grading import load_submission

    with tempfile.TemporaryDirectory(prefix="verify-load-") as staging:
        nb, _ = load_submission(Path(submission), Path(staging))
    return nb


def verify_notebook(submission: Path, autograder_zip: Path, timeout: float = VERIFY_TIMEOUT_S) -> VerifyReport:
    """Run the verification pass on one submission (.ipynb or exported .zip)."""
    with VerifyServer(autograder_zip) as server:
        return server.verify(submission, timeout)


class VerifyServer:
    """A fork server (coursekit.verify_worker.serve) for one autograder zip.

    It imports torch, loads the checks and snapshots them once; each submission then runs in a
    fresh forked child that exits afterwards, so nothing passes from one student to the next.
    Results come back on a pipe private to that child, signed with a per-job key."""

    READY_TIMEOUT_S = 180

    def __init__(self, autograder_zip: Path, memory_limit: int = 6 << 30):
        import threading

        self.autograder_zip = Path(autograder_zip).resolve()
        self.memory_limit = memory_limit
        self._lock = threading.Lock()
        self._proc = None
        self._sock = None
        self._buffer = b""

    def __enter__(self) -> "VerifyServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        import socket

        parent, child = socket.socketpair()
        debug = os.environ.get("COURSEKIT_VERIFY_DEBUG") == "1"  # let the worker's stderr through
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "coursekit.verify_worker", str(child.fileno()), str(self.autograder_zip),
             str(self.memory_limit)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None if debug else subprocess.DEVNULL,
            pass_fds=(child.fileno(),), env=env, cwd=str(Path(__file__).resolve().parent.parent),
            start_new_session=True)
        child.close()
        self._sock, self._buffer = parent, b""
        self._sock.settimeout(self.READY_TIMEOUT_S)
        if self._readline() != b"ready":
            raise OSError("the verification server did not start")

    def _readline(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(4096)
            if not chunk:
                raise OSError("the verification server stopped")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _dispatch(self, payload: bytes, write_fd: int) -> int:
        """Hand one job to the server; returns the child's pid. Restarts a dead server once."""
        import socket

        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._proc is None or self._proc.poll() is not None:
                        self._stop_server()
                        self._start()
                    socket.send_fds(self._sock, [f"{len(payload):031d}\n".encode()], [write_fd])
                    self._sock.sendall(payload)
                    return int(self._readline())
                except (OSError, ValueError):
                    self._stop_server()
                    if attempt == 2:
                        raise
        raise OSError("unreachable")

    def verify(self, submission: Path, timeout: float = VERIFY_TIMEOUT_S) -> VerifyReport:
        import selectors
        import signal
        import time

        try:
            nb = load_notebook(submission)
        except Exception as exc:  # unreadable submissions are reported by the otter pass too
            return VerifyReport("error", message=f"notebook could not be read: {exc}")
        definitions, computed, skipped = extract_definitions(nb)
        key = secrets.token_bytes(32)
        payload = json.dumps({"key": key.hex(), "definitions": definitions, "computed": computed,
                              "per_test_timeout": PER_TEST_TIMEOUT_S}).encode()
        read_fd, write_fd = os.pipe()
        try:
            pid = self._dispatch(payload, write_fd)
        except OSError as exc:
            os.close(read_fd)
            return VerifyReport("unavailable", message=f"verification server failed: {exc}")
        finally:
            os.close(write_fd)
        chunks, status, message = [], "ok", ""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(read_fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    status, message = "timeout", f"verification took longer than {timeout:.0f} s"
                    break
                if sel.select(timeout=min(remaining, 1.0)):
                    data = os.read(read_fd, 65536)
                    if not data:
                        break
                    chunks.append(data)
        os.close(read_fd)
        for target in (-pid, pid):  # the child's process group, whatever it started too
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        report = _read_reports(b"".join(chunks), key)
        report.skipped_definitions = skipped
        if status != "ok":
            report.status, report.message = status, message
        elif "__done__" not in report.questions:
            report.status = "error"
            report.message = report.message or "the verification process ended before finishing"
            report.tamper.append("the verification process ended early (os._exit, a crash, or the memory limit)")
        report.questions.pop("__done__", None)
        return report

    def _stop_server(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc)
            self._proc = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        with self._lock:
            self._stop_server()


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def _read_reports(data: bytes, key: bytes) -> VerifyReport:
    report = VerifyReport("ok")
    for line in data.decode(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            envelope = json.loads(line)
            body, signature = envelope["body"], envelope["sig"]
        except (ValueError, KeyError, TypeError):
            report.tamper.append("unsigned data on the verification report channel")
            continue
        if not hmac.compare_digest(sign(key, body), signature):
            report.tamper.append("a forged verification report (bad signature)")
            continue
        item = json.loads(body)
        name = item["question"]
        if name in report.questions:
            report.tamper.append(f"a second report for {name}")
            continue
        report.questions[name] = VerifiedQuestion(name, float(item["score"]), float(item["max_score"]),
                                                  [tuple(f) for f in item.get("failures", [])],
                                                  list(item.get("tamper", [])))
    return report


# ----------------------------------------------------------------------------- static scan

SUSPICIOUS_PATTERNS = [
    (r"\b(?:import|from)\s+otter\b|\botter\.", "uses otter's internals"),
    (r"\bhw07_checks\b", "touches the hidden check library"),
    (r"""['"][^'"]*tests/""", "opens the tests folder"),
    (r"\bsys\.modules\b", "edits sys.modules"),
    (r"\bbuiltins\b|__builtins__", "touches builtins"),
    (r"\bos\._exit\b", "ends the kernel with os._exit"),
    (r"\bos\.kill\b|\bos\.killpg\b|\bgetppid\b|\bpthread_kill\b", "sends signals to other processes"),
    (r"__torch_function__|__torch_dispatch__", "defines a tensor subclass hook"),
    (r"\b(?:torch|math|np|numpy|F|nn|torch\.\w+|memprobe)\.[A-Za-z_]\w*(?:\.\w+)*\s*=(?!=)",
     "assigns to an attribute of a library module"),
    (r"\b(?:pickle|dill|json|os|sys|io|signal|gc|inspect|importlib|subprocess|resource)\.[A-Za-z_]\w*\s*=(?!=)",
     "patches a standard-library module"),
    (r"\bsys\._getframe|\binspect\.(?:currentframe|stack|getouterframes)|\bf_back\b|\bf_locals\b|"
     r"\bgc\.get_objects|\bctypes\b|_current_frames", "inspects the grader's frames or memory"),
    (r"def __(?:eq|ne|lt|le|gt|ge|bool|float|int|index|abs|hash)__\s*\(", "defines its own comparison method"),
    (r"\bsetattr\(\s*(?:torch|math|F|nn|np|numpy|memprobe|float|int)\b", "patches a library with setattr"),
    (r"\.__(?:eq|ne|lt|le|gt|ge|bool|float|int|abs)__\s*=", "redefines a comparison method"),
    (r"results\.json|results\.pkl", "writes a results file"),
]
INIT_CELL = re.compile(r"^\s*#?\s*Initialize Otter\s*\n\s*import otter\s*\n\s*grader = otter\.Notebook\(.*\)\s*$")


def scan_for_tampering(nb: nbformat.NotebookNode) -> list[str]:
    """What in the notebook's code looks like an attempt to influence the grader (flags, not scores)."""
    findings = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        source = str(cell.get("source", ""))
        if INIT_CELL.match(source):
            continue
        source = re.sub(r"grader\.(?:check|check_all|export)\([^)]*\)", "", source)  # the notebook's own calls
        for pattern, why in SUSPICIOUS_PATTERNS:
            if re.search(pattern, source):
                findings.append(f"cell {index} {why}")
    return findings


# ----------------------------------------------------------------------------- combine


def combine(result, report: VerifyReport, scan: list[str]):
    """Final score per question = min(otter, verified); every disagreement and finding is flagged.

    `result` is a grading.GradeResult; it is updated in place (scores, flags) and returned."""
    flags = list(getattr(result, "flags", []) or [])
    flags += [f"suspicious code: {s}" for s in scan]
    flags += [f"verification: {t}" for t in report.tamper]
    if report.status != "ok":
        flags.append(f"verification {report.status}: {report.message}")
    for name, question in result.questions.items():
        verified = report.questions.get(name)
        verified_score = verified.score if verified else 0.0
        if verified:
            flags += [f"{name}: tampering detected ({t})" for t in verified.tamper]
        if verified_score < question.score - 1e-9:
            flags.append(f"{name}: otter gave {question.score:g}, the verified pass {verified_score:g}; "
                         f"the lower score counts")
            detail = "; ".join(f"{t}: {m}" for t, m in (verified.failures if verified else [])[:3])
            note = (f"{name} scored {verified_score:g}/{question.max_score:g} when checked again in a clean "
                    f"process (only your definitions, none of your top-level code). {detail}").strip()
            question.output += "\n\n[verified grading] " + note
            result.notes.append(note)
            question.score = verified_score
    result.flags = list(dict.fromkeys(flags))
    return result


def verify_results(results: list, autograder_zip: Path, jobs: int | None = None,
                   timeout: float = VERIFY_TIMEOUT_S, on_result=None) -> list:
    """Run the verification pass for every result otter graded ("ok") and combine it in place.

    Results that otter could not grade keep their zero; each combined result gets verified=True
    (unless the verifier itself failed: then it is flagged and verified again on the next run)."""
    from concurrent.futures import ThreadPoolExecutor

    for result in results:  # not gradable: no second pass, but what the code tried is still flagged
        if result.status != "ok" and not result.verified:
            try:
                scan = scan_for_tampering(load_notebook(result.submission))
            except Exception:
                scan = []
            result.flags = list(dict.fromkeys(list(result.flags) + [f"suspicious code: {s}" for s in scan]))
            result.verified = True
            if on_result:
                on_result(result)
    todo = [r for r in results if r.status == "ok" and not r.verified]
    if not todo:
        return results

    with VerifyServer(autograder_zip) as server:
        def work(result):
            try:
                scan = scan_for_tampering(load_notebook(result.submission))
            except Exception:
                scan = []
            report = server.verify(result.submission, timeout)
            if report.status == "unavailable":
                result.flags = list(dict.fromkeys(list(result.flags) + [f"not verified: {report.message}"]))
            else:
                combine(result, report, scan)
                result.verified = True
            if on_result:
                on_result(result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, min(jobs or os.cpu_count() or 1, len(todo)))) as pool:
            list(pool.map(work, todo))
    return results


def grade_verified(submissions: list[Path], autograder_zip: Path, jobs: int | None = None,
                   timeout: float | None = None) -> list:
    """otter's grading, then the verification pass; per question the lower score counts."""
    from . import grading

    kwargs = {"timeout": timeout} if timeout else {}
    results = grading.grade_many([Path(p) for p in submissions], autograder_zip, jobs=jobs, **kwargs)
    return verify_results(results, autograder_zip, jobs=jobs, **kwargs)
