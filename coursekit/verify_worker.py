"""The verification process (see verify.py). Reads its job from stdin, reports on a private fd.

Order matters: everything the checks rely on is loaded and snapshotted before
the first line of student code runs.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import shutil
import signal
import sys
import tempfile
import types
import zipfile
from pathlib import Path

from coursekit.verify import sign


class _TestTimeout(BaseException):
    """Raised by the alarm; a BaseException so `except Exception` in student code doesn't swallow it."""


class GuardError(TypeError):
    pass


# Returned objects that imitate plain values (a subclass of int, float, Tensor, ...): tampering findings.
GUARD_FINDINGS: list[str] = []
IMITATED = (bool, int, float, str, bytes, complex, list, tuple, dict, set, frozenset)


def _emitter(key: bytes, fd: int):
    def emit(item: dict) -> None:
        body = json.dumps(item)
        line = json.dumps({"body": body, "sig": sign(key, body)})
        os.write(fd, (line + "\n").encode())
    return emit


# ----------------------------------------------------------------------------- snapshot

WATCHED_MODULES = ("builtins", "math", "operator", "functools", "gc", "signal", "os", "sys", "json",
                   "torch", "torch.nn", "torch.nn.functional", "torch.nn.modules.module", "torch.testing",
                   "torch.cuda", "torch.cuda.memory", "torch.autograd", "torch.autograd.graph", "torch.optim",
                   "torch.utils.checkpoint", "torch.utils._python_dispatch", "numpy", "hmac", "hashlib")


def _watched_classes():
    import torch
    classes = [torch.Tensor, torch._C.TensorBase, torch.nn.Module, torch.nn.Parameter, torch.optim.Optimizer,
               torch.optim.Adam, torch.optim.SGD, torch.Generator, torch.Size, torch.autograd.Function,
               torch.autograd.graph.saved_tensors_hooks, torch.nn.Linear, torch.nn.Sequential]
    try:
        import matplotlib.figure
        classes.append(matplotlib.figure.Figure)
    except ImportError:
        pass
    return classes


def _is_behaviour(value) -> bool:
    """What tampering replaces: functions, methods, descriptors, classes, modules."""
    return callable(value) or isinstance(value, (types.ModuleType, property, staticmethod, classmethod))


def take_snapshot(check_modules: list[types.ModuleType]) -> dict:
    owners = {}
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            owners[f"module {name}"] = (module, {k: v for k, v in vars(module).items() if _is_behaviour(v)}, False)
    for module in check_modules:
        # check modules: every name counts, and additions count too
        owners[f"module {module.__name__}"] = (module, dict(vars(module)), True)
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                owners[f"class {module.__name__}.{value.__qualname__}"] = (value, dict(vars(value)), True)
    for cls in _watched_classes():
        owners[f"class {cls.__module__}.{cls.__qualname__}"] = (cls, dict(vars(cls)), True)
    modules = {name: sys.modules.get(name) for name in list(WATCHED_MODULES) + [m.__name__ for m in check_modules]}
    return {"owners": owners, "sys.modules": modules}


def compare_and_restore(snapshot: dict) -> list[str]:
    """What changed since the snapshot (each finding named), with the originals put back."""
    findings = []
    for name, module in snapshot["sys.modules"].items():
        if sys.modules.get(name) is not module:
            findings.append(f"sys.modules[{name!r}] was replaced")
            if module is not None:
                sys.modules[name] = module
    for label, (owner, saved, additions_count) in snapshot["owners"].items():
        current = vars(owner)
        for key, value in saved.items():
            if key not in current or current[key] is not value:
                findings.append(f"{label}.{key} was {'deleted' if key not in current else 'replaced'}")
                with contextlib.suppress(Exception):
                    setattr(owner, key, value)
        if additions_count:
            for key in [k for k in current if k not in saved]:
                if key in ("__annotations__", "__doc__") or key.startswith("_abc_"):
                    continue
                findings.append(f"{label}.{key} was added")
                with contextlib.suppress(Exception):
                    delattr(owner, key)
    return findings


# ----------------------------------------------------------------------------- guard


