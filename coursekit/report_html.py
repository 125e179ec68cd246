"""The class report rendered: one self-contained HTML page and its tables as CSV.

Every string that came from a record goes through `printable` (lone
surrogates from undecodable file names, control and bidi characters made
visible, length capped) and then html.escape or `csv_cell`.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import statistics
from datetime import datetime, timezone

from . import report_figures as figures
from .report import ClassReport, GradeRecord

# Invisible or reordering characters in a student's file name would make the row lie about it.
_SHOWN_ESCAPED = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F] if chr(c) not in "\t\n"}
_SHOWN_ESCAPED |= {c: f"\\u{c:04x}" for c in [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
DASH = "—"


def printable(text: str, limit: int = 300) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").translate(_SHOWN_ESCAPED)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def esc(text: str, limit: int = 300) -> str:
    return html.escape(printable(text, limit), quote=True)


def csv_cell(value) -> str | int | float:
    """Numbers as numbers; text that a spreadsheet would run as a formula gets a leading '."""
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return round(value, 4) if isinstance(value, float) else value
    text = printable(str(value), 2000)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return DASH
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"


def pct(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.0f}%"


# ---------------------------------------------------------------- CSV

def _csv(header: list[str], rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue()


def _timing(r: GradeRecord, key: str) -> float | None:
    return r.seconds.get(key)


def render_csv_tables(report: ClassReport) -> dict[str, str]:
    summaries = [(row, row.summary()) for row in report.scores]
    return {
        "status.csv": _csv(["status", "submissions"], report.status_counts.items()),
        "scores.csv": _csv(["question", "possible", "students", "mean", "median", "sd", "min", "max", "mean_share"],
                           [[row.question, row.possible, *s.values()] for row, s in summaries]),
        "tests.csv": _csv(["test", "question", "possible", "students", "passed", "pass_rate", "difficulty",
                           "discrimination_point_biserial", "note"],
                          [[i.test, i.question, i.possible, i.students, i.passed, i.pass_rate, i.difficulty,
                            i.discrimination, i.note] for i in report.items]),
        "misconceptions.csv": _csv(["id", "title", "section", "students", "share_of_graded", "tests"],
                                   [[m.id, m.title, m.section, m.students, m.share, "; ".join(m.tests)]
                                    for m in report.misconceptions]),
        "flagged.csv": _csv(["file", "id", "status", "reasons"],
                            [[r.file, r.id, r.status, "; ".join(reasons)] for r, reasons in report.flagged]),
        "times.csv": _csv(["file", "id", "status", "seconds_examiner", "seconds_otter", "seconds_total"],
                          [[r.file, r.id, r.status, _timing(r, "examiner"), _timing(r, "otter"), _timing(r, "total")]
                           for r in report.records]),
        "skipped.csv": _csv(["record_file", "reason"], report.skipped),
    }


# ---------------------------------------------------------------- HTML

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; max-width: 1100px;
       margin: 2em auto; padding: 0 1.5em; }
