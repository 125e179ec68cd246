"""q4 — What occupies memory, and when? (handout §1.4)

`adam_static_bytes` and `saved_activation_bytes` are exact counts, compared
with references computed here (the latter with the probe's own
`saved_tensor_bytes`). `memory_timeline` is compared, phase by phase, with
the reference timeline measured by the same probe in the same process, and
its structure is asserted: a base of parameters, Adam's two moments (8 bytes
per float32 parameter) arriving at the first step and raising every later
baseline, activations up in forward, gradients (4P) from backward to
zero_grad. The figure is checked through its data, not its pixels.
"""
from __future__ import annotations

import copy
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from . import _probe
from ._probe import fmt_bytes as _fmt
from ._common import call, close, expect, fail

PHASES = ("start", "forward", "backward", "step", "zero_grad")
OOM_CAUSES = {"optimizer state", "saved activations", "gradients"}
EXPECTED_OOM_CAUSE = {
    "at the first optimizer step": "optimizer state",
    "late in the forward pass": "saved activations",
    "in backward": "gradients",
}
_OOM_WHY = {
    "at the first optimizer step": "Adam allocates its two moment buffers lazily, at the first step: memory that "
                                   "was never needed before appears there",
    "late in the forward pass": "saved activations accumulate layer by layer during a training forward, so the "
                                "stack is tallest near its end",
    "in backward": "backward frees saved tensors as it goes but creates the parameters' .grad buffers",
}


# ----------------------------------------------------------------------------- adam_static_bytes


def _param_bytes(p: torch.Tensor) -> int:
    return p.numel() * p.element_size()


def reference_adam_static_bytes(model: nn.Module) -> int:
    return sum(_param_bytes(p) * (4 if p.requires_grad else 1) for p in model.parameters())


class _Tied(nn.Module):
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


def _adam_models():
    torch.manual_seed(1401)
    plain = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    wide = nn.Sequential(nn.Linear(7, 300).double(), nn.Linear(300, 3).half())
    frozen = nn.Sequential(nn.Linear(10, 40), nn.Linear(40, 10))
    frozen[0].requires_grad_(False)
    return [("a float32 MLP", plain), ("float64 and float16 layers", wide),
            ("a model with a frozen layer", frozen), ("a model with tied weights, three dtypes and a frozen layer",
                                                      _Tied())]


def check_adam_static_bytes(adam_static_bytes) -> None:
    for what, model in _adam_models():
        got = call(adam_static_bytes, "adam_static_bytes", model)
        expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
               f"adam_static_bytes should return an int (bytes), got {type(got).__name__}.")
        got = int(got)
        expected = reference_adam_static_bytes(model)
        params = list(model.parameters())
        n = sum(p.numel() for p in params)
        if got == expected:
            continue
        if got == 16 * n:
            fail(f"adam_static_bytes returned 16P = {got} for {what}. 16 bytes per parameter is the float32 "
                 "estimate; count from the real tensors: each parameter's element_size(), and a parameter with "
                 "requires_grad=False has no gradient and no Adam moments (only its own bytes).")
        if got == sum(4 * _param_bytes(p) for p in params):
            fail(f"adam_static_bytes counted gradients and Adam moments for frozen parameters ({what}): a "
                 "parameter with requires_grad=False gets no .grad and no optimizer state, only its own bytes.")
        if got == reference_adam_static_bytes_no_dedup(model):
            fail(f"adam_static_bytes counted a shared (tied) weight twice ({what}): model.parameters() yields each "
                 "parameter once; state_dict() or named_parameters(remove_duplicate=False) repeat shared ones.")
        if got == sum((16 if p.requires_grad else 4) * p.numel() for p in params):
            fail(f"adam_static_bytes assumed 4 bytes per element for {what}: use p.element_size() (float64 is 8, "
                 "float16 is 2), and so are its gradient and Adam moments.")
        fail(f"adam_static_bytes returned {got} for {what}; parameters, gradients and Adam's two moments take "
             f"{expected} bytes there.")


