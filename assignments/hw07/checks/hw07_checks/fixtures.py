"""What the hidden checks hand to student code, and how they measure it while it runs.

Sandbox-visible (see `SANDBOX_MODULES` in __init__.py): the examiner rebuilds
these modules in the sandbox and runs the procedures there, around the
student's real function. So this file holds no reference solution and no
expected value, imports only torch, the standard library and the other
sandbox-visible modules, and:

- every module class keeps only plain attributes (numbers, lists, tuples),
  so it can be rebuilt from its structure and state;
- every procedure is `procedure(fn, *args, **kwargs) -> plain data` and lets
  an exception from `fn` propagate as it is. The checks run it with
  `_common.measure(procedure, student_fn, ...)`, and run the same procedure on
  the reference implementation locally.
"""
from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import nn

from . import _probe

_float64 = torch.float64


# ----------------------------------------------------------------------------- modules


class Recorder(nn.Module):
    """Identity layer that remembers the mode of each forward pass: (training, grad enabled)."""

    def __init__(self):
        super().__init__()
        self.seen: list = []

    def forward(self, x):
        self.seen.append((bool(self.training), bool(torch.is_grad_enabled())))
        return x


class SizeRecorder(nn.Module):
    """Identity layer that remembers how many examples each forward pass saw."""

    def __init__(self):
        super().__init__()
        self.sizes: list = []

    def forward(self, x):
        self.sizes.append(int(len(x)))
        return x


class TiedNet(nn.Module):
    """Embedding and output layer sharing one weight (counted once), a frozen layer, three dtypes."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.body = nn.Linear(16, 16).double()
        self.frozen = nn.Linear(16, 32)
        self.frozen.requires_grad_(False)
        self.low = nn.Linear(32, 8).half()
        self.out = nn.Linear(16, 50, bias=False)
        self.out.weight = self.embed.weight
        self.norm = nn.BatchNorm1d(16)  # buffers are not parameters


class ViewNet(nn.Module):
    """Saves views of one storage (a reshape, a transpose) and one tensor twice (ReLU output, Linear input)."""

    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(12, 24)
        self.lin2 = nn.Linear(24, 24)

    def forward(self, x):
        h = torch.relu(self.lin1(x))            # relu keeps h; lin2 keeps h too
        z = self.lin2(h)
        t = z.view(z.shape[0], 4, 6)            # a view of z's storage
        s = t * t                               # keeps t twice
        return torch.tanh(s @ t.transpose(1, 2)).sum()  # keeps s, t's transpose, the tanh output


class SliceNet(nn.Module):
    """Saves overlapping slices of one storage, each smaller than it, at different offsets."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 24)

    def forward(self, x):
        h = self.lin(x)                         # (N, 24); Linear keeps x and a view of its weight
        a, b = h[:, 4:12], h[:, 8:16]           # two views of h's storage, neither at its start
        return (a * b).sum()                    # mul keeps a and b: the whole of h stays alive


class WeightViewNet(nn.Module):
    """Saves views of a parameter other than the transposed weight: a slice and a reshape."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 8) * 0.3)

    def forward(self, x):                       # x: (N, 5)
        h = torch.tanh(x @ self.weight[:, :5].T)    # keeps x (and tanh its output)
        z = h * self.weight.reshape(-1)[:6]         # keeps h and a view of the parameter (not a leaf)
        return (z @ self.weight[:, 2:7]).sum()      # keeps z and another view of the parameter


class TinyLM(nn.Module):
    """A small causal model in float64 that records how it is called and when backward reaches each call."""

    def __init__(self, V: int, d: int, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(V, d, generator=g, dtype=_float64))
        self.out = nn.Parameter(torch.randn(V, d, generator=g, dtype=_float64) * 0.7)
        self.bias = nn.Parameter(torch.randn(V, generator=g, dtype=_float64) * 0.3)
        self.calls: list = []
        self.backward_seen: list = []  # (call number, calls made when its backward ran)

    def forward(self, ids):
        self.calls.append(tuple(int(s) for s in ids.shape))
        logits = tiny_forward((self.emb, self.out, self.bias), ids)
        if logits.requires_grad:  # a hook on this forward's own tensor: it runs where the model runs
            logits.register_hook(_BackwardSeen(self, len(self.calls)))
        return logits


class _BackwardSeen:
    def __init__(self, model: TinyLM, call_number: int):
        self.model, self.call_number = model, call_number

    def __call__(self, grad):
        self.model.backward_seen.append((self.call_number, len(self.model.calls)))


def tiny_forward(params, ids):
    """TinyLM's computation on explicit parameters: (b, T) ids to (b, T, V) logits."""
    emb, out, bias = params
    h = emb[ids]                                             # (b, T, d)
    steps = torch.arange(1, ids.shape[1] + 1, dtype=_float64)
    context = h.cumsum(1) / steps[None, :, None]             # causal running mean
    return torch.tanh(context) @ out.T + bias                # (b, T, V)


