"""TRUSTED SIDE: grade records (signed), grades.csv and per-student feedback (docs/GRADE_RECORDS.md)."""
from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import os
import secrets
from pathlib import Path

SCHEMA = 1
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FEEDBACK_OUTPUT_CAP = 4_000


def load_key(out: Path) -> bytes:
    """OUT/.key: made once per OUT folder, readable by the grader alone; never enters a sandbox."""
    path = out / ".key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def _canonical(record: dict) -> bytes:
    body = {k: v for k, v in record.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode()


def sign(record: dict, key: bytes) -> dict:
    record["mac"] = hmac.new(key, _canonical(record), hashlib.sha256).hexdigest()
    return record


def verified(path: Path, key: bytes) -> dict | None:
    """The record at path if its MAC is ours, else None (a resume grades it again)."""
    try:
        if path.stat().st_size > (8 << 20):
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        mac = record.get("mac") if isinstance(record, dict) else None
        good = hmac.new(key, _canonical(record), hashlib.sha256).hexdigest()
        return record if isinstance(mac, str) and hmac.compare_digest(mac, good) else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    path.chmod(0o644)


def safe_cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: formulas are defused with a leading quote."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _num(x) -> str:
    return "" if x is None else f"{float(x):g}"


def grades_csv(records: list[dict], questions: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["file", "id", "status", *questions, "total", "possible", "otter_total", "flags"])
    for r in records:
        scores = r.get("questions", {})
        writer.writerow([safe_cell(r["file"]), safe_cell(r["id"]), r["status"],
                         *[_num(scores.get(q, {}).get("score", 0.0)) for q in questions],
                         _num(r.get("total", 0.0)), _num(r.get("possible", 0.0)), _num(r.get("otter_total")),
                         safe_cell("; ".join(r.get("flags", [])))])
    return buf.getvalue()


def _fence(text: str) -> str:
    """A fenced block no backtick run inside the text can close."""
    import re

    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def feedback_markdown(record: dict, describe=None) -> str:
    """What the student reads. Every line comes from the trusted side; the notebook's own output is fenced."""
    lines = [f"# {record.get('assignment', '')} feedback: {record['file']}", ""]
    if record["status"] != "graded":
        lines += [f"**Not graded ({record['status']}):** {record.get('detail', '')}", ""]
    lines += [f"**Score: {_num(record.get('total', 0))} / {_num(record.get('possible', 0))}**", "",
              "| question | score | possible |", "| --- | --- | --- |"]
    for name, q in record.get("questions", {}).items():
        lines.append(f"| {name} | {_num(q['score'])} | {_num(q['possible'])} |")
    lines.append("")
    failed = [t for t in record.get("tests", []) if not t.get("passed")]
    if failed:
        lines += ["## What to fix", ""]
    for t in failed:
        points = f"{_num(t.get('score', 0))} / {_num(t.get('possible', 0))} points" if t.get("possible") else "public test"
        lines.append(f"### {t['question']}: {t['name']} ({points})")
        lines += ["", t.get("message") or "failed", ""]
        for text in (describe(t.get("misconceptions", [])) if describe else t.get("misconceptions", [])):
            lines.append(f"- Misconception {text}")
        lines.append("")
    if record.get("flags"):
        lines += ["## Grading notes", ""] + [f"- {f}" for f in record["flags"]] + [""]
    output = (record.get("output") or "").strip()
    if output:
        if len(output) > FEEDBACK_OUTPUT_CAP:
            output = "[...]\n" + output[-FEEDBACK_OUTPUT_CAP:]
        lines += ["## Your notebook's output in the grader (last part)", "", _fence(output), ""]
    return "\n".join(lines)


def summary(records: list[dict], questions: list[str], graded_now: int, reused: int, seconds: float) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    graded = [r for r in records if r["status"] == "graded"]
    lines = [f"[grade] {len(records)} files: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
             f"[grade] graded now {graded_now}, kept from an earlier run {reused}, in {seconds:.1f} s"]
    if graded:
        totals = sorted(r["total"] for r in graded)
        possible = graded[0]["possible"]
        lines.append(f"[grade] score: median {totals[len(totals) // 2]:g} / {possible:g}, "
                     f"min {totals[0]:g}, max {totals[-1]:g}")
        for q in questions:
            full = sum(1 for r in graded if r["questions"].get(q, {}).get("score") == r["questions"].get(q, {}).get(
                "possible"))
            lines.append(f"[grade]   {q}: {full}/{len(graded)} full marks")
    flagged = sum(1 for r in records if r.get("flags"))
    if flagged:
        lines.append(f"[grade] {flagged} flagged: see the flags column of grades.csv")
    return "\n".join(lines)
