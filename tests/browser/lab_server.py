"""A throwaway JupyterLab server on 127.0.0.1, rooted in a temporary folder.

Everything Jupyter would write globally (config, data, runtime, settings,
workspaces, IPython profile, matplotlib cache) goes into the temporary folder,
so a test run leaves the machine as it found it. The kernel is the project
venv's "python3" kernelspec (jupyter_client swaps its `python` for the venv's
interpreter), so students' torch is what runs.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"

# User settings: no "get Jupyter news?" toast covering the notebook, no update check.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
}


@dataclass
class LabServer:
    process: subprocess.Popen
    url: str            # http://127.0.0.1:<port>/
    token: str
    root: Path          # the folder the server serves
    log_path: Path

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(self.url + path.lstrip("/"), method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def lab_url(self, relative_path: str) -> str:
        return f"{self.url}lab/tree/{relative_path}?token={self.token}"

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-n:]

    def stop(self) -> None:
        """Shut down kernels and server; then kill whatever it started that is still alive."""
        try:
            descendants = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        if self.process.poll() is None:
            try:
                self.api("api/shutdown", method="POST")   # stops kernels first, then exits
            except (OSError, urllib.error.URLError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        # Kernels run in sessions of their own; anything the shutdown missed goes now.
        for child in descendants:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(descendants, timeout=10)


def start_lab(root: Path, home: Path, timeout_s: float = 90) -> LabServer:
    """Start `jupyter lab` serving `root`; `home` holds all of Jupyter's own state."""
    token = os.urandom(16).hex()
    runtime_dir = home / "runtime"
    settings_dir = home / "lab-settings"
    for relative, values in LAB_SETTINGS.items():
        path = settings_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    env = {
        **os.environ,
        "JUPYTER_TOKEN": token,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(runtime_dir),
        "JUPYTERLAB_SETTINGS_DIR": str(settings_dir),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "IPYTHONDIR": str(home / "ipython"),
        "MPLCONFIGDIR": str(home / "matplotlib"),
        "PYTHONNOUSERSITE": "1",
    }
    env.pop("JUPYTER_PATH", None)
    command = [str(VENV_PYTHON), "-m", "jupyter", "lab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0",
               f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log_path = home / "jupyter-lab.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    server = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n"
                               + log_path.read_text(errors="replace")[-4000:])
        info = runtime_dir / f"jpserver-{process.pid}.json"
        if server is None and info.exists():
            try:
                data = json.loads(info.read_text(encoding="utf-8"))
            except json.JSONDecodeError:   # being written
                data = None
            if data:
                server = LabServer(process, f"http://127.0.0.1:{data['port']}/", token, root, log_path)
        if server is not None:
            try:
                server.api("api/status")
                return server
            except (OSError, urllib.error.URLError):
                pass
        time.sleep(0.3)
    process.kill()
    raise RuntimeError("jupyter lab did not answer within %ds:\n%s"
                       % (timeout_s, log_path.read_text(errors="replace")[-4000:]))


if __name__ == "__main__":   # manual exploration: serve a folder until Ctrl-C
    import tempfile
    home = Path(tempfile.mkdtemp(prefix="lab-home-"))
    server = start_lab(Path(sys.argv[1]).resolve(), home)
    print(server.lab_url(""), flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