h1 { font-size: 1.7em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
.lead { color: #555; } nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 14px; }
th, td { padding: .25em .7em; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
th { background: #f3f5f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.warn td { background: #fdf1f2; } .note { color: #555; font-size: 14px; max-width: 60em; }
.bad { color: #b23a48; } img { display: block; max-width: 100%; margin: .6em 0; }
code, .file { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
.file { word-break: break-all; }
ul.reasons { margin: 0; padding-left: 1.1em; }
"""


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset(),
           warn: list[bool] | None = None) -> str:
    """Cells are HTML already (escaped by the caller); numeric columns align right."""
    if not rows:
        return '<p class="note">None.</p>'
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        cells = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        body.append(f'<tr class="warn">{cells}</tr>' if warn and warn[index] else f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _status_section(report: ClassReport) -> str:
    total = len(report.records)
    rows = [[esc(s), str(n), pct(n / total if total else None)] for s, n in report.status_counts.items()]
    return "<h2 id=status>Status</h2>" + _table(["status", "submissions", "share"], rows, {1, 2})


def _scores_section(report: ClassReport) -> str:
    graded = report.graded
    total_possible = report.scores[0].possible
    percents = [100 * r.total / r.possible for r in graded if r.possible]
    by_question = {row.question: [100 * s / row.possible for s in row.scores] for row in report.scores[1:]
                   if row.possible}
    rows = []
    for row in report.scores:
        s = row.summary()
        rows.append([esc(row.question), num(row.possible), str(s["students"]), num(s["mean"]), num(s["median"]),
                     num(s["sd"]), num(s["min"]), num(s["max"]), pct(s["mean_percent"])])
    return ("<h2 id=scores>Scores</h2>"
            f'<p class="note">Graded submissions only, out of {num(total_possible)} points.</p>'
            + _img(figures.score_histogram(percents), "histogram of total scores")
            + _img(figures.question_boxplot(by_question), "score distribution per question")
            + _table(["question", "possible", "students", "mean", "median", "sd", "min", "max", "mean %"],
                     rows, set(range(1, 9))))


def _items_section(report: ClassReport) -> str:
    items = report.items
    defined = [(n, i) for n, i in enumerate(items, 1) if i.discrimination is not None and i.difficulty is not None]
    rows = [[str(n), f'<code>{esc(i.test, 120)}</code>', esc(i.question), num(i.possible), str(i.students),
             str(i.passed), pct(i.pass_rate), num(i.difficulty), num(i.discrimination),
             f'<span class="bad">{esc(i.note)}</span>' if i.alarming else esc(i.note)] for n, i in enumerate(items, 1)]
    return ("<h2 id=tests>Tests: pass rates and item analysis</h2>"
            + _img(figures.pass_rates([i.test for i in items], [i.pass_rate or 0.0 for i in items]),
                   "pass rate per test")
            + '<p class="note"><b>Difficulty</b> is the mean score on the test divided by its points '
              "(1 = everybody earns them); for 0-point public tests it is the pass rate. "
              "<b>Discrimination</b> is the <b>point-biserial correlation</b> between passing the test (1/0) and "
              "the rest-of-test score (the total minus this test's points), over graded submissions: near 0, the "
              "test does not separate strong from weak submissions; below 0, weaker ones pass it more often; 0.3 "
              f"and above is good. {DASH} means undefined: everybody passed, nobody passed, or the rest scores "
              "do not vary. A test that nobody passes is a sign of a bad prompt or a bad test.</p>"
            + _table(["#", "test", "question", "points", "students", "passed", "pass rate", "difficulty",
                      "discrimination", "note"], rows, {0, 3, 4, 5, 6, 7, 8}, [i.alarming for i in items])
            + _img(figures.item_map([i.difficulty for _, i in defined], [i.discrimination for _, i in defined],
                                    [str(n) for n, _ in defined]),
                   "difficulty against discrimination per test, labelled with the table's row numbers"))


def _misconceptions_section(report: ClassReport) -> str:
    ms = report.misconceptions
    graded = len(report.graded)
    rows = [[f"<b>{esc(m.id, 40)}</b>", esc(m.title) or DASH, esc(m.section) or DASH, str(m.students),
             pct(m.share), ", ".join(f"<code>{esc(t, 120)}</code>" for t in m.tests)] for m in ms]
    return ("<h2 id=misconceptions>Misconceptions</h2>"
            '<p class="note">Students whose submission failed at least one check that detected the '
            "misconception; share of graded submissions. Sections are the handout's.</p>"
            + _img(figures.misconception_bars([m.id for m in ms], [m.students for m in ms], graded),
                   "students per misconception")
            + _table(["id", "misconception", "handout", "students", "share", "detected by"], rows, {3, 4}))


def _flagged_section(report: ClassReport) -> str:
    rows = [[f'<span class="file">{esc(r.file, 200)}</span>', f"<code>{esc(r.id, 120)}</code>", esc(r.status),
             '<ul class="reasons">' + "".join(f"<li>{esc(reason, 400)}</li>" for reason in reasons) + "</ul>"]
            for r, reasons in report.flagged]
    return ("<h2 id=flagged>Submissions that need a human look</h2>"
            '<p class="note">Not graded (timeout, error, not graded) or flagged by the grader\'s integrity '
            "checks.</p>" + _table(["file", "id", "status", "reasons"], rows))


def _times_section(report: ClassReport) -> str:
    timed = sorted(((r.seconds["total"], r) for r in report.records if "total" in r.seconds),
                   key=lambda pair: -pair[0])
    seconds = [s for s, _ in timed]
    summary = ""
    if seconds:
        p90 = statistics.quantiles(seconds, n=10)[-1] if len(seconds) > 1 else seconds[0]
        summary = (f'<p class="note">{len(seconds)} submissions: mean {num(statistics.fmean(seconds), 1)} s, '
                   f"median {num(statistics.median(seconds), 1)} s, 90th percentile {num(p90, 1)} s, "
                   f"longest {num(seconds[0], 1)} s, all together {num(sum(seconds) / 60, 1)} min. "
                   "The slowest ten:</p>")
    rows = [[f'<span class="file">{esc(r.file, 200)}</span>', esc(r.status), num(r.seconds.get("examiner"), 1),
             num(r.seconds.get("otter"), 1), num(s, 1)] for s, r in timed[:10]]
    return ("<h2 id=time>Grading time</h2>" + _img(figures.time_histogram(seconds), "grading time histogram")
            + summary + (_table(["file", "status", "examiner s", "otter s", "total s"], rows, {2, 3, 4})
                         if rows else '<p class="note">No timings recorded.</p>'))


def _skipped_section(report: ClassReport) -> str:
    if not report.skipped:
        return ""
    rows = [[f'<span class="file">{esc(name, 200)}</span>', esc(why)] for name, why in report.skipped]
    return ("<h2 id=skipped>Unreadable record files</h2>"
            f'<p class="note bad">{len(report.skipped)} files in records/ could not be read as grade records; '
            "they are not counted anywhere above.</p>" + _table(["record file", "why"], rows))


def render_html(report: ClassReport) -> str:
    name = esc(report.assignment or "assignment", 60)
    counts = ", ".join(f"{n} {esc(s)}" for s, n in report.status_counts.items() if n)
    skipped = (f' <span class="bad">{len(report.skipped)} unreadable record files skipped.</span>'
               if report.skipped else "")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = " ".join(f'<a href="#{a}">{t}</a>' for a, t in [
        ("status", "Status"), ("scores", "Scores"), ("tests", "Tests"), ("misconceptions", "Misconceptions"),
        ("flagged", "Needs a look"), ("time", "Grading time"),
        *([("skipped", "Unreadable")] if report.skipped else [])])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{name}: class report</title><style>{CSS}</style></head><body>"
            f"<h1>{name}: class report</h1>"
            f'<p class="lead">{len(report.records)} submissions ({counts or "none"}).{skipped} '
            f"Built {stamp} from records/; the same tables are in report/*.csv.</p><nav>{nav}</nav>"
            + _status_section(report) + _scores_section(report) + _items_section(report)
            + _misconceptions_section(report) + _flagged_section(report) + _times_section(report)
            + _skipped_section(report) + "</body></html>\n")
