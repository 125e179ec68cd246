"""Correct answers written the ways students write them: each must keep full marks, unflagged.

Every style is the committed solution notebook with some graded answers rewritten in one honest style
(helper classes, dataclasses, lambdas, partials, decorators, computed globals, helpers in other cells,
closures, recursion, ...), and sometimes an extra cell of the kind students leave in (prints, plots,
a failed experiment). `write_styles(folder, solution)` writes one notebook per style and returns
{file name: Style}. Used by test_honest_styles.py; every style also scores 73/73 under plain
`otter run` (see `PYTHONPATH=tests python assignments/hw07/tests/honest_styles.py --otter`).
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit.harness import _definition_spans, inject

ASSIGNMENT = "hw07"   # the styles rewrite this assignment's graded functions


@dataclass(frozen=True)
class Style:
    id: str
    note: str
    # definitions swapped in with harness.inject; a helper the notebook lacks lands just before the next
    # replaced answer in this text, so write each helper before the first answer (in notebook order) using it
    replace: str = ""
    cells: tuple[tuple[str, str], ...] = ()    # (where, source): "before:NAME", "after:NAME", "end"


def _defining_cell(nb, name: str) -> int:
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and name in _definition_spans(cell.source):
            return i
    raise KeyError(f"no cell defines {name}")


def _export_cell(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "grader.export" in c.source)


def build(solution: nbformat.NotebookNode, style: Style) -> nbformat.NotebookNode:
    nb = inject(solution, style.replace) if style.replace.strip() else copy.deepcopy(solution)
    for where, source in style.cells:
        kind, _, name = where.partition(":")
        if kind == "end":
            index = _export_cell(nb)
        else:
            index = _defining_cell(nb, name) + (kind == "after")
        nb.cells.insert(index, nbformat.v4.new_code_cell(source.strip("\n")))
    return nb


STYLES: list[Style] = [
    Style("helper-class", "lm_loss and perplexity through a helper class with a method", replace='''
class TokenLoss:
    """Mean negative log-likelihood over the real targets."""

    def __init__(self, pad_id=None):
        self.ignore = -100 if pad_id is None else pad_id

    def __call__(self, logits, targets):
        flat_logits = logits.reshape(-1, logits.shape[-1])
        return F.cross_entropy(flat_logits, targets.reshape(-1), ignore_index=self.ignore)


def lm_loss(logits, targets, pad_id=None):
    return TokenLoss(pad_id)(logits, targets)


def perplexity(logits, targets, pad_id=None):
    with torch.no_grad():
        return math.exp(TokenLoss(pad_id)(logits, targets).item())
'''),
    Style("dataclass", "a dataclass record per phase inside memory_timeline", replace='''
from dataclasses import dataclass


@dataclass
class PhaseReading:
    phase: str
    nbytes: int

    def pair(self):
        return (self.phase, self.nbytes)


def memory_timeline(model, optimizer, batches, loss_fn):
    readings = []
    device = next(model.parameters()).device
    with MemoryProbe(device=device, track=(model, optimizer)) as probe:
        for x, y in batches:
            readings.append(PhaseReading("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            readings.append(PhaseReading("forward", probe.live_bytes()))
            loss.backward()
            readings.append(PhaseReading("backward", probe.live_bytes()))
            optimizer.step()
            readings.append(PhaseReading("step", probe.live_bytes()))
            optimizer.zero_grad(set_to_none=True)
            readings.append(PhaseReading("zero_grad", probe.live_bytes()))
            del loss
    return [r.pair() for r in readings]
'''),
    Style("frozen-dataclass-config", "a frozen dataclass holding the microbatching plan", replace='''
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MicrobatchPlan:
    size: int
    pad_id: object = None
    ignore: int = field(init=False, default=-100)

    def __post_init__(self):
        if self.pad_id is not None:
            object.__setattr__(self, "ignore", self.pad_id)

    def slices(self, n):
        return [slice(s, s + self.size) for s in range(0, n, self.size)]


def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    plan = MicrobatchPlan(micro_batch_size, pad_id)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    n_real = int((targets != plan.ignore).sum())
    total = 0.0
    for rows in plan.slices(batch.shape[0]):
        logits = model(inputs[rows])
        summed = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets[rows].reshape(-1),
                                 ignore_index=plan.ignore, reduction="sum")
        (summed / n_real).backward()
        total += summed.item()
    return total / n_real
'''),
    Style("nn-module-subclass", "checkpointed_forward through an nn.Module subclass", replace='''
class CheckpointedStack(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


def checkpointed_forward(blocks, x):
    return CheckpointedStack(blocks)(x)
'''),
    Style("callable-module-as-function", "embed and batched_linear are nn.Module instances", replace='''
class Embedder(nn.Module):
    def forward(self, token_ids, table):
        return table[token_ids]


class Affine(nn.Module):
    def forward(self, X, W, b):
        return F.linear(X, W, b)


embed = Embedder()
batched_linear = Affine()
'''),
    Style("lambdas", "one-line answers written as lambdas", replace='''
shift_for_next_token = lambda x: (x[:, :-1], x[:, 1:])
linear_macs = lambda B, T, d, h: B * T * d * h
embed = lambda token_ids, table: table[token_ids]
'''),
    Style("functools-partial", "perplexity and surprisal_bits as functools.partial of general helpers", replace='''
import functools


def _exp_of_loss(logits, targets, pad_id=None, loss=None):
    with torch.no_grad():
        return math.exp(loss(logits, targets, pad_id).item())


perplexity = functools.partial(_exp_of_loss, loss=lm_loss)


def _surprisal(logits, targets, pad_id=None, base=2.0):
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    values = -logp / math.log(base)
    keep = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return values[keep]


surprisal_bits = functools.partial(_surprisal, base=2.0)
'''),
    Style("no-grad-decorator", "@torch.no_grad() on evaluate", replace='''
@torch.no_grad()
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for xb, yb in batches:
        total += loss_fn(model(xb), yb).item() * len(xb)
        count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Style("inference-mode-decorator", "@torch.inference_mode() on worst_token and perplexity", replace='''
@torch.inference_mode()
def perplexity(logits, targets, pad_id=None):
    return math.exp(lm_loss(logits, targets, pad_id).item())


@torch.inference_mode()
def worst_token(logits, targets, pad_id=None):
    bits = -F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1) / math.log(2)
    if pad_id is not None:
        bits = bits.masked_fill(targets == pad_id, float("-inf"))
    b, t = divmod(int(bits.argmax()), targets.shape[1])
    return b, t, float(bits[b, t])
'''),
    Style("wraps-decorator", "a student's own shape-checking decorator built with functools.wraps", replace='''
import functools


def expects_last_axis(name):
    """Checks that X's last axis matches W's input size before calling the function."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(X, W, b):
            if X.shape[-1] != W.shape[-1]:
                raise ValueError(f"{name}: X has {X.shape[-1]} features, W expects {W.shape[-1]}")
            return fn(X, W, b)
        return wrapper
    return decorate


