"""TRUSTED SIDE: start a submission's code in a bubblewrap sandbox, with limits.

What the sandbox sees (everything else of the host is absent, not hidden):
read-only /usr, /etc, the Python installation and the virtual environment;
a fresh /proc and minimal /dev; a private, size-limited tmpfs as its working
directory (/sandbox) and /tmp; the submission's own files read-only at
/submission; the runner code (and the checks' sandbox-visible modules)
read-only at /runner. No network (own, empty network namespace), its own pid
namespace (every process it starts dies with it), IPC and UTS namespaces.

Limits: an unprivileged uid of its own per slot (when the grader runs as
root; otherwise the TA's own uid inside a user namespace), RLIMIT_NPROC,
RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, no core files, a cgroup with memory and
pids limits where the host lets us make one, a wall-clock deadline, and
output capped (stdout and stderr together).
"""
from __future__ import annotations

import atexit
import multiprocessing.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BASE_UID = 61000
OUTPUT_CAP = 64 << 10
TMPFS_BYTES = 512 << 20


class SandboxUnavailable(RuntimeError):
    pass


@dataclass
class Limits:
    memory_bytes: int = 6 << 30        # address space per process, and the cgroup's memory limit
    processes: int = 256               # threads count here too (torch starts a few)
    cpu_seconds: int = 600
    file_bytes: int = 64 << 20
    wall_seconds: float = 300.0


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def require_bwrap() -> str:
    path = bwrap_path()
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so submissions cannot be sandboxed. Install it "
            "(Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap; macOS: use the "
            "Docker path in docs/TA_GRADING.md), or pass --no-sandbox to grade without one (the report says so).")
    return path


def _dirs_to(path: str) -> list[str]:
    """--dir arguments (0755) for every ancestor of path, so an unprivileged uid can walk to a bind mount."""
    parts = Path(path).parts[1:-1]
    args = []
    for i in range(1, len(parts) + 1):
        args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
    return args


def _command(bwrap: str, runner_dir: Path, submission_dir: Path, argv: list[str], uid: int | None) -> list[str]:
    venv, base = sys.prefix, sys.base_prefix
    cmd = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session",
           "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
           "--proc", "/proc", "--dev", "/dev",
           "--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
           "--perms", "0777", "--size", str(TMPFS_BYTES), "--tmpfs", "/sandbox"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + link):
            cmd += ["--symlink", os.readlink("/" + link), "/" + link]
        elif os.path.isdir("/" + link):
            cmd += ["--ro-bind", "/" + link, "/" + link]
    for prefix in dict.fromkeys((base, venv)):
        if not prefix.startswith("/usr/"):
            cmd += _dirs_to(prefix) + ["--ro-bind", prefix, prefix]
    for device in sorted(Path("/dev").glob("nvidia*")):  # a GPU grader: the device nodes, nothing else of /dev
        cmd += ["--dev-bind", str(device), str(device)]
    cmd += ["--ro-bind", str(runner_dir), "/runner", "--ro-bind", str(submission_dir), "/submission",
            "--chdir", "/sandbox", "--clearenv",
            "--setenv", "HOME", "/sandbox", "--setenv", "PATH", f"{venv}/bin:/usr/bin:/bin",
            "--setenv", "MPLBACKEND", "Agg", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "MPLCONFIGDIR", "/tmp/mpl"]
    if uid is None:  # not root: the TA's uid, mapped inside a user namespace
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--"]
    else:
        cmd += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + argv


