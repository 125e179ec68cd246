"""coursekit: build, grade and check the Handout #7 assignment package.

Modules:
  percent     authored master sources (jupytext percent format) <-> notebooks
  build       master -> otter assign -> normalized student/, solutions/, autograder/
  grading     grade notebooks with the built autograder (real otter code)
  harness     misconception harness: inject buggy variants, grade, report
  cli         `python -m coursekit ...`
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS_DIR = REPO_ROOT / "assignments"
