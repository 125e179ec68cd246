"""Grade a folder of submissions for a whole class: `python -m coursekit grade SUBMISSIONS --out OUT`.

Every `.ipynb` and `.zip` directly in SUBMISSIONS is graded with the built autograder zip by
`coursekit.grading` (otter's grading code in this environment, `jobs` kernels at a time, a time
and memory limit per submission, results as JSON). OUT receives:

    OUT/grades.csv              otter grade's final_grades.csv layout + a `status` column
    OUT/feedback/<name>.md      per student: each failed check with its message, errors, notes
    OUT/results/<key>.json      one record per graded submission (key: sha256 of the submission
                                + sha256 of the autograder zip), written atomically

A second run skips every submission whose record exists (same file, same autograder) unless
--force, so an interrupted run loses nothing already graded; grades.csv and the feedback are
always regenerated from the records.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import sys
import threading
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT
from .grading import DEFAULT_TIMEOUT_S, GradeResult, grade_many
from .verify import verify_results

SUFFIXES = (".ipynb", ".zip")
POINTS_LABEL = "points-per-question"   # otter grade's first row


def find_submissions(folder: Path) -> list[Path]:
    return sorted((p for p in Path(folder).iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in SUFFIXES),
                  key=lambda p: p.name)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def question_names(autograder_zip: Path) -> list[str]:
    with zipfile.ZipFile(autograder_zip) as zf:
        names = [Path(n).stem for n in zf.namelist() if n.startswith("tests/") and n.endswith(".py")]
    return sorted(names)


# ----------------------------------------------------------------------------- records


@dataclass
class Record:
    file: str
    key: str
    result: GradeResult

    @property
    def ok(self) -> bool:
        return self.result.status == "ok"


def record_key(submission_sha: str, autograder_sha: str) -> str:
    return f"{submission_sha[:32]}-{autograder_sha[:16]}"


def load_record(path: Path) -> GradeResult | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return GradeResult.from_json(data["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None   # unreadable (e.g. an old or foreign file): grade again


def save_record(path: Path, file: str, submission_sha: str, autograder_sha: str, result: GradeResult) -> None:
    data = {"file": file, "submission_sha256": submission_sha, "autograder_sha256": autograder_sha,
            "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "result": result.to_json()}
    write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False))


# ----------------------------------------------------------------------------- outputs


def points_per_question(records: list[Record], questions: list[str]) -> dict[str, float | None]:
    for r in records:
        if r.ok and all(q in r.result.questions for q in questions):
            return {q: r.result.questions[q].max_score for q in questions}
    return {q: None for q in questions}


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:.5g}"


def grades_csv(records: list[Record], questions: list[str]) -> str:
    """otter grade's final_grades.csv (file, questions, total_points_earned, percent_correct,
    grading_status) plus `status`: why a row is zero, in words."""
    possible = points_per_question(records, questions)
    total_possible = sum(v for v in possible.values() if v is not None)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["file", *questions, "total_points_earned", "percent_correct", "grading_status", "status", "flags"])
    w.writerow([POINTS_LABEL, *(_fmt(possible[q]) for q in questions), _fmt(total_possible), 1, "--", "--", "--"])
    for r in sorted(records, key=lambda r: r.file):
        res = r.result
        scores = [res.score(q) if r.ok else 0.0 for q in questions]
        total = sum(scores)
        percent = round(total / total_possible, 4) if total_possible else 0
        grading_status = "Completed" if r.ok else res.message
        w.writerow([r.file, *(_fmt(s) for s in scores), _fmt(total), percent, grading_status,
                    res.reason or res.status, " | ".join(res.flags)[:2000]])
    return out.getvalue()


_ADVICE = {
    "timeout": "It ran longer than the time limit: look for a loop that never ends, or work far larger "
               "than the exercise asks for.",
    "kernel died": "The Python process running it stopped (os._exit, a crash, or running out of memory).",
    "invalid notebook JSON": "The file is not a valid notebook: save it again from Jupyter and resubmit it.",
    "empty file": "The file is empty: save the notebook from Jupyter and resubmit it.",
    "no notebook in zip": "The zip holds no .ipynb file: submit the zip that the notebook's export cell writes.",
    "notebook of another assignment": "This is the notebook of another assignment.",
}


def _tail(message: str, lines: int = 12) -> str:
    rows = [r.rstrip() for r in message.strip().splitlines() if r.strip()]
    return "\n".join(rows[-lines:])


def feedback_markdown(record: Record, possible: dict[str, float | None]) -> str:
    res = record.result
    total_possible = sum(v for v in possible.values() if v is not None)
    lines = [f"# Feedback on {record.file}", ""]
    if not record.ok:
        lines += [f"**Not graded: {res.reason or res.status}.** Score 0 / {_fmt(total_possible)}.", ""]
        if res.message and res.message != res.reason:
            lines += [res.message, ""]
        advice = next((text for key, text in _ADVICE.items() if (res.reason or "").startswith(key)), "")
        if advice:
            lines += [advice, ""]
    else:
        lines += [f"Score: **{_fmt(res.total)} / {_fmt(res.possible)}**"
                  + (f" ({100 * res.total / res.possible:.0f} %)" if res.possible else ""), ""]
        for name, q in sorted(res.questions.items()):
            mark = "full marks" if q.full_marks else "points lost"
            lines.append(f"## {name}: {_fmt(q.score)} / {_fmt(q.max_score)} ({mark})")
            failed = [c for c in res.cases.get(name, []) if not c["passed"]]
            if failed:
                lines.append("")
                for c in failed:
                    kind = "hidden test" if c["hidden"] else "public test"
                    pts = f", {_fmt(c['points'])} pt" if c.get("points") else ""
                    lines += [f"- {c['name']} ({kind}{pts}) failed:", "", "  ```",
                              *("  " + row for row in _tail(c["message"] or "failed").splitlines()), "  ```"]
            elif not q.full_marks and q.output:
                lines += ["", "```", _tail(q.output, 30), "```"]
            lines.append("")
    if res.cell_errors:
        lines += ["## Errors raised by your notebook's cells", ""]
        for e in res.cell_errors:
            lines.append(f"- code cell {e['cell']} (`{e['first_line']}`): {e['ename']}: {e['evalue']}")
        lines.append("")
    if res.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in res.notes] + [""]
    if res.flags:
        lines += ["## Grading integrity", "",
                  "Your notebook was graded twice: by otter, and again in a clean process that runs only your "
                  "definitions. The lower score counts. These findings are recorded for the course staff:", ""]
        lines += [f"- {f}" for f in res.flags] + [""]
    return "\n".join(lines).rstrip() + "\n"


def feedback_names(files: list[str]) -> dict[str, str]:
    stems = [Path(f).stem for f in files]
    return {f: (Path(f).stem if stems.count(Path(f).stem) == 1 else f) + ".md" for f in files}


def summary_text(records: list[Record], questions: list[str], graded_now: int, skipped: int, seconds: float) -> str:
    possible = points_per_question(records, questions)
    total_possible = sum(v for v in possible.values() if v is not None)
    n = len(records)
    ok = [r for r in records if r.ok]
    timeouts = [r for r in records if r.result.status == "timeout"]
    failed = [r for r in records if r.result.status == "error"]
    lines = ["", f"Graded {n} submissions ({graded_now} now, {skipped} from earlier runs) in {seconds:.0f} s: "
             f"{len(ok)} ok, {len(failed)} failed, {len(timeouts)} timed out."]
    reasons: dict[str, int] = {}
    for r in failed + timeouts:
        reasons[r.result.reason] = reasons.get(r.result.reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {count:4d}  {reason}")
    flagged = [r for r in records if r.result.flags]
    if flagged:
        lines.append(f"Flagged for review ({len(flagged)}; see the flags column and their feedback):")
        lines += [f"  {r.file}: {r.result.flags[0]}" + (f" (+{len(r.result.flags) - 1} more)"
                                                         if len(r.result.flags) > 1 else "") for r in flagged[:20]]
    if n:
        lines.append("Per question (mean over all rows / over graded rows):")
        for q in questions:
            scores_all = [r.result.score(q) if r.ok else 0.0 for r in records]
            scores_ok = [r.result.score(q) for r in ok]
            mean_ok = sum(scores_ok) / len(scores_ok) if scores_ok else 0.0
            lines.append(f"  {q:>6}: {sum(scores_all) / n:6.2f} / {mean_ok:6.2f}  of {_fmt(possible[q]) or '?'}")
        if total_possible:
            bins = [0] * 11
            for r in records:
                total = sum(r.result.score(q) for q in questions) if r.ok else 0.0
                bins[min(10, int(10 * total / total_possible + 1e-9))] += 1
            lines.append("Score histogram (percent of total):")
            width = max(bins)
            for i, count in enumerate(bins):
                label = "   100" if i == 10 else f"{10 * i:3d}-{10 * i + 9:<2d}"
                lines.append(f"  {label} | {'#' * round(40 * count / width) if width else ''} {count}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- progress


class Progress:
    """A progress bar on stderr with counts and an ETA (tqdm's look, no dependency)."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.counts = {"ok": 0, "error": 0, "timeout": 0}
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._render()

    def update(self, result: GradeResult) -> None:
        self.done += 1
        self.counts[result.status] = self.counts.get(result.status, 0) + 1
        if self.tty:
            self._render()
        else:
            print(f"[{self.done}/{self.total}] {result.submission.name}: {result.reason or result.status}"
                  + (f" ({result.total:g}/{result.possible:g})" if result.status == "ok" else ""),
                  file=self.stream, flush=True)

    def _render(self) -> None:
        if not self.tty:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        width = 30
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        text = (f"\r[{bar}] {self.done}/{self.total}  ok {self.counts['ok']}, failed {self.counts['error']}, "
                f"timeout {self.counts['timeout']}  {_clock(elapsed)} elapsed"
                + (f", ETA {_clock(eta)}" if eta is not None else ""))
        print(text.ljust(110), end="", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream, flush=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


# ----------------------------------------------------------------------------- the command


def run(submissions_dir: Path, out_dir: Path, autograder_zip: Path | None = None, jobs: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S, force: bool = False, memory_limit: int | None = None,
        stdout=None, stderr=None) -> int:
    stdout = stdout or sys.stdout
    start = time.monotonic()
    submissions_dir, out_dir = Path(submissions_dir), Path(out_dir)
    autograder_zip = Path(autograder_zip or REPO_ROOT / "autograder" / "hw07" / "hw07-autograder.zip")
    if not submissions_dir.is_dir():
        raise SystemExit(f"{submissions_dir} is not a folder")
    if not autograder_zip.is_file():
        raise SystemExit(f"no autograder zip at {autograder_zip}: build it (python -m coursekit release) or pass "
                         f"--autograder")
    results_dir = out_dir / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    ag_sha = sha256_file(autograder_zip)
    questions = question_names(autograder_zip)

    subs = find_submissions(submissions_dir)
    shas = {p: sha256_file(p) for p in subs}
    keys = {p: record_key(shas[p], ag_sha) for p in subs}
    previous: dict[Path, GradeResult] = {}
    if not force:
        for p, key in keys.items():
            old = load_record(results_dir / f"{key}.json")
            if old is not None and not old.retry:
                previous[p] = old
    todo = [p for p in subs if p not in previous]
    print(f"[grade] {len(subs)} submissions in {submissions_dir}: {len(todo)} to grade, "
          f"{len(previous)} already graded with this autograder", file=stdout, flush=True)

    def on_result(result: GradeResult) -> None:
        path = Path(result.submission)
        save_record(results_dir / f"{keys[path]}.json", path.name, shas[path], ag_sha, result)
        progress.update(result)

    def on_result_verified(result: GradeResult) -> None:
        path = Path(result.submission)
        save_record(results_dir / f"{keys[path]}.json", path.name, shas[path], ag_sha, result)
        progress.update(result)

    progress = Progress(len(todo), stream=stderr)
    # SIGTERM (a closed session, `kill`) stops the batch like Ctrl-C: kernels are killed, records kept.
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        fresh = grade_many(todo, autograder_zip, jobs=jobs, timeout=timeout, on_result=on_result,
                           memory_limit=memory_limit) if todo else []
        progress.close()
        results = dict(previous)
        results.update({p: r for p, r in zip(todo, fresh)})
        # Second pass: every graded submission is checked again where its code cannot reach the checks
        # (verify.py); the lower score counts and disagreements are flagged. Records are saved again.
        unverified = [r for r in results.values() if not r.verified]
        if unverified:
            print(f"[grade] verification pass on {len(unverified)} submissions", file=stdout, flush=True)
            progress = Progress(len(unverified), stream=stderr)
            verify_results(unverified, autograder_zip, jobs=jobs, on_result=on_result_verified)
    finally:
        progress.close()
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)

    records = [Record(p.name, keys[p], results[p]) for p in subs]
    write_atomic(out_dir / "grades.csv", grades_csv(records, questions))
    possible = points_per_question(records, questions)
    names = feedback_names([r.file for r in records])
    for r in records:
        write_atomic(out_dir / "feedback" / names[r.file], feedback_markdown(r, possible))
    print(summary_text(records, questions, len(todo), len(previous), time.monotonic() - start), file=stdout)
    print(f"[grade] wrote {out_dir / 'grades.csv'} and {len(records)} feedback files in {out_dir / 'feedback'}",
          file=stdout, flush=True)
    return 0