def reference_adam_static_bytes_no_dedup(model: nn.Module) -> int:
    return sum(_param_bytes(p) * (4 if p.requires_grad else 1)
               for _, p in model.named_parameters(remove_duplicate=False))


# ----------------------------------------------------------------------------- saved_activation_bytes


class _ViewNet(nn.Module):
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


def _saved_figures(model, x):
    """(deduplicated without parameters, deduplicated with parameters, per-pack sums without/with)."""
    seen_act, seen_all = {}, {}
    naive = [0, 0]

    def pack(t):
        s = t.untyped_storage()
        base = t if t._base is None else t._base
        parameter = base.is_leaf and base.requires_grad
        seen_all[s.data_ptr()] = s.nbytes()
        naive[1] += t.numel() * t.element_size()
        if not parameter:
            seen_act[s.data_ptr()] = s.nbytes()
            naive[0] += t.numel() * t.element_size()
        return t.detach()

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return sum(seen_act.values()), sum(seen_all.values()), naive[0], naive[1]


def _activation_cases():
    torch.manual_seed(1402)
    mlp = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    return [("an MLP on a (32, 16) batch", mlp, torch.randn(32, 16)),
            ("a model that saves views of one storage", _ViewNet(), torch.randn(10, 12)),
            ("a float64 model", copy.deepcopy(mlp).double(), torch.randn(5, 16, dtype=torch.float64))]


def check_saved_activation_bytes(saved_activation_bytes) -> None:
    with torch.enable_grad():
        for what, model, x in _activation_cases():
            _, reference = _probe.saved_tensor_bytes(model, x)
            dedup, dedup_with_params, naive, naive_with_params = _saved_figures(model, x)
            assert dedup == reference
            got = call(saved_activation_bytes, "saved_activation_bytes", model, x)
            expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
                   f"saved_activation_bytes should return an int (bytes), got {type(got).__name__}.")
            got = int(got)
            if got in (dedup, dedup_with_params):  # parameters are in memory anyway; either convention is accepted
                continue
            if got in (naive, naive_with_params):
                fail(f"saved_activation_bytes returned {got} for {what}: it counted every saved tensor, but several "
                     "are views of one storage (or the same tensor saved twice, e.g. a ReLU output that the next "
                     f"layer also saves). Count each storage once (key: t.untyped_storage().data_ptr()): {dedup}.")
            if got == 0:
                fail(f"saved_activation_bytes returned 0 for {what}: run the forward pass with autograd recording "
                     "(not under no_grad) inside torch.autograd.graph.saved_tensors_hooks, and add up what the "
                     "pack hook receives.")
            fail(f"saved_activation_bytes returned {got} for {what}; autograd saves {dedup} bytes of non-parameter "
                 "tensors there, each storage counted once: key by t.untyped_storage().data_ptr() and add the "
                 "storage's nbytes() (id(t) is no key: views are distinct objects and ids are reused once freed).")


def measure_saved_activation_leak(saved_activation_bytes) -> dict:
    """Bytes still alive after saved_activation_bytes returned, against what one forward saves."""
    torch.manual_seed(1403)
    device = _probe.device()
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU()).to(device)
    x = torch.randn(32, 128).to(device)
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, x, torch.zeros(32, 128, device=device), F.mse_loss)
        _, saved = _probe.saved_tensor_bytes(model, x)
        _, _, live = _probe.peak_and_live(lambda: call(saved_activation_bytes, "saved_activation_bytes", model, x))
    return {"device": str(device), "saved": saved, "live_after": live}


def check_saved_activation_bytes_no_leak(saved_activation_bytes) -> None:
    """The pack hook must return a detached tensor: returning t itself keeps the graph alive (pytorch#115255)."""
    figures = measure_saved_activation_leak(saved_activation_bytes)
    if figures["live_after"] > figures["saved"] / 4:
        fail(f"after saved_activation_bytes returned, {_fmt(figures['live_after'])} of its forward pass were "
             "still alive: the graph leaked. A pack hook that returns t itself creates a reference cycle through "
             "the graph; return t.detach() from the pack hook (and keep no reference to the output).")


# ----------------------------------------------------------------------------- memory_timeline


