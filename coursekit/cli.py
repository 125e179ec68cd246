"""Command line: python -m coursekit <command> ... (the Makefile's targets call these)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import build


def _release(args) -> int:
    start = time.monotonic()
    only = tuple(q.strip() for q in args.only.split(",")) if args.only else ()
    if only and args.out is None:
        raise SystemExit("--only makes a partial build: give --out DIR so the repository's releases stay whole")
    build.build(build.Assignment(args.assignment, only=only), out_root=args.out, execute_solutions=not args.no_execute)
    print(f"[build] done in {time.monotonic() - start:.1f} s")
    return 0


def _grade(args) -> int:
    from . import ta_grade

    memory = None if args.memory_limit is None else int(args.memory_limit * (1 << 30))
    try:
        return ta_grade.run(args.submissions, args.out, autograder_zip=args.autograder, jobs=args.jobs,
                            timeout=args.timeout, force=args.force, memory_limit=memory)
    except KeyboardInterrupt:
        print(f"\n[grade] interrupted: the submissions graded so far are kept in {args.out / 'results'}; "
              "run the same command again to grade the rest.", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("release", help="regenerate student/, solutions/, autograder/ from assignments/")
    p.add_argument("assignment", nargs="?", default="hw07")
    p.add_argument("--out", type=Path, default=None,
                   help="write the releases under this folder instead of the repository (for trial builds)")
    p.add_argument("--only", default="", help="comma-separated question ids for a partial trial build, e.g. q2,q6")
    p.add_argument("--no-execute", action="store_true", help="do not run the solution notebook (faster, no figures)")
    p.set_defaults(func=_release)

    p = sub.add_parser("grade", help="grade a folder of submissions (.ipynb, .zip) with the built autograder",
                       description="Grade every .ipynb and .zip in SUBMISSIONS with the autograder zip; write "
                                   "OUT/grades.csv, OUT/feedback/, OUT/results/. Resumable: submissions already "
                                   "graded with the same autograder are skipped unless --force.")
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR")
    p.add_argument("--out", type=Path, required=True, metavar="OUT_DIR")
    p.add_argument("--autograder", type=Path, default=None,
                   help="autograder zip (default: autograder/hw07/hw07-autograder.zip of this repository)")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: all cores)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per submission (default 300)")
    p.add_argument("--memory-limit", type=float, default=None, metavar="GIB",
                   help="address-space limit per grading kernel in GiB (default: a share of RAM, 2-8 GiB; 0: none)")
    p.add_argument("--force", action="store_true", help="grade again submissions that already have a result")
    p.set_defaults(func=_grade)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