class _Cgroup:
    """A cgroup (v2, or v1 memory + pids) for one sandbox, when the host lets us create one."""

    def __init__(self, name: str, limits: Limits):
        self.paths: list[Path] = []
        root = Path("/sys/fs/cgroup")
        try:
            if (root / "cgroup.controllers").exists():
                path = root / name
                path.mkdir()
                self.paths.append(path)
                (path / "memory.max").write_text(str(limits.memory_bytes))
                (path / "pids.max").write_text(str(limits.processes))
            else:
                for controller, key, value in (("memory", "memory.limit_in_bytes", limits.memory_bytes),
                                               ("pids", "pids.max", limits.processes)):
                    base = root / controller
                    own = Path(_own_cgroup(controller).lstrip("/"))
                    path = base / own / name
                    path.mkdir()
                    self.paths.append(path)
                    (path / key).write_text(str(value))
        except OSError:
            self.remove()
            self.paths = []

    @property
    def active(self) -> bool:
        return bool(self.paths)

    def join(self) -> None:  # in the child, before exec
        for path in self.paths:
            (path / "cgroup.procs").write_text("0")

    def kill_all(self) -> None:
        for path in self.paths:
            try:
                for pid in (path / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def remove(self) -> None:
        """rmdir once (processes just killed may still be exiting); what is busy is retried next time and at exit."""
        self.kill_all()
        _PENDING.extend(self.paths)
        self.paths = []
        _remove_pending()


_PENDING: list[Path] = []


def _remove_pending() -> None:
    for path in list(_PENDING):
        try:
            path.rmdir()
            _PENDING.remove(path)
        except FileNotFoundError:
            _PENDING.remove(path)
        except OSError:
            pass


def _remove_pending_at_exit() -> None:
    for _ in range(100):
        _remove_pending()
        if not _PENDING:
            return
        time.sleep(0.05)


atexit.register(_remove_pending_at_exit)
# a multiprocessing worker leaves with os._exit, skipping atexit; its finalizers still run
multiprocessing.util.Finalize(None, _remove_pending_at_exit, exitpriority=10)


def _own_cgroup(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


@dataclass
class Sandbox:
    process: subprocess.Popen
    requests: int                     # our end: write requests
    replies: int                      # our end: read replies
    cgroup: _Cgroup | None
    deadline: float
    output: bytearray = field(default_factory=bytearray)
    output_dropped: int = 0
    _reader: threading.Thread | None = None

    def output_text(self) -> str:
        text = self.output.decode("utf-8", "replace")
        if self.output_dropped:
            text += f"\n[... {self.output_dropped:,} more bytes of output dropped]"
        return text

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
        if self.cgroup is not None:
            self.cgroup.kill_all()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.cgroup is not None:
            self.cgroup.remove()


def _drain(sandbox: Sandbox, stream) -> None:
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        room = OUTPUT_CAP - len(sandbox.output)
        sandbox.output += chunk[:max(room, 0)]
        sandbox.output_dropped += max(len(chunk) - max(room, 0), 0)


def start(runner_dir: Path, submission_dir: Path, argv: list[str], *, slot: int, limits: Limits,
          use_sandbox: bool = True) -> Sandbox:
    """Start argv (run from /sandbox) with the channel on fds 3 (requests) and 4 (replies)."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    root = os.geteuid() == 0
    if use_sandbox:
        cmd = _command(require_bwrap(), runner_dir, submission_dir, argv, BASE_UID + slot if root else None)
        cgroup = _Cgroup(f"coursekit-{os.getpid()}-{slot}-{time.monotonic_ns()}", limits)
        cwd = None
    else:  # --no-sandbox: same layout, no isolation (the report says so)
        cmd, cgroup = argv, None
        cwd = tempfile_workdir(runner_dir, submission_dir)

    def child_setup():
        _die_with_parent()
        high = [os.dup(req_r), os.dup(rep_w)]  # above 4, so moving them to 3 and 4 clobbers nothing of ours
        for fd in (req_r, rep_w):
            os.close(fd)
        os.dup2(high[0], 3)
        os.dup2(high[1], 4)
        for fd in high:
            os.close(fd)
        if cgroup is not None and cgroup.active:
            cgroup.join()
        for name, value in ((resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(name, (value, value))
        if use_sandbox:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))

    process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               pass_fds=(3, 4), preexec_fn=child_setup, start_new_session=True, cwd=cwd)
    os.close(req_r)
    os.close(rep_w)
    sandbox = Sandbox(process, req_w, rep_r, cgroup, time.monotonic() + limits.wall_seconds)
    sandbox._reader = threading.Thread(target=_drain, args=(sandbox, process.stdout), daemon=True)
    sandbox._reader.start()
    return sandbox


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: if the examiner worker dies, its sandbox (bwrap, and so everything inside) dies too."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def tempfile_workdir(runner_dir: Path, submission_dir: Path) -> str:
    """--no-sandbox: a scratch copy of the submission as the working directory."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="coursekit-nosandbox-"))
    shutil.copytree(submission_dir, work, dirs_exist_ok=True)
    return str(work)