def _sanitize(value, name: str, depth: int = 0):
    import torch

    if depth > 20:
        raise GuardError(f"{name} returned a structure nested too deeply")
    kind = type(value)
    if value is None or value is Ellipsis or kind in (bool, int, float, str, bytes, complex):
        return value
    if kind in (torch.Tensor, torch.nn.Parameter):
        if vars(value):
            raise GuardError(f"{name} returned a tensor carrying extra attributes {sorted(vars(value))}")
        return value
    if kind in (torch.Size, torch.dtype, torch.device):
        return value
    if kind in (list, tuple):
        return kind(_sanitize(v, name, depth + 1) for v in value)
    if kind in (set, frozenset):
        return kind(_sanitize(v, name, depth + 1) for v in value)
    if kind is dict:
        return {_sanitize(k, name, depth + 1): _sanitize(v, name, depth + 1) for k, v in value.items()}
    if issubclass(kind, IMITATED + (torch.Tensor,)):
        GUARD_FINDINGS.append(f"{name} returned a {kind.__qualname__}, a subclass of "
                              f"{next(b.__name__ for b in kind.__mro__[1:] if b in IMITATED + (torch.Tensor,))} "
                              "that can redefine comparisons")
    module = getattr(kind, "__module__", "") or ""
    if module == "numpy" and kind.__name__ in ("ndarray",):
        return value
    if module == "numpy" and hasattr(value, "item") and kind.__name__ in (
            "float64", "float32", "int64", "int32", "bool_"):
        return value.item()
    if module.startswith("matplotlib.") and kind.__name__ == "Figure":
        return value
    raise GuardError(f"{name} returned an object of type {kind.__module__}.{kind.__qualname__}; "
                     "graded functions return plain tensors, numbers, strings, containers of them, or a Figure")


def guard(value, name: str):
    if isinstance(value, types.FunctionType):
        def guarded(*args, **kwargs):
            return _sanitize(value(*args, **kwargs), name)
        guarded.__name__ = value.__name__
        guarded.__wrapped_student__ = value
        return guarded
    if callable(value) or value is None:
        return value
    return _sanitize(value, name)


# ----------------------------------------------------------------------------- main


def _load_autograder(zip_path: str, workdir: Path):
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(workdir)
    files = workdir / "files"
    sys.path.insert(0, str(files))
    check_modules = []
    # shipped top-level modules (the memory probe) are imported now, so the notebook's
    # `from memprobe import ...` finds them after the folder is deleted
    for module in sorted(files.glob("*.py")):
        check_modules.append(importlib.import_module(module.stem))
    for package in sorted(p for p in files.iterdir() if (p / "__init__.py").exists()):
        root = importlib.import_module(package.name)
        check_modules.append(root)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package.name}."):
            check_modules.append(importlib.import_module(info.name))
    from otter.test_files import create_test_file
    from otter.nbmeta_config import NBMetadataConfig

    test_files = [create_test_file(str(p), NBMetadataConfig()) for p in sorted((workdir / "tests").glob("*.py"))]
    return test_files, check_modules


def _exec_definitions(source: str, namespace: dict) -> list[str]:
    import ast

    problems = []
    for node in ast.parse(source).body:
        code = compile(ast.Module([node], []), "<submission>", "exec")
        try:
            exec(code, namespace)
        except _TestTimeout:
            raise
        except BaseException as exc:  # e.g. an import that fails
            problems.append(f"{type(exc).__name__}: {exc}")
    return problems


def _preload() -> None:
    """Imports done before the job arrives, so a spare worker is warm (each serves one job only)."""
    import torch
    torch.set_num_threads(1)
    # Import what torch loads lazily (and patches on import: dynamo rewraps torch.manual_seed)
    # before the snapshot, so lazy loading is not mistaken for tampering.
    # Optimizers wrap their class's step() on first construction: do it now.
    for optimizer in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
        optimizer([torch.zeros(1, requires_grad=True)])
    for lazy in ("torch._dynamo", "torch.utils.checkpoint", "torch.utils._python_dispatch", "torch.autograd.graph",
                 "torch.testing", "numpy", "otter.test_files", "otter.nbmeta_config"):
        with contextlib.suppress(ImportError):
            importlib.import_module(lazy)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except ImportError:
        pass


