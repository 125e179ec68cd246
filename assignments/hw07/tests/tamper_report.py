"""Print the attack corpus table: per attack, the grade, otter's in-kernel column and the flags.

    PYTHONPATH=tests .venv/bin/python assignments/hw07/tests/tamper_report.py [--only id,...] [--no-otter-pass] [--settle 30]

Every notebook is the base (known wrong answers, attack_corpus.py beside this file) plus one attack, graded in one
`python -m coursekit grade` batch with the base and two honest classmates, after those three were graded
alone. Figures only; test_attacks.py beside it asserts the same conditions.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import attack_corpus as ac  # noqa: E402
from test_attacks import QUESTIONS, attack_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated attack ids (default: the whole corpus)")
    parser.add_argument("--no-otter-pass", action="store_true", help="grade without otter's in-kernel pass")
    parser.add_argument("--settle", type=float, default=0, help="seconds to wait before checking OUT again")
    args = parser.parse_args()
    attacks = [a for a in args.only.split(",") if a] or ac.ATTACK_IDS
    with tempfile.TemporaryDirectory(prefix="attacks-") as tmp:
        run = attack_run(Path(tmp), attacks, otter_pass=not args.no_otter_pass, settle_s=args.settle)
        honest = run.alone_row("base.ipynb")
        print(f"honest base: {honest['total']} / {honest['possible']} (graded alone)\n")
        print(f"{'attack':28s} {'kind':10s} {'status':10s} {'grade':>6s} {'otter':>6s}  {'pays?':5s} flags")
        for attack in attacks:
            row = run.row(f"attack-{attack}.ipynb")
            above = [q for q in QUESTIONS if float(row[q] or 0) > float(honest[q] or 0) + 1e-9]
            print(f"{attack:28s} {ac.BY_ID[attack].kind:10s} {row['status']:10s} {row['total'] or '-':>6s} "
                  f"{row['otter_total'] or '-':>6s}  {'YES ' + ','.join(above) if above else 'no':5s} "
                  f"{row['flags'][:70]}")
        changed = [n for n, r in run.roles.items() if (r == "base" or r.startswith("classmate:"))
                   and run.row(n) != run.alone_row(n)]
        print(f"\nbatch: exit {run.batch.returncode}, {len(run.batch.rows)} rows for {len(run.roles)} files, "
              f"{run.batch.seconds:.0f} s ({len(run.roles)} notebooks, 2 jobs)")
        print(f"classmates' rows changed: {changed or 'none'}")
        print(f"processes left: {len(run.leftovers)}; files dropped outside: {len(run.dropped)}; "
              f"SUBMISSIONS unchanged: {run.subs_after == run.subs_before}; "
              f"OUT unchanged after {args.settle:g} s: {run.out_later == run.out_at_return}")
        for line in run.leftovers[:10] + run.dropped[:10]:
            print("  ", line)


if __name__ == "__main__":
    main()
