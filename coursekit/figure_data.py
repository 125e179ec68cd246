"""A matplotlib Figure as plain data, and back (docs/CHECKS_CONTRACT.md lists what survives).

`extract` runs in the sandbox on the student's figure; `rebuild` runs in the
examiner and draws an equivalent Figure that the checks inspect. `rebuild`
validates everything it reads and caps counts: the data is the student's.
"""
from __future__ import annotations

import math

MAX_AXES = 16
MAX_ARTISTS = 2_000
MAX_POINTS = 100_000
MAX_TEXT = 300


class FigureDataError(ValueError):
    pass


def _text(s) -> str:
    return str(s)[:MAX_TEXT]


def _num(x) -> float:
    x = float(x)
    return x if math.isfinite(x) else 0.0


def _color(c) -> list[float]:
    from matplotlib.colors import to_rgba

    try:
        return [float(v) for v in to_rgba(c)]
    except (ValueError, TypeError):
        return [0.0, 0.0, 0.0, 1.0]


def extract(fig) -> dict:
    from matplotlib.patches import Rectangle

    axes = []
    for ax in fig.axes[:MAX_AXES]:
        legend = ax.get_legend()
        axes.append({
            "title": _text(ax.get_title()), "xlabel": _text(ax.get_xlabel()), "ylabel": _text(ax.get_ylabel()),
            "xlim": [_num(v) for v in ax.get_xlim()], "ylim": [_num(v) for v in ax.get_ylim()],
            "xticks": [_num(v) for v in ax.get_xticks()][:MAX_ARTISTS],
            "xticklabels": [_text(t.get_text()) for t in ax.get_xticklabels()][:MAX_ARTISTS],
            "yticks": [_num(v) for v in ax.get_yticks()][:MAX_ARTISTS],
            "yticklabels": [_text(t.get_text()) for t in ax.get_yticklabels()][:MAX_ARTISTS],
            "patches": [{"xy": [_num(p.get_x()), _num(p.get_y())], "width": _num(p.get_width()),
                         "height": _num(p.get_height()), "facecolor": _color(p.get_facecolor()),
                         "edgecolor": _color(p.get_edgecolor()), "label": _text(p.get_label())}
                        for p in ax.patches if isinstance(p, Rectangle)][:MAX_ARTISTS],
            "lines": [{"x": [_num(v) for v in line.get_xdata()][:MAX_POINTS],
                       "y": [_num(v) for v in line.get_ydata()][:MAX_POINTS],
                       "label": _text(line.get_label()), "color": _color(line.get_color())}
                      for line in ax.lines][:MAX_ARTISTS],
            "legend": [_text(t.get_text()) for t in legend.get_texts()][:MAX_ARTISTS] if legend else None,
            "texts": [{"xy": [_num(v) for v in t.get_position()], "text": _text(t.get_text())}
                      for t in ax.texts][:MAX_ARTISTS],
        })
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"axes": axes, "suptitle": _text(suptitle)}


def _list(v, n=MAX_ARTISTS) -> list:
    if not isinstance(v, list) or len(v) > n:
        raise FigureDataError("bad figure data")
    return v


def _pair(v) -> tuple[float, float]:
    v = _list(v, 2)
    if len(v) != 2:
        raise FigureDataError("bad figure data")
    return _num(v[0]), _num(v[1])


def _rgba(v) -> tuple:
    v = _list(v, 4)
    if len(v) != 4:
        raise FigureDataError("bad colour")
    return tuple(min(1.0, max(0.0, _num(c))) for c in v)


def rebuild(data):
    """A Figure (Agg, not registered with pyplot) drawn from `extract`'s data."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    try:
        if not isinstance(data, dict):
            raise FigureDataError("bad figure data")
        fig = Figure()
        for spec in _list(data.get("axes"), MAX_AXES):
            if not isinstance(spec, dict):
                raise FigureDataError("bad axes")
            ax = fig.add_subplot(len(data["axes"]), 1, len(fig.axes) + 1)
            for p in _list(spec.get("patches", [])):
                ax.add_patch(Rectangle(_pair(p["xy"]), _num(p["width"]), _num(p["height"]),
                                       facecolor=_rgba(p["facecolor"]), edgecolor=_rgba(p["edgecolor"]),
                                       label=_text(p.get("label", ""))))
            for line in _list(spec.get("lines", [])):
                xs = [_num(v) for v in _list(line["x"], MAX_POINTS)]
                ys = [_num(v) for v in _list(line["y"], MAX_POINTS)]
                ax.plot(xs, ys, label=_text(line.get("label", "")), color=_rgba(line["color"]))
            for t in _list(spec.get("texts", [])):
                ax.text(*_pair(t["xy"]), _text(t["text"]))
            ax.set_title(_text(spec.get("title", "")))
            ax.set_xlabel(_text(spec.get("xlabel", "")))
            ax.set_ylabel(_text(spec.get("ylabel", "")))
            ax.set_xlim(*_pair(spec.get("xlim", [0, 1])))
            ax.set_ylim(*_pair(spec.get("ylim", [0, 1])))
            for axis, ticks, labels in (("x", "xticks", "xticklabels"), ("y", "yticks", "yticklabels")):
                positions = [_num(v) for v in _list(spec.get(ticks, []))]
                names = [_text(v) for v in _list(spec.get(labels, []))]
                getattr(ax, f"set_{axis}ticks")(positions)
                if len(names) == len(positions):
                    getattr(ax, f"set_{axis}ticklabels")(names)
            legend = spec.get("legend")
            if legend is not None:
                from matplotlib.patches import Patch

                labels = [_text(v) for v in _list(legend)]
                ax.legend(handles=[Patch(label=label) for label in labels], labels=labels)
        if data.get("suptitle"):
            fig.suptitle(_text(data["suptitle"]))
        return fig
    except (KeyError, TypeError, ValueError) as exc:
        raise FigureDataError(f"unreadable figure data ({type(exc).__name__})") from None
