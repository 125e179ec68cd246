"""Hidden checks for Homework 7, one module per question (q2.py, q3.py, ...).

Shipped only in the autograder zip. Each `check_*` function takes the
student's objects, raises `CheckFailure` (an AssertionError) whose message
names the mistake in the handout's words, and returns None when it passes.
The hidden test cells of the master call these functions; tests/ calls them
directly as well.
"""

# Modules the examiner's sandbox may import (the rest exists only in the examiner): what the checks
# hand to student code (fixtures) and the memory probe its procedures use.
SANDBOX_MODULES = ("fixtures", "_probe", "memprobe")
