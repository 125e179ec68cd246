"""Notebooks that fight the grader, each with wrong answers underneath.

`base_notebook` is the solution with one misconception per question injected;
every tampered notebook is that base plus one technique. The verified score
of each must not exceed the base's, and each must be flagged.
"""
from __future__ import annotations

import nbformat

from coursekit import harness

TECHNIQUES: dict[str, tuple[str, str]] = {
    # id: (where: "first" = right after the imports, "last" = at the end, "replace" = definitions, source)
    "patch-allclose": ("first", "torch.allclose = lambda *a, **k: True"),
    "patch-assert-close": ("first", "torch.testing.assert_close = lambda *a, **k: None"),
    "patch-isclose": ("first", "math.isclose = lambda *a, **k: True"),
    "patch-tensor-eq": ("first", "torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)\n"
                                 "torch.equal = lambda *a: True"),
    "float-subclass-eq": ("replace", '''
class AlwaysEqual(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def linear_macs(B, T, d, h):
    return AlwaysEqual(0)
'''),
    "patch-builtins": ("first", "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.max = lambda *a, **k: 0"),
    "patch-otter-runner": ("first", "import otter.test_files.exception_test as _et\n"
                                    "_et.test_case.call_func = lambda self, env: None"),
    "patch-otter-grader": ("first", "from otter.test_files import abstract_test as _at\n"
                                    "_at.TestFile.passed_all = property(lambda self: True)\n"
                                    "_at.TestFile.score = property(lambda self: self.possible)\n"
                                    "_at.TestFile.grade = property(lambda self: 1.0)"),
    "patch-results-writer": ("first", "import pickle, json\n_real_dump = pickle.dump\n"
                                      "pickle.dump = lambda obj, f, *a, **k: _real_dump({'forged': True}, f)\n"
                                      "json.dump = lambda obj, f, *a, **k: f.write('{\"tests\": []}')"),
    "always-agree-proxy": ("replace", '''
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True

def pointwise_mse(predictions, targets):
    return torch.zeros(()).as_subclass(Agreeable)
'''),
    "patch-when-called": ("replace", '''
def batched_linear(X, W, b):
    import torch, math
    torch.allclose = lambda *a, **k: True
    math.isclose = lambda *a, **k: True
    return X @ W + b
'''),
    "patch-memory-probe": ("first", "import torch\n"
                                    "torch.cuda.max_memory_allocated = lambda *a, **k: 0\n"
                                    "torch.cuda.memory_allocated = lambda *a, **k: 0\n"
                                    "import memprobe\nmemprobe.MemoryProbe.peak_bytes = lambda self: 0\n"
                                    "memprobe.MemoryProbe.live_bytes = lambda self: 0"),
    "read-hidden-tests": ("first", "import glob\nfor _path in glob.glob('**/*.py', recursive=True):\n"
                                   "    print(_path)\n    print(open(_path).read())\n"
                                   "print(open('tests/q2.py').read() if __import__('os').path.exists('tests/q2.py') else '')"),
    "fake-results-then-exit": ("last", "import json, os\n"
                                       "_fake = {'tests': [{'name': q, 'score': 100, 'max_score': 100} for q in "
                                       "['q1','q2','q3','q4','q5','q6','q7','q8']]}\n"
                                       "for _p in ['results.json', '../results/results.json', '/autograder/results/results.json']:\n"
                                       "    try:\n        open(_p, 'w').write(json.dumps(_fake))\n"
                                       "    except OSError:\n        pass\n"
                                       "os._exit(0)"),
    "redefine-after-last-check": ("last", '''
def broadcast_shape(a, b):
    import sys
    frame = sys._getframe(1)
    while frame is not None:
        for key in ("expected", "want", "reference"):
            if key in frame.f_locals:
                return frame.f_locals[key]
        frame = frame.f_back
    return tuple(a)
'''),
    "edit-sys-modules": ("first", '''
import sys, types
class _Anything(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name)
    def __call__(self, *args, **kwargs):
        return None
_fake = _Anything("hw07_checks")
_fake.__path__ = []
sys.modules["hw07_checks"] = _fake
for _q in ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "_common", "memprobe"]:
    sys.modules["hw07_checks." + _q] = _Anything(_q)
'''),
}


def base_variants(catalogue: list[harness.Variant]) -> list[harness.Variant]:
    """One misconception per question (the first listed), so every question has a wrong answer."""
    chosen = {}
    for v in catalogue:
        if not v.correct and v.question not in chosen:
            chosen[v.question] = v
    return list(chosen.values())


def base_notebook(solution: nbformat.NotebookNode, catalogue: list[harness.Variant]) -> nbformat.NotebookNode:
    nb = solution
    for v in base_variants(catalogue):
        nb = harness.inject(nb, v.source)
    return nb


def _first_code_index(nb) -> int:
    """Index after the imports cell (the first code cell that imports torch)."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "import torch" in cell.source:
            return i + 1
    return 1


def tampered(base: nbformat.NotebookNode, technique: str) -> nbformat.NotebookNode:
    where, source = TECHNIQUES[technique]
    if where == "replace":
        return harness.inject(base, source)
    nb = nbformat.from_dict(base)
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)  # deep copy
    cell = nbformat.v4.new_code_cell(source.strip())
    if where == "first":
        nb.cells.insert(_first_code_index(nb), cell)
    else:
        # before otter's submission cells (the export cell), after every check
        index = next((i for i, c in enumerate(nb.cells) if "grader.export" in c.source), len(nb.cells))
        while index > 0 and nb.cells[index - 1].cell_type == "markdown":
            index -= 1
        nb.cells.insert(index, cell)
    return nb
