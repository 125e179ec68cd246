"""Attacks on the grader do not pay, do not touch classmates, and do not outlive or topple the batch.

Each attack notebook (attack_corpus.py) is a base with known wrong answers plus one technique. The
base and two honest full-mark classmates are first graded alone; then everything is graded in ONE batch
through `python -m coursekit grade`, as a TA runs it. Pass conditions (issue 9):
- no attack scores above the base's honest score, per question and in total;
- the base's and the classmates' rows are exactly what they were when graded alone;
- the batch completes: exit 0 and a row for every file;
- no process of the batch is left when the command returns;
- nothing is written outside the sandboxes (SUBMISSIONS unchanged, no dropped files), nothing leaks into
  OUT (classmates' canaries, hidden checks, the MAC key);
- OUT is byte-identical 30 s later (full corpus only).
The default suite grades a representative subset (FAST, no otter pass) and the attacks on otter's own pass
(OTTER, otter pass on); `-m slow` grades the whole corpus with the otter pass on.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import attack_corpus as ac
from grade_cli import (Batch, Release, check_csv_cells, grade, kill_leftovers, leftover_processes, question_names,
                       sha256_file, tree_digest)

RELEASE = Release.of(ac.ASSIGNMENT)
QUESTIONS = question_names(RELEASE.autograder)


@dataclass
class Run:
    roles: dict[str, str]          # file name -> base | classmate:<canary> | attack id
    shas: dict[str, str]           # file name -> sha256 of what was submitted
    alone: Batch                   # base and classmates graded on their own
    batch: Batch                   # everyone together
    subs_before: str
    subs_after: str
    leftovers: list[str]
    dropped: list[str]             # files the attacks managed to write outside their sandbox
    ctx: ac.Context
    out_at_return: str             # digest of OUT when the command returned ...
    out_later: str                 # ... and `settle_s` later

    def row(self, name: str) -> dict:
        return self.batch.row_for_sha(self.shas[name])

    def alone_row(self, name: str) -> dict:
        return self.alone.row_for_sha(self.shas[name])


def _dropped_files(ctx: ac.Context) -> list[str]:
    folders = ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), ctx.repo, RELEASE.solution.parent,
               RELEASE.autograder.parent, ctx.subs, ctx.out, ctx.out / "records", ctx.subs.parent, "/"]
    return sorted({p for f in folders for p in glob.glob(f"{f}/cka-{ctx.tag}-*")})


def attack_run(root: Path, attacks: list[str], otter_pass: bool, settle_s: float = 0, classmates: int = 2) -> Run:
    ctx = ac.Context(subs=root / "submissions", out=root / "out", tag=uuid.uuid4().hex[:6])
    roles = ac.write_corpus(ctx.subs, RELEASE.solution, ctx, attacks, classmates)
    shas = {name: sha256_file(ctx.subs / name) for name in roles}
    alone_subs = root / "alone"
    alone_subs.mkdir()
    for name, role in roles.items():
        if role == "base" or role.startswith("classmate:"):
            shutil.copy2(ctx.subs / name, alone_subs / name)
    alone = grade(alone_subs, root / "alone-out", RELEASE.name, otter_pass=otter_pass)
    assert alone.returncode == 0 and len(alone.rows) == len(list(alone_subs.iterdir())), alone.explain()

    subs_before = tree_digest(ctx.subs)
    batch = grade(ctx.subs, ctx.out, RELEASE.name, otter_pass=otter_pass, tag=ctx.tag)
    marks = (f"cka-{ctx.tag}",)      # the attacks' process names and command lines
    leftovers = leftover_processes(batch, marks)
    out_at_return = tree_digest(ctx.out)
    time.sleep(settle_s)  # a daemon that escaped would rewrite OUT or SUBMISSIONS now
    out_later, subs_after = tree_digest(ctx.out), tree_digest(ctx.subs)
    kill_leftovers(batch, marks)                          # clean up (by pid) before asserting anything
    dropped = _dropped_files(ctx)
    for path in dropped:
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
    return Run(roles, shas, alone, batch, subs_before, subs_after, leftovers, dropped, ctx, out_at_return, out_later)


# ----------------------------------------------------------------------------- assertions shared by every run


def assert_batch_completes(run: Run) -> None:
    assert run.batch.returncode == 0, run.batch.explain()
    missing = [n for n in run.roles if run.shas[n] not in run.batch.records_by_sha()]
    assert not missing, f"no record for {missing}\n{run.batch.explain()}"
    assert len(run.batch.rows) == len(run.roles), [r["file"] for r in run.batch.rows]
    for name in run.roles:
        assert (run.ctx.out / "feedback" / f"{run.batch.records_by_sha()[run.shas[name]]['id']}.md").exists(), name


def assert_scores_at_most_honest(run: Run, attack: str) -> None:
    honest = run.alone_row("base.ipynb")
    row = run.row(f"attack-{attack}.ipynb")
    allowed = (honest["possible"],) if row["status"] == "graded" else (honest["possible"], "", "0")
    assert row["possible"] in allowed, f"{attack}: possible {row['possible']}; points come from the autograder zip"
    above = {q: (row[q], honest[q]) for q in QUESTIONS if float(row[q] or 0) > float(honest[q] or 0) + 1e-9}
    assert not above, f"{attack} scored above the honest base on {above}; flags: {row['flags']}"
    assert float(row["total"] or 0) <= float(honest["total"]) + 1e-9, (attack, row["total"], honest["total"])


def assert_classmates_unchanged(run: Run) -> None:
    for name, role in run.roles.items():
        if role == "base" or role.startswith("classmate:"):
            assert run.row(name) == run.alone_row(name), f"{name}'s row changed when graded with the attacks"
    assert run.alone_row("classmate-0.ipynb")["status"] == "graded"
    assert float(run.alone_row("classmate-0.ipynb")["total"]) == float(run.alone_row("classmate-0.ipynb")["possible"])
    assert float(run.alone_row("base.ipynb")["total"]) < float(run.alone_row("base.ipynb")["possible"])


def assert_isolated(run: Run) -> None:
    assert not run.leftovers, f"processes outlived `coursekit grade`: {run.leftovers}"
    assert run.subs_after == run.subs_before, "SUBMISSIONS changed while grading (or after)"
    assert not run.dropped, f"files written outside the sandboxes: {run.dropped}"


def assert_nothing_leaked(run: Run) -> None:
    """Classmates' canaries and the MAC key appear nowhere in OUT (but the owner's own files); hidden check
    source appears neither in what students read nor in what a sandbox printed."""
    out = run.ctx.out
    key = (out / ".key").read_bytes().strip() if (out / ".key").exists() else b""
    secrets = [key, key.hex().encode()] if key else []
    hidden = [m.encode() for m in ac.HIDDEN_MARKERS]
    canaries = {role.split(":", 1)[1].encode(): run.batch.records_by_sha()[run.shas[name]]["id"]
                for name, role in run.roles.items() if role.startswith("classmate:")}
    for path in out.rglob("*"):
        if not path.is_file() or path.name == ".key":
            continue
        data = path.read_bytes()
        leaked = [s[:16] for s in secrets if s in data]
        leaked += [c for c, owner in canaries.items() if c in data and path.stem != owner]
        if path.parent.name == "feedback":
            leaked += [m for m in hidden if m in data]
        elif path.parent.name == "records" and path.suffix == ".json":
            output = str(json.loads(data).get("output", "")).encode()
            leaked += [m for m in hidden if m in output]
        assert not leaked, f"{path.relative_to(out)} contains {leaked}"


def assert_csv_escaped(run: Run) -> None:
    assert not check_csv_cells(run.batch.rows)


# ----------------------------------------------------------------------------- default suite: a representative subset


@pytest.fixture(scope="module")
def fast(tmp_path_factory) -> Run:
    return attack_run(tmp_path_factory.mktemp("attacks"), ac.FAST, otter_pass=False)


def test_fast_batch_completes(fast):
    assert_batch_completes(fast)


@pytest.mark.parametrize("attack", ac.FAST)
def test_fast_attack_does_not_pay(fast, attack):
    assert_scores_at_most_honest(fast, attack)


def test_fast_classmates_unchanged(fast):
    assert_classmates_unchanged(fast)


def test_fast_isolation(fast):
    assert_isolated(fast)


def test_fast_nothing_leaked(fast):
    assert_nothing_leaked(fast)
    assert_csv_escaped(fast)


@pytest.fixture(scope="module")
def otter_run(tmp_path_factory) -> Run:
    return attack_run(tmp_path_factory.mktemp("otter-attacks"), ac.OTTER, otter_pass=True, classmates=1)


@pytest.mark.slow  # the default suite checks otter's pass on the release (tests/test_release.py)
def test_attacks_on_otters_pass_move_only_its_column_and_are_flagged(otter_run):
    assert_batch_completes(otter_run)
    assert_classmates_unchanged(otter_run)
    for attack in ac.OTTER:
        assert_scores_at_most_honest(otter_run, attack)
        row = otter_run.row(f"attack-{attack}.ipynb")
        if row["otter_total"] not in ("", None) and float(row["otter_total"]) != float(row["total"] or 0):
            assert row["flags"], f"{attack}: otter's pass says {row['otter_total']}, the grade {row['total']}, no flag"
    honest = otter_run.alone_row("classmate-0.ipynb")
    assert honest["otter_total"] not in ("", None), "the otter pass ran: its column is filled"
    assert float(honest["otter_total"]) == float(honest["total"]) and not honest["flags"]


# ----------------------------------------------------------------------------- slow: the whole corpus


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Run:
    return attack_run(tmp_path_factory.mktemp("all-attacks"), ac.ATTACK_IDS, otter_pass=True, settle_s=30)


@pytest.mark.slow
def test_full_corpus_completes_and_isolates(full):
    assert_batch_completes(full)
    assert_classmates_unchanged(full)
    assert_isolated(full)
    assert_nothing_leaked(full)
    assert_csv_escaped(full)


@pytest.mark.slow
@pytest.mark.parametrize("attack", ac.ATTACK_IDS)
def test_full_attack_does_not_pay(full, attack):
    assert_scores_at_most_honest(full, attack)


@pytest.mark.slow
def test_out_is_byte_identical_30_seconds_later(full):
    """The corpus's daemon waits 8 s, then rewrites OUT and SUBMISSIONS every 2 s for two minutes."""
    assert full.out_later == full.out_at_return, "OUT changed in the 30 s after `coursekit grade` returned"