@expects_last_axis("batched_linear")
def batched_linear(X, W, b):
    return X @ W.T + b
'''),
    Style("lru-cache", "@functools.lru_cache on pure functions of hashable arguments", replace='''
from functools import lru_cache


@lru_cache(maxsize=None)
def linear_macs(B, T, d, h):
    return B * T * d * h


@lru_cache(maxsize=1024)
def broadcast_shape(a, b):
    a, b = tuple(a), tuple(b)
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)
'''),
    Style("tuple-unpacked-globals", "constants defined by tuple unpacking, used inside graded functions", replace='''
INPUTS, TARGETS = slice(None, -1), slice(1, None)
LN2, NO_PAD = math.log(2), -100


def shift_for_next_token(x):
    return x[:, INPUTS], x[:, TARGETS]


def surprisal_bits(logits, targets, pad_id=None):
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != (NO_PAD if pad_id is None else pad_id)
    return (-logp / LN2)[real]
'''),
    Style("lowercase-computed-globals", "lowercase globals computed in the notebook, read by graded functions",
          replace='''
ln2 = math.log(2)
copies_with_adam = len(["parameter", "gradient", "exp_avg", "exp_avg_sq"])


def adam_static_bytes(model):
    return sum((copies_with_adam if p.requires_grad else 1) * p.numel() * p.element_size()
               for p in model.parameters())