def reference_memory_timeline(model, optimizer, batches, loss_fn, device=None):
    timeline = []
    with _probe.MemoryProbe(device=device or _probe.device(), track=(model, optimizer)) as probe:
        for x, y in batches:
            timeline.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            timeline.append(("forward", probe.live_bytes()))
            loss.backward()
            timeline.append(("backward", probe.live_bytes()))
            optimizer.step()
            timeline.append(("step", probe.live_bytes()))
            optimizer.zero_grad(set_to_none=True)
            timeline.append(("zero_grad", probe.live_bytes()))
            del loss
    return timeline


def timeline_setup(device, steps=3, seed=1404):
    """A model whose parameters, gradients, Adam state and activations are all visible at once."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                          nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).to(device)
    g = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(128, 64, generator=g).to(device), torch.randint(0, 64, (128,), generator=g).to(device))
               for _ in range(steps)]
    return model, batches


def _adam(model):
    return torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)


def _as_timeline(value, steps):
    expect(isinstance(value, (list, tuple)), f"memory_timeline should return a list, got {type(value).__name__}.")
    expect(len(value) == len(PHASES) * steps,
           f"memory_timeline returned {len(value)} entries for {steps} steps; expected {len(PHASES)} per step "
           f"({', '.join(PHASES)}).")
    out = []
    for i, item in enumerate(value):
        expect(isinstance(item, (tuple, list)) and len(item) == 2,
               f"memory_timeline entry {i} is {item!r}; each entry is a (phase, bytes) pair.")
        phase, nbytes = item
        expect(phase == PHASES[i % len(PHASES)],
               f"memory_timeline entry {i} is for phase {phase!r}; the phases of each step are, in order, {PHASES}.")
        expect(isinstance(nbytes, numbers.Integral) and not isinstance(nbytes, bool),
               f"memory_timeline entry {i} holds {type(nbytes).__name__}; live memory is an int (bytes).")
        out.append((phase, int(nbytes)))
    return out


def measure_memory_timeline(memory_timeline, steps=3) -> dict:
    """The reference timeline and yours, on the same model, batches and fresh Adam, measured in one process."""
    device = _probe.device()
    model, batches = timeline_setup(device, steps)
    figures = {"device": str(device), "steps": steps}
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, *batches[0], F.cross_entropy)
        ref_model = copy.deepcopy(model)
        figures["reference"] = reference_memory_timeline(ref_model, _adam(ref_model), batches, F.cross_entropy,
                                                         device)
        _, figures["activations"] = _probe.saved_tensor_bytes(
            lambda: F.cross_entropy(model(batches[0][0]), batches[0][1]))
        figures["yours"] = call(memory_timeline, "memory_timeline", model, _adam(model), batches, F.cross_entropy)
    figures["parameters"] = sum(_param_bytes(p) for p in model.parameters())
    figures["same_weights"] = all(close(p, r, rtol=1e-4, atol=1e-5)
                                  for p, r in zip(model.parameters(), ref_model.parameters()))
    return figures


def check_memory_timeline(memory_timeline) -> None:
    figures = measure_memory_timeline(memory_timeline)
    steps, reference, acts = figures["steps"], figures["reference"], figures["activations"]
    yours = _as_timeline(figures["yours"], steps)
    expect(figures["same_weights"],
           f"after memory_timeline the weights differ from {steps} ordinary Adam steps on the batches: run each "
           "step for real (forward, loss, backward, optimizer.step(), zero_grad(set_to_none=True)).")
    params = figures["parameters"]
    state = 2 * params  # exp_avg and exp_avg_sq; Adam's `step` counters are a few bytes (on CUDA: on the CPU)
    v = [b for _, b in yours]
    r = [b for _, b in reference]
    if v[0] < params / 2:
        fail(f"your timeline starts at {_fmt(v[0])}, below the parameters' own {_fmt(params)}: the base "
             "is missing. Register the tensors that exist before the loop: MemoryProbe(track=(model, optimizer)).")
    first_step = v[3] - v[2]
    if first_step < state / 2:
        fail(f"your timeline never shows the optimizer state arriving at the first step: live memory changed by "
             f"{_fmt(first_step)} across the first optimizer.step(), but Adam allocates two moment buffers "
             f"there ({_fmt(state)}, 8 bytes per float32 parameter). Measure right after optimizer.step(), "
             "with the optimizer's state counted.")
    raised = v[5] - v[0]
    if raised < state / 2:
        fail(f"your timeline never shows the optimizer state staying after the first step: the second step starts "
             f"{_fmt(raised)} above the first, but Adam's moments ({_fmt(state)}) stay, so every later "
             "cycle starts from a higher baseline. Measure all steps inside one probe that tracks model and optimizer.")
    tolerance = max(acts, params) // 4
    for i, ((phase, mine), (_, theirs)) in enumerate(zip(yours, reference)):
        if abs(mine - theirs) > max(tolerance, theirs // 20):
            fail(f"step {i // len(PHASES) + 1}, after {phase!r}: your timeline says {_fmt(mine)}, the probe "
                 f"measures {_fmt(theirs)} there (reference timeline: {[b for b in r]}). Record live_bytes() "
                 "right after each phase, all steps in one probe that tracks the model and the optimizer.")


# ----------------------------------------------------------------------------- plot_memory_timeline


def _y_values(fig) -> list[float]:
    """Every y a figure's axes draw: line points, bar tops and bottoms, polygon vertices."""
    import numpy as np
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    ys = []
    for ax in fig.axes:
        for artist in ax.get_children():
            if isinstance(artist, Line2D):
                ys.extend(float(y) for y in np.asarray(artist.get_ydata(), dtype=float).ravel())
            elif isinstance(artist, Rectangle) and artist is not ax.patch:
                ys.extend([float(artist.get_y()), float(artist.get_y() + artist.get_height())])
            elif isinstance(artist, Collection):
                for path in artist.get_paths():
                    ys.extend(float(y) for y in path.vertices[:, 1])
    return [y for y in ys if np.isfinite(y)]


