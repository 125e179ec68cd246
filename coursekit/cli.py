"""Command line: `coursekit <command> ...` (or `python -m coursekit`; the Makefile's targets call these)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import REPO_ROOT, build


def _names(requested: list[str], root: Path) -> list[str]:
    """The requested assignments, or every one under root/assignments/."""
    known = build.assignment_names(root)
    unknown = [n for n in requested if n not in known]
    if unknown:
        raise SystemExit(f"no assignment {unknown[0]!r} in {root / 'assignments'} (there: {', '.join(known) or 'none'})")
    return requested or known


def _only_one(name: str | None, root: Path) -> str:
    """The named assignment, or the only one there is."""
    if name:
        return _names([name], root)[0]
    known = build.assignment_names(root)
    if len(known) != 1:
        raise SystemExit(f"say which assignment: --hw NAME (one of {', '.join(known) or 'none'})")
    return known[0]


def _release(args) -> int:
    from . import validate

    names = _names(args.assignments, args.root)
    only = tuple(q.strip() for q in args.only.split(",")) if args.only else ()
    if only and (args.out is None or len(names) != 1):
        raise SystemExit("--only makes a partial build of one assignment: name it and give --out DIR, "
                         "so the repository's releases stay whole")
    try:
        for name in names:
            start = time.monotonic()
            build.build(build.Assignment(name, root=args.root, only=only), out_root=args.out,
                        execute_solutions=not args.no_execute)
            print(f"[build] {name} done in {time.monotonic() - start:.1f} s")
    except (build.BuildError, validate.ValidationError) as exc:  # validation and otter errors name file:line; the traceback adds nothing
        print(f"[build] {exc}", file=sys.stderr)
        return 1
    return 0


def _validate(args) -> int:
    from . import validate

    status = 0
    for name in _names(args.assignments, args.root):
        try:
            questions = validate.validate(build.Assignment(name, root=args.root))
        except validate.ValidationError as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            status = 1
        else:
            print(f"{name}: {len(questions)} questions, "
                  f"{sum(q.config['points'] for q in questions):g} points, no problems")
    return status


def _new(args) -> int:
    from . import scaffold

    folder = scaffold.new_assignment(args.name, root=args.root)
    print(f"created {folder}\nnext: coursekit release {args.name} --out /tmp/{args.name}-trial   "
          f"(then `make release HW={args.name}` and `make test HW={args.name}`)")
    return 0


def _report(args) -> int:
    from . import report

    return report.main(args.out_dir) or 0


def _grade(args) -> int:
    from . import batch

    name = _only_one(args.hw, REPO_ROOT) if args.autograder is None else args.hw
    autograder = args.autograder or build.Assignment(name).autograder_zip()
    ids = REPO_ROOT / "assignments" / name / "misconceptions" / "ids.yaml" if name else None
    try:
        return batch.run(args.submissions, args.out, autograder, jobs=args.jobs, timeout=args.timeout,
                         memory_gib=args.memory_limit, force=args.force, otter_pass=args.otter_pass,
                         use_sandbox=not args.no_sandbox, misconceptions=ids)
    except KeyboardInterrupt:
        print(f"\n[grade] interrupted: the submissions graded so far are kept in {args.out / 'records'}; "
              "run the same command again to grade the rest.", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coursekit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    root_help = "repository root holding assignments/ (default: this repository)"

    p = sub.add_parser("release", help="regenerate student/, solutions/, autograder/ from assignments/")
    p.add_argument("assignments", nargs="*", metavar="NAME", help="assignments to build (default: all)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the releases under this folder instead of the repository (for trial builds)")
    p.add_argument("--only", default="", help="comma-separated question ids for a partial trial build, e.g. q2,q6")
    p.add_argument("--no-execute", action="store_true", help="do not run the solution notebook (faster, no figures)")
    p.add_argument("--root", type=Path, default=REPO_ROOT, help=root_help)
    p.set_defaults(func=_release)

    p = sub.add_parser("validate", help="check the masters (points, names, hidden tests, catalogues) without building")
    p.add_argument("assignments", nargs="*", metavar="NAME", help="assignments to check (default: all)")
    p.add_argument("--root", type=Path, default=REPO_ROOT, help=root_help)
    p.set_defaults(func=_validate)

    p = sub.add_parser("new", help="scaffold assignments/NAME/ with one example question that builds and grades")
    p.add_argument("name", help="the assignment's name, e.g. hw08 (letters, digits, underscores)")
    p.add_argument("--root", type=Path, default=REPO_ROOT, help=root_help)
    p.set_defaults(func=_new)

    p = sub.add_parser("report", help="the class report from a grading run's OUT folder")
    p.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    p.set_defaults(func=_report)

    p = sub.add_parser("grade", help="grade a folder of submissions (.ipynb, .zip): sandboxed, judged from outside",
                       description="Grade every file in SUBMISSIONS_DIR: each notebook runs in a bubblewrap sandbox and "
                                   "an examiner process that never runs student code calls its functions and "
                                   "computes the grade. Writes OUT/grades.csv, OUT/feedback/, OUT/records/ (signed) "
                                   "and OUT/report.html. Resumable: submissions already graded with the same "
                                   "autograder are kept unless --force.")
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR")
    p.add_argument("--out", type=Path, required=True, metavar="OUT_DIR")
    p.add_argument("--hw", default=None, metavar="NAME",
                   help="the assignment: grades with autograder/NAME/NAME-autograder.zip (default: the only one)")
    p.add_argument("--autograder", type=Path, default=None, help="an autograder zip to use instead of --hw's")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: all cores)")
    p.add_argument("--timeout", type=float, default=300, help="wall-clock seconds per submission (default 300)")
    p.add_argument("--memory-limit", type=float, default=None, metavar="GIB",
                   help="memory limit per sandbox in GiB (default 6)")
    p.add_argument("--otter-pass", action=argparse.BooleanOptionalAction, default=False,
                   help="also run otter's own in-kernel pass, sandboxed, for the otter_total cross-check column "
                        "(about doubles the CPU per submission; default: off)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade without bubblewrap (student code then runs as you, unconfined); every row is flagged")
    p.add_argument("--force", action="store_true", help="grade again submissions that already have a result")
    p.set_defaults(func=_grade)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