def worst_token(logits, targets, pad_id=None):
    nats = -F.log_softmax(logits.detach(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    bits = nats / ln2
    if pad_id is not None:
        bits = bits.masked_fill(targets == pad_id, float("-inf"))
    b, t = divmod(int(bits.argmax()), targets.shape[1])
    return b, t, float(bits[b, t])
'''),
    Style("helpers-in-other-cells", "helpers defined in an earlier cell and in a later cell", replace='''
def lm_loss(logits, targets, pad_id=None):
    flat_logits, flat_targets = flatten_for_ce(logits, targets)
    return F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore_index_for(pad_id))


def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = shift_for_next_token(batch)
    ignore = ignore_index_for(pad_id)
    n_real = count_real(targets, pad_id)
    total = 0.0
    for start in range(0, batch.shape[0], micro_batch_size):
        rows = slice(start, start + micro_batch_size)
        flat_logits, flat_targets = flatten_for_ce(model(inputs[rows]), targets[rows])
        summed = F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore, reduction="sum")
        (summed / n_real).backward()
        total += summed.item()
    return total / n_real
''', cells=(("before:shift_for_next_token", '''
# helpers for q6
def flatten_for_ce(logits, targets):
    """(B, T, V), (B, T) -> (B*T, V), (B*T,), in the same order."""
    return logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)


def ignore_index_for(pad_id):
    return -100 if pad_id is None else pad_id
'''), ("after:shift_for_next_token", '''
def count_real(targets, pad_id):
    """Real targets of a (B, T) batch: the denominator of the token-averaged loss."""
    return int((targets != ignore_index_for(pad_id)).sum())
'''))),
    Style("notebook-globals-as-defaults", "notebook objects (MemoryProbe, PARTS, OOM_CAUSES) used as defaults",
          replace='''
def memory_timeline(model, optimizer, batches, loss_fn, probe_type=MemoryProbe,
                    phases=("start", "forward", "backward", "step", "zero_grad")):
    timeline = []
    with probe_type(device=next(model.parameters()).device, track=(model, optimizer)) as probe:
        for x, y in batches:
            timeline.append((phases[0], probe.live_bytes()))
            loss = loss_fn(model(x), y)
            timeline.append((phases[1], probe.live_bytes()))
            loss.backward()
            timeline.append((phases[2], probe.live_bytes()))
            optimizer.step()
            timeline.append((phases[3], probe.live_bytes()))
            optimizer.zero_grad(set_to_none=True)
            timeline.append((phases[4], probe.live_bytes()))
            del loss
    return timeline


def _cause(word, causes=OOM_CAUSES):
    return next(c for c in causes if c.startswith(word))


OOM_CAUSE = {
    "at the first optimizer step": _cause("optimizer"),
    "late in the forward pass": _cause("saved"),
    "in backward": _cause("grad"),
}


def _part(word, parts=PARTS):
    return next(p for p in parts if p.startswith(word))


SWITCHES = {
    "model.eval()": {_part("forward")},
    "model.train()": {_part("forward")},
    "torch.no_grad()": {_part("graph")},
    "optimizer.zero_grad(set_to_none=True)": {_part("gradient")},
    "loss.backward()": {_part("gradient")},
    "optimizer.step()": {_part("parameters"), _part("optimizer")},
}
'''),
    Style("imports-inside-functions", "every import a graded function needs, made inside it", replace='''
def perplexity(logits, targets, pad_id=None):
    import math as m

    import torch.nn.functional as nnf
    ignore = -100 if pad_id is None else pad_id
    with torch.no_grad():
        loss = nnf.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore)
    return m.exp(loss.item())


def checkpointed_forward(blocks, x):
    from torch.utils.checkpoint import checkpoint as ckpt
    for block in blocks:
        x = ckpt(block, x, use_reentrant=False)
    return x
'''),
    Style("recursion", "broadcast_shape and matmul_shape written recursively", replace='''
def broadcast_shape(a, b):
    a, b = tuple(a), tuple(b)
    if not a or not b:
        return a or b
    rest = broadcast_shape(a[:-1], b[:-1])
    x, y = a[-1], b[-1]
    if x != y and 1 not in (x, y):
        raise ValueError(f"{x} and {y} do not broadcast")
    return rest + (y if x == 1 else x,)


def matmul_shape(a, b):
    a, b = tuple(a), tuple(b)
    if min(len(a), len(b)) < 2 or a[-1] != b[-2]:
        raise ValueError(f"A @ B fails for {a} and {b}")
    return broadcast_shape(a[:-2], b[:-2]) + (a[-2], b[-1])