def check_plot_memory_timeline(plot_memory_timeline) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    device = torch.device("cpu")
    model, batches = timeline_setup(device, steps=2)
    with torch.enable_grad(), _probe.quiet():
        timeline = reference_memory_timeline(model, _adam(model), batches, F.cross_entropy, device)
    before = set(plt.get_fignums())
    try:
        fig = call(plot_memory_timeline, "plot_memory_timeline", timeline)
        expect(isinstance(fig, Figure), f"plot_memory_timeline should return a matplotlib Figure, got "
               f"{type(fig).__name__} (plt.subplots() returns (fig, ax): return fig).")
        expect(len(fig.axes) >= 1, "plot_memory_timeline returned a Figure without axes.")
        ys = _y_values(fig)
        expect(ys, "plot_memory_timeline's figure draws no data (no lines, bars or areas).")
        peak = max(b for _, b in timeline)
        scales = [1, 1e3, 1e6, 1e9, 2 ** 10, 2 ** 20, 2 ** 30]
        expect(any(abs(y * s - peak) <= 0.01 * peak for y in ys for s in scales),
               f"the figure's tallest stack should reach the timeline's peak ({peak} B, in bytes, kB, MB, KiB or "
               f"MiB); its data reach {max(ys):.4g}. Stack the components so each total is the live memory.")
    finally:
        for num in set(plt.get_fignums()) - before:
            plt.close(num)


# ----------------------------------------------------------------------------- OOM_CAUSE


def check_oom_cause(OOM_CAUSE) -> None:
    expect(isinstance(OOM_CAUSE, dict), f"OOM_CAUSE should be a dict, got {type(OOM_CAUSE).__name__}.")
    for where, cause in EXPECTED_OOM_CAUSE.items():
        expect(where in OOM_CAUSE, f"OOM_CAUSE is missing the key {where!r}; keep the stub's keys.")
        got = OOM_CAUSE[where]
        expect(got in OOM_CAUSES, f"OOM_CAUSE[{where!r}] is {got!r}; choose one of {sorted(OOM_CAUSES)}.")
        expect(got == cause, f"OOM_CAUSE[{where!r}] is {got!r}: {_OOM_WHY[where]}.")
