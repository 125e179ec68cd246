"""Drive one notebook in JupyterLab the way a student does: keyboard, menus, scrolling.

Cells are addressed by their index in the notebook (JupyterLab's default
"contentVisibility" windowing keeps every cell in the page, in order).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import Locator, Page

CELL = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"
EXECUTED_PROMPT = re.compile(r"^\[\d+\]:$")


class LabNotebook:
    def __init__(self, page: Page):
        self.page = page

    # --- opening and reading -------------------------------------------------
    def open(self, url: str, cells: int, timeout_s: float = 120) -> None:
        """Load the notebook and wait until all `cells` are in the page and the kernel is idle."""
        self.page.goto(url)
        self.page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length === n",
                                    arg=[CELL, cells], timeout=timeout_s * 1000)
        self.wait_for_kernel_idle(timeout_s)

    def cell(self, index: int) -> Locator:
        return self.page.locator(CELL).nth(index)

    def cell_count(self) -> int:
        return self.page.locator(CELL).count()

    def kernel_status(self) -> str:
        """The status bar's 'Python 3 (ipykernel) | Idle' text."""
        return self.page.locator("#jp-main-statusbar .jp-StatusBar-TextItem",
                                 has_text="|").first.inner_text()

    def prompts(self) -> list[str]:
        """Input prompts of all code cells: '[ ]:', '[*]:' or '[7]:'."""
        return [p.strip() for p in self.page.locator(f"{CELL} .jp-InputArea-prompt").all_text_contents()
                if p.strip()]

    def output_text(self, index: int, timeout_s: float = 10) -> str:
        """A cell's outputs as the student reads them: scrolled into view, laid out, innerText.

        Offscreen cells are not laid out ("content-visibility"), and their innerText
        loses line breaks; so scroll first and wait until the layout caught up.
        """
        outputs = self.cell(index).locator(".jp-OutputArea-output")
        if not "".join(outputs.all_text_contents()).strip():
            return ""
        outputs.first.scroll_into_view_if_needed()
        deadline = time.monotonic() + timeout_s
        while True:
            text = "\n".join(outputs.all_inner_texts()).strip()
            if text or time.monotonic() > deadline:
                return text
            self.page.wait_for_timeout(100)

    # --- editing -------------------------------------------------------------
    def replace_cell_text(self, index: int, text: str) -> None:
        """Click into the cell's editor, select everything, and paste `text` over it."""
        editor = self.cell(index).locator(".cm-content")
        editor.scroll_into_view_if_needed()
        editor.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(text)
        self.page.keyboard.press("Escape")         # back to command mode

    def save(self, timeout_s: float = 30) -> None:
        self.page.keyboard.press("Control+S")
        tab = self.page.locator(".lm-TabBar-tab.jp-mod-current")
        deadline = time.monotonic() + timeout_s
        while "jp-mod-dirty" in (tab.first.get_attribute("class") or ""):
            if time.monotonic() > deadline:
                raise TimeoutError("the notebook stayed unsaved")
            self.page.wait_for_timeout(200)

    # --- running -------------------------------------------------------------
    def menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def run_all(self, timeout_s: float = 600) -> float:
        """Run > Run All Cells; wait until no cell is queued and the kernel is idle. Returns seconds."""
        started = time.monotonic()
        self.menu("Run", "Run All Cells")
        self.page.wait_for_function(
            "sel => [...document.querySelectorAll(sel)].some(p => p.textContent.includes('*'))",
            arg=f"{CELL} .jp-InputArea-prompt", timeout=30_000)
        self.wait_for_kernel_idle(timeout_s, settle_s=1.0)
        return time.monotonic() - started

    def run_cell(self, index: int, timeout_s: float = 300) -> None:
        """Select the cell and press Shift+Enter, as a student runs the export cell."""
        cell = self.cell(index)
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputArea-prompt").click()     # selects the cell, command mode
        before = cell.locator(".jp-InputArea-prompt").inner_text().strip()
        self.page.keyboard.press("Control+Enter")
        self.page.wait_for_function(
            "([cell, before]) => { const p = cell.querySelector('.jp-InputArea-prompt').textContent.trim();"
            " return p !== before && !p.includes('*') && p !== '[ ]:'; }",
            arg=[cell.element_handle(), before], timeout=timeout_s * 1000)
        self.wait_for_kernel_idle(timeout_s)

    def wait_for_kernel_idle(self, timeout_s: float, settle_s: float = 0.0) -> None:
        """Idle, with no cell queued, for `settle_s` in a row."""
        deadline = time.monotonic() + timeout_s
        idle_since = None
        while time.monotonic() < deadline:
            idle = (self.kernel_status().endswith("Idle")
                    and not any("*" in p for p in self.prompts()))
            if idle:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= settle_s:
                    return
            else:
                idle_since = None
            self.page.wait_for_timeout(250)
        raise TimeoutError(f"kernel not idle after {timeout_s}s: {self.kernel_status()!r}")

    # --- pictures ------------------------------------------------------------
    def screenshot_pages(self, folder: Path, prefix: str) -> list[Path]:
        """Scroll the notebook from top to bottom, one screenshot per screenful."""
        folder.mkdir(parents=True, exist_ok=True)
        scroller = self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer")
        viewport = scroller.evaluate("e => e.clientHeight")
        step = max(viewport - 80, 200)                       # a little overlap between pages
        last_cell_shown = ("(e, sel) => { const cells = document.querySelectorAll(sel);"
                           " return cells[cells.length - 1].getBoundingClientRect().bottom"
                           " <= e.getBoundingClientRect().bottom; }")
        paths, top = [], 0
        while True:
            scroller.evaluate("(e, y) => e.scrollTo(0, y)", top)
            self.page.wait_for_timeout(300)                  # let offscreen cells paint
            path = folder / f"{prefix}-{len(paths) + 1:02d}.png"
            self.page.screenshot(path=str(path))
            paths.append(path)
            if scroller.evaluate(last_cell_shown, CELL) or len(paths) >= 100:
                return paths
            top += step
