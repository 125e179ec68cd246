"""Misconception harness: grade buggy (and correct alternative) variants of the solution.

A `Variant` is replacement source for one or more top-level names of the
solution notebook (functions or constants). `inject` swaps those definitions
in the solution notebook; `grade_variants` grades the resulting notebooks with
the built autograder exactly as `make grade` does (`batch.grade_notebooks`:
sandboxed notebooks, the examiner's checks) and reports, per variant, its question's score and failure output.

Variants of different questions are packed into one notebook to save kernel
starts; every question without a variant in that notebook must keep full
marks, or the harness raises (the variants would be interfering). A variant
that changes process-wide state (autograd left disabled, say) is marked
`isolated` and graded alone.

Catalogues live next to the assignment: assignments/<hw>/misconceptions/qN.py,
each defining VARIANTS = [Variant(...), ...]. `make test Q=q6` (or `pytest -k q6`)
restricts load_catalogue to q6's variants through COURSEKIT_QUESTIONS.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the catalogue side (Variant, read_catalogue) needs only the standard library
    import nbformat

    from .build import Assignment


@dataclass(frozen=True)
class Variant:
    id: str                 # "M9", or a short name for a correct alternative ("einsum")
    question: str           # "q2"
    source: str             # replacement definitions
    expect: tuple[str, ...] = ()   # fragments the failure output must contain (case-insensitive)
    correct: bool = False   # True: a correct alternative that must keep full marks
    note: str = ""          # what the mistake is, in a few words
    isolated: bool = False  # changes process-wide state (e.g. leaves autograd off): graded in its own notebook

    @property
    def names(self) -> list[str]:
        return defined_names(self.source)


@dataclass
class VariantResult:
    variant: Variant
    score: float
    max_score: float
    output: str
    status: str = "ok"
    other_questions: dict[str, tuple[float, float]] = field(default_factory=dict)
    misconceptions: list[str] = field(default_factory=list)   # ids the failed tests reported
    flags: list[str] = field(default_factory=list)

    @property
    def expected_id(self) -> str | None:
        """The misconception id a wrong variant must be reported under: its id's prefix (M16 of "M16-views")."""
        head = self.variant.id.split("-")[0]
        return head if not self.variant.correct and re.fullmatch(r"M\d+", head) else None

    @property
    def lost_points(self) -> bool:
        return self.score < self.max_score - 1e-9

    def missing_fragments(self) -> list[str]:
        text = self.output.lower()
        return [f for f in self.variant.expect if f.lower() not in text]


class InjectionError(ValueError):
    pass