def recorder_model(seed: int, dropout: float = 0.0) -> nn.Sequential:
    """q1: a float64 MLP with a Recorder after the first layer (and dropout when asked)."""
    torch.manual_seed(seed)
    layers = [nn.Linear(3, 8), nn.Tanh(), Recorder()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(8, 2))
    return nn.Sequential(*layers).double()


def deep_mlp(device, width=128, hidden=512, depth=8, seed=1130) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width), nn.ReLU())
                           for _ in range(depth)]).to(device)


def mse_mean_of_sums(prediction, target, reduction="mean"):
    """A loss whose mean runs over every element of a (B, k) target, as F.mse_loss's does (accepts reduction=)."""
    return F.mse_loss(prediction, target, reduction=reduction)


# ----------------------------------------------------------------------------- procedures


def plain(value):
    """A student's return value as plain data: numbers stay numbers, a 0-dim tensor becomes a description."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor):
        return {"tensor": True, "shape": tuple(value.shape), "requires_grad": bool(value.requires_grad),
                "value": float(value.detach().double()) if value.numel() == 1 else None}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return {"type": type(value).__name__}


def count_tensor_ops(fn, *args, **kwargs) -> int:
    """How many tensor operations fn(*args) dispatches (a Python loop over examples: one or more per example)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Counter(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            _Counter.count += 1
            return func(*args, **(kwargs or {}))

    with _Counter():
        fn(*args, **kwargs)
    return _Counter.count


def evaluate_memory(evaluate, model, batches, loss_fn) -> dict:
    """Peak and live bytes of evaluate(model, batches, loss_fn) on a warmed-up model in training mode."""
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, *batches[0], loss_fn)
        model.train()
        result, peak, live = _probe.peak_and_live(lambda: evaluate(model, batches, loss_fn))
        described = plain(result)
        del result
    return {"result": described, "peak": peak, "live": live}


def live_after_call(fn, model, x, y, loss_fn) -> dict:
    """Bytes still alive (created inside the call) after fn(model, x) returned, its result dropped."""
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, x, y, loss_fn)
        with _probe.MemoryProbe(device=_probe.device()) as probe:
            result = fn(model, x)
            described = plain(result)
            del result
            live = probe.live_bytes()
    return {"result": described, "live": live}


def timeline_run(memory_timeline, model, optimizer, batches, loss_fn):
    """memory_timeline(model, optimizer, batches, loss_fn) under quiet conditions, library workspaces allocated."""
    with torch.enable_grad(), _probe.quiet():
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        _probe.warm_up(model, *batches[0], loss_fn)
        for p, g in zip(model.parameters(), grads):  # warming up must not change what the caller left
            p.grad = g
        del grads
        return plain(memory_timeline(model, optimizer, batches, loss_fn))


def accumulation_peaks(accumulate_gradients, model, data, micro) -> dict:
    """Peak bytes, gradients and result of accumulate_gradients for each (x, y) in data, from cleared gradients."""
    out = {"peaks": [], "grads": [], "results": []}
    with torch.enable_grad(), _probe.quiet():
        x0, y0 = data[0]
        _probe.warm_up(model, x0[:micro], y0[:micro], F.cross_entropy)
        for x, y in data:
            model.zero_grad(set_to_none=True)
            result, peak, _ = _probe.peak_and_live(lambda: accumulate_gradients(model, x, y, micro))
            out["peaks"].append(peak)
            out["results"].append(plain(result))
            out["grads"].append([None if p.grad is None else p.grad.detach().clone() for p in model.parameters()])
            del result
        model.zero_grad(set_to_none=True)
    return out


def checkpoint_live(checkpointed_forward, model, x, y) -> dict:
    """Live bytes right after checkpointed_forward(list(model), x) (output held), its output and gradients."""
    blocks = list(model)
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, x, y, F.cross_entropy)
        with _probe.MemoryProbe(device=_probe.device()) as probe:
            out = checkpointed_forward(blocks, x)
            live = probe.live_bytes()
            output = out.detach().clone() if isinstance(out, torch.Tensor) else plain(out)
            if isinstance(out, torch.Tensor) and out.requires_grad:
                F.cross_entropy(out, y).backward()
            del out
        grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    return {"live": live, "output": output, "grads": grads}
