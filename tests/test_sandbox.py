"""The sandbox itself: what a submission's code can see and do (coursekit/sandbox.py).

Each test starts a small program in a real bubblewrap sandbox, as grading does, and checks one
property from outside. They are skipped where bubblewrap is missing (the install step adds it).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coursekit import REPO_ROOT, sandbox

pytestmark = pytest.mark.skipif(sandbox.bwrap_path() is None, reason="bubblewrap is not installed")


def run_in_sandbox(tmp_path: Path, code: str, limits: sandbox.Limits | None = None, wait: float = 60) -> str:
    runner = tmp_path / "runner"
    submission = tmp_path / "submission"
    for folder in (runner, submission):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    (submission / "mine.txt").write_text("my own file")
    (submission / "mine.txt").chmod(0o644)
    box = sandbox.start(runner, submission, [sys.executable, "-I", "-c", code], slot=40,
                        limits=limits or sandbox.Limits(wall_seconds=wait))
    try:
        box.process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        pass
    box.kill()
    return box.output_text()


def test_sees_only_its_own_files_and_the_system(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden")
    out = run_in_sandbox(tmp_path, f"""
import os
print("own", open("/submission/mine.txt").read())
for path in [{str(REPO_ROOT / 'README.md')!r}, {str(REPO_ROOT / 'solutions')!r}, {str(secret)!r}, "/root/.bashrc"]:
    print("VISIBLE" if os.path.exists(path) else "absent", path)
repo = {str(REPO_ROOT)!r}
print("repository holds", sorted(os.listdir(repo)) if os.path.isdir(repo) else [])
try:
    open("/usr/evil", "w")
    print("wrote /usr")
except OSError:
    print("system read-only")
print("uid", os.getuid())
""")
    assert "own my own file" in out
    assert "VISIBLE" not in out, out
    assert "repository holds []" in out or "repository holds ['.venv']" in out, out  # only the venv, when inside
    assert "system read-only" in out
    uid = int(out.split("uid ")[1].split()[0])
    assert uid != 0


def test_has_no_network(tmp_path):
    out = run_in_sandbox(tmp_path, """
import socket
s = socket.socket()
s.settimeout(2)
print("connect", s.connect_ex(("1.1.1.1", 80)))
""")
    assert "connect 0" not in out and "connect" in out


def test_every_process_it_starts_dies_with_it(tmp_path):
    marker = f"coursekit-test-{os.getpid()}-{time.monotonic_ns()}"
    run_in_sandbox(tmp_path, f"""
import os, subprocess, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        subprocess.Popen(["sleep", "600", "{marker}"][:2])
        os.execvp("sh", ["sh", "-c", "exec -a {marker} sleep 600"])
    os._exit(0)
time.sleep(1)
print("parent done")
""", wait=5)
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left, f"processes outlived the sandbox: {left}"


def test_output_is_capped(tmp_path):
    out = run_in_sandbox(tmp_path, "import sys\nfor _ in range(2000): sys.stdout.write('x' * 10000)\n")
    assert len(out) < sandbox.OUTPUT_CAP + 200
    assert "more bytes of output dropped" in out


def test_memory_and_process_limits_hold(tmp_path):
    limits = sandbox.Limits(memory_bytes=1 << 30, processes=32, wall_seconds=30)
    out = run_in_sandbox(tmp_path, """
import os
try:
    block = bytearray(3 << 30)
    print("allocated 3 GiB")
except MemoryError:
    print("memory limited")
children = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            import time; time.sleep(20); os._exit(0)
        children += 1
except OSError:
    pass
print("children", children)
""", limits=limits)
    assert "memory limited" in out
    assert int(out.split("children ")[1].split()[0]) < 32


def test_wall_clock_kill(tmp_path):
    start = time.monotonic()
    run_in_sandbox(tmp_path, "while True: pass", limits=sandbox.Limits(wall_seconds=2), wait=2)
    assert time.monotonic() - start < 20