def defined_names(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _definition_spans(source: str) -> dict[str, tuple[int, int]]:
    """name -> (first line, last line), 1-based, of its top-level definition (decorators included)."""
    spans = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return spans
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        for name in defined_names(ast.unparse(node)) if not isinstance(node, ast.Expr) else []:
            spans[name] = (start, node.end_lineno)
    return spans


def _split_definitions(source: str) -> dict[str, str]:
    """Replacement source -> its text per top-level definition (imports go with the first)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    pieces, prelude = {}, []
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "\n".join(lines[start - 1:node.end_lineno])
        names = defined_names(text)
        if not names:
            prelude.append(text)
            continue
        pieces[names[0]] = "\n".join(prelude + [text])
        prelude = []
        for extra in names[1:]:
            pieces[extra] = ""
    return pieces


def inject(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """A copy of nb whose top-level definitions of the names in `source` are replaced by it.

    Names in `source` that the notebook does not define (helper classes, say) are
    inserted just before the next replaced definition (or after the last one)."""
    nb = copy.deepcopy(nb)
    pending: list[str] = []
    last_cell = None
    for name, replacement in _split_definitions(source).items():
        target = None
        for cell in nb.cells:
            if cell.cell_type == "code" and name in _definition_spans(cell.source):
                target = cell
                break
        if target is None:
            pending.append(replacement)
            continue
        span = _definition_spans(target.source)[name]
        lines = target.source.splitlines()
        new = "\n\n".join(pending + [replacement]) if pending else replacement
        target.source = "\n".join(lines[:span[0] - 1] + new.splitlines() + lines[span[1]:])
        pending, last_cell = [], target
    if pending:
        if last_cell is None:
            raise InjectionError(f"none of {defined_names(source)} is defined at top level in the solution notebook")
        last_cell.source += "\n\n" + "\n\n".join(pending)
    return nb


QUESTIONS_ENV = "COURSEKIT_QUESTIONS"  # comma-separated question ids: `make test Q=q6` sets it


def selected_questions() -> list[str] | None:
    """The questions a run is restricted to (`make test Q=q6,q7`), or None for all."""
    value = os.environ.get(QUESTIONS_ENV, "").strip()
    return [q.strip() for q in value.split(",") if q.strip()] or None


def in_selection(question: str, selection: list[str] | None) -> bool:
    """q8 selects q8a and q8b; q8a selects only q8a."""
    return selection is None or any(question == q or re.fullmatch(rf"{re.escape(q)}[a-z]", question)
                                    for q in selection)


def read_catalogue_file(path: Path) -> list[Variant]:
    """The VARIANTS of one catalogue file (misconceptions/qN.py)."""
    spec = importlib.util.spec_from_file_location(f"_catalogue_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.VARIANTS)


def read_catalogue(folder: Path, questions: list[str] | None = None) -> list[Variant]:
    """Every Variant in folder/q*.py (optionally only those of `questions`; q8 selects q8a, q8b)."""
    variants = []
    for path in sorted(Path(folder).glob("*.py")):
        if not path.name.startswith("_"):
            variants.extend(v for v in read_catalogue_file(path) if in_selection(v.question, questions))
    ids = [(v.question, v.id) for v in variants]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"duplicate variant ids: {sorted(duplicates)}")
    return variants


def load_catalogue(assignment: Assignment, questions: list[str] | None = None) -> list[Variant]:
    """The assignment's catalogue; without `questions`, the run's selection (`make test Q=...`) applies."""
    return read_catalogue(assignment.source_dir / "misconceptions",
                          questions if questions is not None else selected_questions())


def pack(variants: list[Variant]) -> list[list[Variant]]:
    """Groups with at most one variant per question and no name replaced twice."""
    groups: list[list[Variant]] = []
    for v in variants:
        if v.isolated:
            groups.append([v])
            continue
        for group in groups:
            if not any(g.isolated for g in group) and all(v.question != g.question and not set(v.names) & set(g.names) for g in group):
                group.append(v)
                break
        else:
            groups.append([v])
    return groups


def grade_variants(variants: list[Variant], solution_notebook: Path, autograder_zip: Path,
                   jobs: int | None = None, timeout: float | None = None) -> dict[tuple[str, str], VariantResult]:
    """Grade every variant exactly as `make grade` does (sandbox + examiner); keyed by (question, id)."""
    import nbformat

    from .batch import grade_notebooks

    base = nbformat.read(solution_notebook, as_version=4)
    groups = pack(variants)
    with tempfile.TemporaryDirectory(prefix="variants-") as tmp:
        paths = []
        for i, group in enumerate(groups):
            nb = base
            for v in group:
                nb = inject(nb, v.source)
            path = Path(tmp) / f"variant-{i:03d}" / solution_notebook.name
            path.parent.mkdir()
            nbformat.write(nb, path)
            paths.append(path)
        graded = grade_notebooks(paths, autograder_zip, jobs=jobs or 2, timeout=timeout or 300)

    results = {}
    for group, record in zip(groups, graded):
        touched = {v.question for v in group}
        scores = {q: (s["score"], s["possible"]) for q, s in record["questions"].items()}
        others = {q: s for q, s in scores.items() if q not in touched}
        broken = {q: s for q, s in others.items() if s[0] < s[1] - 1e-9}
        if record["status"] == "graded" and broken and not any(v.isolated for v in group):
            raise AssertionError(f"variants {[v.id for v in group]} changed the score of questions they do not "
                                 f"touch: {broken}; their questions share code, so grade them separately")
        for v in group:
            failed = [t for t in record["tests"] if t["question"] == v.question and not t["passed"]]
            output = "\n".join(f"{t['name']}: {t['message']}" for t in failed) or record.get("detail", "")
            ids = sorted({i for t in failed for i in t.get("misconceptions", [])})
            score, possible = scores.get(v.question, (0.0, 0.0))
            status = "ok" if record["status"] == "graded" else record["status"]
            results[(v.question, v.id)] = VariantResult(v, score, possible, output, status, others, ids,
                                                        list(record.get("flags", [])))
    return results