'''),
    Style("closures-and-factories", "graded functions made by factories, closing over their settings", replace='''
def make_counter(copies_when_trained):
    def count(model):
        return sum(p.numel() * p.element_size() * (copies_when_trained if p.requires_grad else 1)
                   for p in model.parameters())
    return count


adam_static_bytes = make_counter(4)


def make_shift(offset=1):
    def shift(x):
        return x[:, :-offset], x[:, offset:]
    return shift


shift_for_next_token = make_shift(1)
'''),
    Style("generator-expressions", "sums over generator expressions; a generator inside a graded function",
          replace='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    def one(xb, yb):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(x))  # the microbatch mean, weighted by its share
        loss.backward()
        return loss.item()
    return sum(one(xb, yb) for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)))


def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            pairs = [(loss_fn(model(xb), yb).item() * len(xb), len(xb)) for xb, yb in batches]
    finally:
        model.train(was_training)
    return sum(s for s, _ in pairs) / sum(n for _, n in pairs)
'''),
    Style("prints-and-plots", "graded functions print as they go; extra cells plot and print", replace='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"train_step: loss {loss.item():.4f} on a batch of {len(x)}")
    return loss.item()


def plot_surprisal(bits, labels=None):
    heights = torch.as_tensor(bits).detach().double().tolist()
    print("plotting", len(heights), "bars")
    fig, ax = plt.subplots()
    ax.bar(range(len(heights)), heights)
    if labels is not None:
        ax.set_xticks(range(len(heights)), [str(w) for w in labels])
    ax.set_ylabel("bits")
    return fig
''', cells=(("end", '''
losses = [train_step(model, optimizer, F.mse_loss, x_train, y_train) for _ in range(5)]
plt.plot(losses, marker="o")
plt.title("my training curve")
plt.show()
print("done:", losses[-1])
'''),)),
    Style("failed-experiment-cell", "an unrelated experiment cell raises; everything else is the solution", cells=(
        ("after:train_step", '''
# trying a wider input: this fails, I know why (3 features, not 5)
wide = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
wide(torch.randn(2, 5))
'''),)),
    Style("static-methods-namespace", "shape rules as static methods of a class, exported as names", replace='''
class ShapeRules:
    @staticmethod
    def elementwise(a, b):
        a, b = tuple(a), tuple(b)
        n = max(len(a), len(b))
        a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
            raise ValueError(f"{a} and {b} do not broadcast")
        return tuple(y if x == 1 else x for x, y in zip(a, b))

    @classmethod
    def matmul(cls, a, b):
        a, b = tuple(a), tuple(b)
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            raise ValueError(f"{a} @ {b} fails")
        return cls.elementwise(a[:-2], b[:-2]) + (a[-2], b[-1])


broadcast_shape = ShapeRules.elementwise
matmul_shape = ShapeRules.matmul
'''),
    Style("custom-exception-and-match", "a ValueError subclass and a match statement", replace='''
class ShapeMismatch(ValueError):
    pass


def pointwise_mse(predictions, targets):
    def per_example(t):
        match t.dim(), tuple(t.shape[1:]):
            case 1, ():
                return t
            case 2, (1,):
                return t.squeeze(-1)
            case _:
                return None

    p, t = per_example(predictions), per_example(targets)
    if p is None or t is None or p.shape != t.shape:
        raise ShapeMismatch(f"predictions {tuple(predictions.shape)} vs targets {tuple(targets.shape)}")
    return (p - t).square().mean()
'''),
    Style("context-manager-helper", "a contextlib helper that restores the training flag", replace='''
from contextlib import contextmanager


@contextmanager
def evaluating(model):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def evaluate(model, batches, loss_fn):
    total, count = 0.0, 0
    with evaluating(model) as m:
        for xb, yb in batches:
            total += loss_fn(m(xb), yb).item() * xb.shape[0]
            count += xb.shape[0]
    return total / count
'''),
    Style("computed-answers", "q8 answers computed by helper functions, letters and sets built in code",
          replace='''
def ppl_from_nats(nats):
    return math.exp(nats)


def mean_weighted(pairs):
    return sum(n * v for n, v in pairs) / sum(n for n, _ in pairs)


Q8_UNMASKED_PPL = ppl_from_nats(mean_weighted([(60, math.log(20)), (40, -math.log(0.98))]))
Q8_N_TARGETS = sum(n - 1 for n in (9, 4, 7, 2))
Q8_ACCUMULATED_LOSS = mean_weighted([(30, 2.0), (10, 3.2)])
Q8_LOSS_NATS = 3.5 * math.log(2)
Q8_PPL_FROM_BITS = 2 ** 3.5
Q8_PADDING_DIRECTION = "B".lower()
Q8_OOM_CAUSE = "abcd"[2]
Q8_NO_SHIFT = chr(ord("a") + 1)
Q8_CORRECT_LOSSES = set("ac")
'''),
    Style("type-hints-and-keywords", "annotations, keyword-only internals, docstrings and asserts", replace='''
from typing import Optional


def shift_for_next_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    assert x.dim() == 2, "expected (B, T) token ids"
    return x[:, :-1], x[:, 1:]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: Optional[int] = None) -> torch.Tensor:
    return _masked_mean_nll(logits, targets, pad_id=pad_id)


