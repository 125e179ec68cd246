"""The class report's figures, as PNG bytes (matplotlib's Agg canvas, no pyplot, no display).

Each function returns None when there is nothing to draw. Labels that come
from records (test names, misconception ids) go through `label`, so that a
name with dollar signs is not read as mathtext and a long one stays short.
"""
from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

BLUE, RED, GREY = "#3b6ea5", "#b23a48", "#8a8a8a"
DPI = 100
MAX_BARS = 80             # bars or boxes per figure: beyond this a figure is unreadable (the tables hold all)


def label(text: str, limit: int = 48) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def _figure(width: float, height: float) -> tuple[Figure, object]:
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def score_histogram(percents: list[float]) -> bytes | None:
    """Totals as percent of the points possible, in 5-point bins."""
    if not percents:
        return None
    fig, ax = _figure(7, 2.8)
    ax.hist(percents, bins=range(0, 105, 5), color=BLUE, edgecolor="white")
    ax.set_xlim(0, 100)
    ax.set_xlabel("total score (% of points possible)")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def question_boxplot(percents_by_question: dict[str, list[float]]) -> bytes | None:
    """One box per question: scores as percent of the question's points; the mean as a dot."""
    data = {q: p for q, p in list(percents_by_question.items())[:MAX_BARS] if p}
    if not data:
        return None
    fig, ax = _figure(max(5, 0.7 * len(data) + 2), 3)
    positions = range(1, len(data) + 1)
    ax.boxplot(list(data.values()), positions=positions, widths=0.5, patch_artist=True,
               boxprops={"facecolor": "#dbe6f2", "edgecolor": BLUE}, medianprops={"color": BLUE},
               flierprops={"markersize": 3})
    ax.plot(positions, [sum(p) / len(p) for p in data.values()], "o", color=RED, markersize=4)
    ax.set_xticks(list(positions), [label(q) for q in data])
    ax.set_ylim(-5, 105)
    ax.set_ylabel("score (% of the question)")
    ax.set_title("boxes: quartiles and median; red dots: means", fontsize=9, loc="left")
    return _png(fig)


def pass_rates(names: list[str], rates: list[float]) -> bytes | None:
    """Horizontal bars, one per test, in the item table's order (top to bottom)."""
    names, rates = names[:MAX_BARS], rates[:MAX_BARS]
    if not names:
        return None
    fig, ax = _figure(7, 0.24 * len(names) + 0.9)
    y = range(len(names))
    colors = [RED if r == 0 else BLUE for r in rates]
    ax.barh(list(y), [100 * r for r in rates], color=colors, height=0.7)
    ax.set_yticks(list(y), [label(n) for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("submissions that pass (%)")
    return _png(fig)


def item_map(difficulty: list[float], discrimination: list[float], names: list[str]) -> bytes | None:
    """Difficulty against discrimination, each point labelled (with the item table's row number):
    tests low on the chart do not separate strong from weak submissions."""
    if not names:
        return None
    fig, ax = _figure(6, 3.6)
    ax.axhline(0.2, color=GREY, linewidth=0.8, linestyle="--")
    ax.axhline(0, color=GREY, linewidth=0.8)
    ax.scatter(difficulty, discrimination, color=BLUE, s=18)
    for x, y, name in zip(difficulty, discrimination, names):
        ax.annotate(label(name, 12), (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(min(-0.2, min(discrimination) - 0.05), 1.0)
    ax.set_xlabel("difficulty (mean score / possible; 1 = everybody scores)")
    ax.set_ylabel("discrimination (point-biserial r)")
    return _png(fig)


def misconception_bars(ids: list[str], students: list[int], graded: int) -> bytes | None:
    """Students per misconception, most frequent on top."""
    ids, students = ids[:MAX_BARS], students[:MAX_BARS]
    if not ids:
        return None
    fig, ax = _figure(7, 0.28 * len(ids) + 0.9)
    y = list(range(len(ids)))
    ax.barh(y, students, color=RED, height=0.7)
    for yi, n in zip(y, students):
        share = f" ({100 * n / graded:.0f}%)" if graded else ""
        ax.annotate(f"{n}{share}", (n, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, [label(i, 24) for i in ids], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, max(students) * 1.2 + 0.5)
    ax.set_xlabel("students")
    ax.xaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def time_histogram(seconds: list[float]) -> bytes | None:
    if not seconds:
        return None
    fig, ax = _figure(7, 2.6)
    ax.hist(seconds, bins=min(30, max(5, len(seconds) // 2)), color=BLUE, edgecolor="white")
    ax.set_xlabel("grading time per submission (s)")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)