def run_job(job: dict, test_files, snapshot: dict) -> None:
    """Grade one submission's definitions (in a forked child); report signed results on job's fd."""
    emit = _emitter(bytes.fromhex(job.pop("key")), job["report_fd"])
    per_test_timeout = int(job["per_test_timeout"])

    def on_alarm(signum, frame):
        raise _TestTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    sink = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, per_test_timeout)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            definition_problems = _exec_definitions(job["definitions"], namespace)
            definition_problems += _exec_definitions(job.get("computed", ""), namespace)
    except _TestTimeout:
        definition_problems = ["computing the notebook's constants took too long"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    process_findings = compare_and_restore(snapshot) + GUARD_FINDINGS
    GUARD_FINDINGS.clear()

    for test_file in test_files:
        failures, findings = [], list(process_findings)
        process_findings = []
        score = possible = 0.0
        for index, case in enumerate(test_file.test_cases, start=1):
            points = float(case.points or 0)
            possible += points
            func = case.body.test_func
            passed, message = False, ""
            sink = io.StringIO()
            signal.setitimer(signal.ITIMER_REAL, per_test_timeout)
            try:
                kwargs = {p: namespace if p == "env" else guard(namespace.get(p), p)
                          for p in inspect.signature(func).parameters}
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    func(**kwargs)
                passed = True
            except _TestTimeout:
                message = f"took longer than {per_test_timeout} s (an endless loop?)"
            except BaseException as exc:  # SystemExit, KeyboardInterrupt and failures alike
                message = f"{type(exc).__name__}: {exc}"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            findings += compare_and_restore(snapshot) + GUARD_FINDINGS
            GUARD_FINDINGS.clear()
            if passed:
                score += points
            else:
                failures.append((f"{test_file.name} - {index}", message[:2000]))
        if findings:
            score = 0.0
        emit({"question": test_file.name, "score": score, "max_score": possible, "failures": failures,
              "tamper": sorted(set(findings))[:20], "definition_problems": definition_problems[:5]})
    emit({"question": "__done__", "score": 0, "max_score": 0})


def _recv_exact(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def serve(sock_fd: int, autograder_zip: str, memory_limit: int) -> None:
    """Fork server: prepare once, then fork one fresh child per submission.

    Each child starts from the same prepared state (imports done, checks loaded and snapshotted,
    the unpacked autograder already deleted), runs one submission and exits: nothing passes from
    one student to the next. A job arrives on the socket as a header carrying the report pipe's
    write end (SCM_RIGHTS) followed by its JSON; the reply is the child's pid."""
    import resource
    import socket

    _preload()
    workdir = Path(tempfile.mkdtemp(prefix="verify-"))
    test_files, check_modules = _load_autograder(autograder_zip, workdir)
    snapshot = take_snapshot(check_modules)
    shutil.rmtree(workdir)  # hidden tests and checks are no longer on disk
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    # Everything prepared so far is shared with the children; frozen, the collector neither scans it
    # (the probe collects often) nor touches its pages (no copy-on-write).
    import gc
    gc.collect()
    gc.freeze()
    sock = socket.socket(fileno=sock_fd)
    sock.sendall(b"ready\n")
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, 32, 1)
            if not header:
                return
            if len(header) < 32:
                header += _recv_exact(sock, 32 - len(header))
        except (OSError, EOFError):
            return
        length = int(header)
        job = json.loads(_recv_exact(sock, length))
        report_fd = fds[0]
        pid = os.fork()
        if pid == 0:  # the child: one submission, then exit
            try:
                os.setpgid(0, 0)
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                sock.close()  # no access to other jobs
                if memory_limit:
                    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
                os.chdir(tempfile.mkdtemp(prefix="verify-run-"))
                job["report_fd"] = report_fd
                run_job(job, test_files, snapshot)
            finally:
                os._exit(0)
        os.close(report_fd)
        del job
        sock.sendall(f"{pid}\n".encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