def _masked_mean_nll(logits: torch.Tensor, targets: torch.Tensor, *, pad_id: Optional[int]) -> torch.Tensor:
    mask = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets.ne(pad_id)
    safe_targets = torch.where(mask, targets, torch.zeros_like(targets))  # any id works where masked out
    logp = F.log_softmax(logits, dim=-1).gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)
    return -(logp * mask).sum() / mask.sum()
'''),
    Style("stateful-counter-class", "a callable instance with state (counts its calls)", replace='''
class MacCounter:
    def __init__(self):
        self.calls = 0

    def __call__(self, B, T, d, h):
        self.calls += 1
        return int(B) * int(T) * int(d) * int(h)


linear_macs = MacCounter()


class Surprisal:
    bits_per_nat = 1 / math.log(2)

    def __call__(self, logits, targets, pad_id=None):
        nats = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        keep = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
        return nats[keep] * self.bits_per_nat


surprisal_bits = Surprisal()
'''),
    Style("global-star-import-cell", "names imported in an extra cell and used by graded functions",
          replace='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=cross_entropy):
    total = 0.0
    for xb, yb in zip(split(x, micro_batch_size), split(y, micro_batch_size)):
        loss = loss_fn(model(xb), yb) * (xb.shape[0] / x.shape[0])
        loss.backward()
        total += loss.item()
    return total


def accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=cross_entropy):
    model.zero_grad(set_to_none=True)
    loss = accumulate_gradients(model, x, y, micro_batch_size, loss_fn)
    optimizer.step()
    return loss
''', cells=(("before:accumulate_gradients", "from torch import split\nfrom torch.nn.functional import cross_entropy"),)),
]


def write_styles(folder: Path, solution: Path) -> dict[str, Style]:
    """One notebook per style under folder; {file name: style}."""
    folder.mkdir(parents=True, exist_ok=True)
    base = nbformat.read(str(solution), as_version=4)
    written = {}
    for i, style in enumerate(STYLES):
        name = f"{i:02d}-{style.id}.ipynb"
        nbformat.write(build(base, style), str(folder / name))
        written[name] = style
    return written


def _otter_check(folder: Path, autograder: Path) -> int:
    """Grade every style with plain `otter run` (one at a time): each must score full marks."""
    import json
    import subprocess
    import tempfile

    failures = 0
    for path in sorted(folder.glob("*.ipynb")):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([str(Path(sys.executable).parent / "otter"), "run", "-a", str(autograder), "-o", out,
                            str(path)], capture_output=True, text=True, timeout=600)
            try:
                tests = json.loads((Path(out) / "results.json").read_text())["tests"]
            except (OSError, ValueError, KeyError):
                tests = None
        lost = None if tests is None else [(t["name"], t["score"], t["max_score"]) for t in tests
                                           if t.get("max_score") and t["score"] < t["max_score"]]
        failures += lost != []
        print(f"{path.name:45s} {'no results' if lost is None else 'full marks' if not lost else lost}", flush=True)
    return failures


if __name__ == "__main__":
    from grade_cli import Release

    release = Release.of(ASSIGNMENT)
    target = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("/tmp/honest-styles")
    styles = write_styles(target, release.solution)
    print(f"{len(styles)} styles written to {target}")
    if "--otter" in sys.argv:
        sys.exit(_otter_check(target, release.autograder) and 1)
