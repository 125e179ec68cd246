"""TRUSTED SIDE: the one place that touches otter-grader's private API (7.0.0 only).

* reading the autograder's test files into questions and test cases, with
  otter's own point arithmetic (`ExceptionTestFile`);
* scoring a question the way otter does (all-or-nothing or per case);
* reading the results.json that otter's own pass writes (Gradescope layout).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_OTTER = "7.0.0"


class OtterVersionError(RuntimeError):
    pass


def require_supported_otter() -> None:
    import otter

    if otter.__version__ != SUPPORTED_OTTER:
        raise OtterVersionError(
            f"coursekit's grading reads otter-grader's test files through its private API, written for "
            f"otter-grader {SUPPORTED_OTTER}; this environment has {otter.__version__}. Install the pinned version "
            f"(pip install otter-grader=={SUPPORTED_OTTER}) or update coursekit/otter_adapter.py.")


@dataclass(frozen=True)
class TestCase:
    question: str
    name: str              # the test function's name
    points: float
    hidden: bool
    params: tuple[str, ...]
    function: object       # the test function itself (trusted: it comes from our autograder zip)


@dataclass(frozen=True)
class Question:
    name: str
    all_or_nothing: bool
    cases: tuple[TestCase, ...]

    @property
    def possible(self) -> float:
        return float(sum(c.points for c in self.cases))

    def score(self, passed: dict[str, bool]) -> float:
        """otter's rule: the sum of the passed cases' points, or all-or-nothing when the file says so."""
        if self.all_or_nothing:
            return self.possible if all(passed.get(c.name, False) for c in self.cases) else 0.0
        return float(sum(c.points for c in self.cases if passed.get(c.name, False)))


def load_questions(tests_dir: Path) -> list[Question]:
    require_supported_otter()
    from otter.test_files.exception_test import ExceptionTestFile

    questions = []
    for path in sorted(Path(tests_dir).glob("*.py")):
        test_file = ExceptionTestFile.from_file(str(path))
        cases = []
        for tc in test_file.test_cases:
            fn = tc.body.test_func
            cases.append(TestCase(test_file.name, fn.__name__, float(tc.points or 0.0), bool(tc.hidden),
                                  tuple(inspect.signature(fn).parameters), fn))
        questions.append(Question(test_file.name, bool(test_file.all_or_nothing), tuple(cases)))
    return questions


def otter_question_scores(results: object) -> dict[str, float]:
    """Per-question scores from otter's results.json (Gradescope layout); malformed parts are skipped."""
    scores: dict[str, float] = {}
    tests = results.get("tests") if isinstance(results, dict) else None
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or test.get("name") == "Public Tests":
            continue
        score = test.get("score")
        if isinstance(test.get("name"), str) and isinstance(score, (int, float)) and not isinstance(score, bool):
            scores[test["name"][:100]] = float(score)
    return scores
