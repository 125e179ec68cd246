"""Fixtures for the browser test: one JupyterLab server and one headless Chromium per session.

`assignment` (tests/conftest.py) picks the assignment; its committed student
release is what the browser sees.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import preflight

REPO = preflight.REPO
ARTIFACTS = REPO / "artifacts" / "browser"
CHROMIUM_FLAGS = ["--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMINGS: dict[str, float] = {}
SESSION_START = time.monotonic()


@pytest.fixture(scope="session")
def requirements_present() -> None:
    problems = preflight.missing()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="session")
def timings() -> dict[str, float]:
    """Seconds per step, printed at the end of the run."""
    return TIMINGS


@pytest.fixture(scope="session")
def artifacts() -> Path:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def lab(requirements_present, tmp_path_factory):
    """JupyterLab serving a temporary folder; shut down, kernels and all, whatever happens."""
    from lab_server import start_lab
    root = tmp_path_factory.mktemp("lab-root")
    started = time.monotonic()
    server = start_lab(root, tmp_path_factory.mktemp("lab-home"))
    TIMINGS["start JupyterLab"] = time.monotonic() - started
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def release_copy(lab, assignment, request) -> Path:
    """A fresh copy of the student release (notebook, shipped files, tests/) inside the server's root."""
    folder = lab.root / request.node.name.replace("[", "-").rstrip("]")
    shutil.copytree(assignment.release_dirs()["student"], folder)
    return folder


@pytest.fixture(scope="session")
def chromium(requirements_present, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    flags = CHROMIUM_FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])  # root: no setuid sandbox
    with sync_playwright() as playwright:
        # A persistent context is the way to give Chromium a fresh --user-data-dir of our own.
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(preflight.CHROMIUM),
            headless=True, args=flags, viewport={"width": 1400, "height": 1600})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def notebook_page(chromium, lab):
    from lab_notebook import LabNotebook
    page = chromium.new_page()
    try:
        yield LabNotebook(page)
    finally:
        page.close()


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("browser test timings")
        TIMINGS["end to end (this pytest run)"] = time.monotonic() - SESSION_START
        for step, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{step:<45} {seconds:7.1f} s")
