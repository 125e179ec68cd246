"""coursekit: build, grade and check autograded assignments (assignments/<name>/).

Modules:
  master      authored master sources (jupytext percent format) -> cells with file:line
  validate    build-time checks of a master (points, names, hidden tests, catalogues)
  build       master -> otter assign -> normalized student/, solutions/, autograder/
  scaffold    `coursekit new NAME`: a new assignment with one example question
  progress    progress bars (tqdm) for long loops
  grading     grade notebooks with the built autograder (real otter code)
  harness     misconception harness: inject buggy variants, grade, report
  cli         `coursekit ...` (or `python -m coursekit ...`)
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS_DIR = REPO_ROOT / "assignments"
