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

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
