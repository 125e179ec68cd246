"""q4 — What occupies memory, and when? (handout §1.4)

`adam_static_bytes` and `saved_activation_bytes` are exact counts, compared
with references computed here (the latter with the probe's own
`saved_tensor_bytes`, not shipped to students). `memory_timeline` is compared, phase by phase, with
the reference timeline measured by the same probe in the same process, and
its structure is asserted: a base of parameters, Adam's two moments (8 bytes
per float32 parameter) arriving at the first step and raising every later
baseline, activations up in forward, gradients (4P) from backward to
zero_grad. The figure is checked through its bars (what a rebuilt Figure keeps): one stack at
x = i per entry, the prompt's four bands bottom up, totals in a stated unit.
"""
from __future__ import annotations

import copy
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from . import _probe, fixtures
from ._probe import fmt_bytes as _fmt
from ._common import call, close, expect, fail, measured

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


def _adam_models():
    torch.manual_seed(1401)
    plain = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    wide = nn.Sequential(nn.Linear(7, 300).double(), nn.Linear(300, 3).half())
    frozen = nn.Sequential(nn.Linear(10, 40), nn.Linear(40, 10))
    frozen[0].requires_grad_(False)
    return [("a float32 MLP", plain), ("float64 and float16 layers", wide),
            ("a model with a frozen layer", frozen), ("a model with tied weights, three dtypes and a frozen layer",
                                                      fixtures.TiedNet())]


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
                 "requires_grad=False has no gradient and no Adam moments (only its own bytes).", "M15")
        if got == sum(4 * _param_bytes(p) for p in params):
            fail(f"adam_static_bytes counted gradients and Adam moments for frozen parameters ({what}): a "
                 "parameter with requires_grad=False gets no .grad and no optimizer state, only its own bytes.", "M15")
        if got == reference_adam_static_bytes_no_dedup(model):
            fail(f"adam_static_bytes counted a shared (tied) weight twice ({what}): model.parameters() yields each "
                 "parameter once; state_dict() or named_parameters(remove_duplicate=False) repeat shared ones.", "M45")
        if got == sum((16 if p.requires_grad else 4) * p.numel() for p in params):
            fail(f"adam_static_bytes assumed 4 bytes per element for {what}: use p.element_size() (float64 is 8, "
                 "float16 is 2), and so are its gradient and Adam moments.", "M15")
        fail(f"adam_static_bytes returned {got} for {what}; parameters, gradients and Adam's two moments take "
             f"{expected} bytes there.")


def reference_adam_static_bytes_no_dedup(model: nn.Module) -> int:
    return sum(_param_bytes(p) * (4 if p.requires_grad else 1)
               for _, p in model.named_parameters(remove_duplicate=False))


# ----------------------------------------------------------------------------- saved_activation_bytes


def _saved_figures(model, x) -> dict:
    """What each way of adding up the saved tensors gives on model(x) (the first is the answer)."""
    by_storage, with_params, leaf_only, by_view = {}, {}, {}, {}
    naive = [0]

    def pack(t):
        s = t.untyped_storage()
        base = t if t._base is None else t._base
        parameter = base.is_leaf and base.requires_grad
        with_params[s.data_ptr()] = s.nbytes()
        if not (t.is_leaf and t.requires_grad):  # the parameter itself left out, its views kept
            leaf_only[s.data_ptr()] = s.nbytes()
        if not parameter:
            by_storage[s.data_ptr()] = s.nbytes()
            by_view[t.data_ptr()] = t.numel() * t.element_size()
            naive[0] += t.numel() * t.element_size()
        return t.detach()

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _identity):
        out = model(x)
    del out
    return {"answer": sum(by_storage.values()), "with_params": sum(with_params.values()),
            "leaf_only": sum(leaf_only.values()), "by_view": sum(by_view.values()), "naive": naive[0]}


def _identity(t):
    return t


def _activation_cases():
    torch.manual_seed(1402)
    mlp = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    return [("an MLP on a (32, 16) batch", mlp, torch.randn(32, 16)),
            ("a model that saves views of one storage", fixtures.ViewNet(), torch.randn(10, 12)),
            ("a model that saves overlapping slices of one storage", fixtures.SliceNet(), torch.randn(6, 10)),
            ("a model that saves views of a parameter", fixtures.WeightViewNet(), torch.randn(4, 5)),
            ("a float64 model", copy.deepcopy(mlp).double(), torch.randn(5, 16, dtype=torch.float64))]


def check_saved_activation_bytes(saved_activation_bytes) -> None:
    for what, model, x in _activation_cases():
        got = call(saved_activation_bytes, "saved_activation_bytes", model, x)
        expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
               f"saved_activation_bytes should return an int (bytes), got {type(got).__name__}.")
        got = int(got)
        with torch.enable_grad():
            figures = _saved_figures(model, x)
            _, reference = _probe.saved_tensor_bytes(model, x)
        expected = figures["answer"]
        assert expected == reference
        if got == expected:
            continue
        if got in (figures["with_params"], figures["leaf_only"]):
            fail(f"saved_activation_bytes returned {got} for {what}: it counted storages of parameters. Autograd "
                 "saves parameters and views of them (nn.Linear saves its transposed weight, a view): a saved "
                 "tensor belongs to a parameter when its base (t._base, or t itself when that is None) is a leaf "
                 f"that requires grad. Leave those out: {expected}.", "M52")
        if got in (figures["naive"], figures["by_view"]):
            fail(f"saved_activation_bytes returned {got} for {what}: it added up the saved tensors (views) rather "
                 "than their storages. Several saved tensors are views of one storage (a reshape, a slice, the "
                 "same tensor saved twice), and a view keeps its whole storage alive. Count each storage once, "
                 f"in full (key: t.untyped_storage().data_ptr(), size: its nbytes()): {expected}.", "M16")
        if got == 0:
            fail(f"saved_activation_bytes returned 0 for {what}: run the forward pass with autograd recording "
                 "(not under no_grad) inside torch.autograd.graph.saved_tensors_hooks, and add up what the "
                 "pack hook receives.")
        fail(f"saved_activation_bytes returned {got} for {what}; autograd saves {expected} bytes of non-parameter "
             "storages there, each counted once: key by t.untyped_storage().data_ptr() and add the storage's "
             "nbytes() (id(t) is no key: views are distinct objects and ids are reused once freed).", "M16")


def measure_saved_activation_leak(saved_activation_bytes) -> dict:
    """Bytes still alive after saved_activation_bytes returned, against what one forward saves."""
    device = _probe.device()
    torch.manual_seed(1403)
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU()).to(device)
    x = torch.randn(32, 128).to(device)
    y = torch.zeros(32, 128, device=device)
    with torch.enable_grad(), _probe.quiet():
        _, saved = _probe.saved_tensor_bytes(model, x)
    figures = measured(fixtures.live_after_call, saved_activation_bytes, "saved_activation_bytes", model, x, y,
                       F.mse_loss)
    return {"device": str(device), "saved": saved, "live_after": figures["live"]}


def check_saved_activation_bytes_no_leak(saved_activation_bytes) -> None:
    """The pack hook must return a detached tensor: returning t itself keeps the graph alive (pytorch#115255)."""
    figures = measure_saved_activation_leak(saved_activation_bytes)
    if figures["live_after"] > figures["saved"] / 4:
        fail(f"after saved_activation_bytes returned, {_fmt(figures['live_after'])} of its forward pass were "
             "still alive: the graph leaked. A pack hook that returns t itself creates a reference cycle through "
             "the graph; return t.detach() from the pack hook (and keep no reference to the output).", "M46")


# ----------------------------------------------------------------------------- memory_timeline


def reference_memory_timeline(model, optimizer, batches, loss_fn, reading="live"):
    timeline = []
    with _probe.MemoryProbe(device=_probe.device(), track=(model, optimizer)) as probe:
        read = probe.live_bytes if reading == "live" else probe.peak_bytes
        for x, y in batches:
            timeline.append(("start", read()))
            loss = loss_fn(model(x), y)
            timeline.append(("forward", read()))
            loss.backward()
            timeline.append(("backward", read()))
            optimizer.step()
            timeline.append(("step", read()))
            optimizer.zero_grad(set_to_none=True)
            timeline.append(("zero_grad", read()))
            del loss
    return timeline


def peak_memory_timeline(model, optimizer, batches, loss_fn):
    """The slip the checks recognise: peak_bytes() recorded where live_bytes() is asked."""
    return reference_memory_timeline(model, optimizer, batches, loss_fn, reading="peak")


def timeline_setup(device, steps=3, seed=1404):
    """A model whose parameters, gradients, Adam state and activations are all visible at once."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                          nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).to(device)
    g = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(128, 64, generator=g).to(device), torch.randint(0, 64, (128,), generator=g).to(device))
               for _ in range(steps)]
    return model, batches


def _adam(model, warm_batch=None):
    """Adam over the model; with a batch, one step taken already (its state exists, gradients cleared)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    if warm_batch is not None:
        with torch.enable_grad():
            F.cross_entropy(model(warm_batch[0]), warm_batch[1]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return optimizer


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


def measure_memory_timeline(memory_timeline, steps=3, optimizer_with_state=False) -> dict:
    """The reference timeline and yours, on copies of one model and optimizer, measured the same way."""
    device = _probe.device()
    model, batches = timeline_setup(device, steps + 1)
    warm, batches = (batches[0], batches[1:]) if optimizer_with_state else (None, batches[:steps])
    ref_model = copy.deepcopy(model)
    ref_optimizer = _adam(ref_model, warm)
    optimizer = _adam(model, warm)
    figures = {"device": str(device), "steps": steps}
    figures["yours"] = measured(fixtures.timeline_run, memory_timeline, "memory_timeline", model, optimizer,
                                batches, F.cross_entropy)
    figures["reference"] = fixtures.timeline_run(reference_memory_timeline, ref_model, ref_optimizer, batches,
                                                 F.cross_entropy)
    peak_model = copy.deepcopy(ref_model)
    with torch.enable_grad(), _probe.quiet():
        _, figures["activations"] = _probe.saved_tensor_bytes(
            lambda: F.cross_entropy(peak_model(batches[0][0]), batches[0][1]))
    figures["peak_reading"] = fixtures.timeline_run(peak_memory_timeline, peak_model,
                                                    _adam(peak_model, warm), batches, F.cross_entropy)
    figures["parameters"] = sum(_param_bytes(p) for p in model.parameters())
    figures["same_weights"] = all(close(p, r, rtol=1e-4, atol=1e-5)
                                  for p, r in zip(model.parameters(), ref_model.parameters()))
    return figures


def _close_timelines(a, b, tolerance) -> bool:
    return all(abs(x - y) <= max(tolerance, y // 20) for x, y in zip(a, b))


def check_memory_timeline(memory_timeline) -> None:
    _check_timeline(measure_memory_timeline(memory_timeline), fresh=True)
    _check_timeline(measure_memory_timeline(memory_timeline, steps=2, optimizer_with_state=True), fresh=False)


def _check_timeline(figures, fresh: bool) -> None:
    steps, reference, acts = figures["steps"], figures["reference"], figures["activations"]
    yours = _as_timeline(figures["yours"], steps)
    which = "a fresh Adam" if fresh else "an Adam that has taken a step already (its state exists)"
    expect(figures["same_weights"],
           f"after memory_timeline the weights differ from {steps} ordinary Adam steps on the batches: run each "
           "step for real (forward, loss, backward, optimizer.step(), zero_grad(set_to_none=True)).")
    params = figures["parameters"]
    state = 2 * params  # exp_avg and exp_avg_sq; Adam's `step` counters are a few bytes
    v = [b for _, b in yours]
    r = [b for _, b in reference]
    tolerance = max(acts, params) // 4
    if v[0] < params / 2:
        fail(f"your timeline starts at {_fmt(v[0])}, below the parameters' own {_fmt(params)}: the base "
             "is missing. Register the tensors that exist before the loop: MemoryProbe(track=(model, optimizer)).",
             "M47")
    if not fresh and v[0] < r[0] - state / 2:
        fail(f"with {which}, your timeline starts at {_fmt(v[0])}, but the parameters and the optimizer's existing "
             f"moments are {_fmt(r[0])}: the optimizer's state is missing from the base. Track the optimizer as "
             "well as the model: MemoryProbe(track=(model, optimizer)).", "M47")
    if _close_timelines(v, [b for _, b in figures["peak_reading"]], tolerance) and not _close_timelines(v, r, tolerance):
        fail("your timeline records the peak so far (peak_bytes()) after each phase; the question asks for the "
             "memory alive right then: probe.live_bytes().", "M48")
    zero_grad_excess = [v[i] - r[i] for i in range(4, len(v), len(PHASES))]
    if all(abs(e - params) <= params / 4 for e in zero_grad_excess):
        fail(f"after zero_grad your timeline still holds about {_fmt(params)} more than the reference, the size of "
             "the gradients: they were zeroed in place and kept. Clear them with "
             "optimizer.zero_grad(set_to_none=True), which frees the buffers.", "M35")
    if fresh:
        first_step = v[3] - v[2]
        if first_step < state / 2:
            fail(f"your timeline never shows the optimizer state arriving at the first step: live memory changed by "
                 f"{_fmt(first_step)} across the first optimizer.step(), but Adam allocates two moment buffers "
                 f"there ({_fmt(state)}, 8 bytes per float32 parameter). Measure right after optimizer.step(), "
                 "with the optimizer's state counted.", "M17")
        raised = v[5] - v[0]
        if raised < state / 2:
            fail(f"your timeline never shows the optimizer state staying after the first step: the second step "
                 f"starts {_fmt(raised)} above the first, but Adam's moments ({_fmt(state)}) stay, so every later "
                 "cycle starts from a higher baseline. Measure all steps inside one probe that tracks model and "
                 "optimizer.", "M17")
    for i, ((phase, mine), theirs) in enumerate(zip(yours, r)):
        if abs(mine - theirs) > max(tolerance, theirs // 20):
            fail(f"with {which}, step {i // len(PHASES) + 1}, after {phase!r}: your timeline says {_fmt(mine)}, the "
                 f"probe measures {_fmt(theirs)} there (reference timeline: {r}). Record live_bytes() right after "
                 "each phase, all steps in one probe that tracks the model and the optimizer.")


# ----------------------------------------------------------------------------- plot_memory_timeline

BANDS = ("parameters (base)", "optimizer state", "gradients", "activations and other")
_UNITS = {"bytes": 1, "kB": 1e3, "MB": 1e6, "KiB": 2 ** 10, "MiB": 2 ** 20}


def timeline_bands(timeline) -> list[list[float]]:
    """The prompt's split of each total into the four bands, bottom up (bytes)."""
    phases = [phase for phase, _ in timeline]
    totals = [nbytes for _, nbytes in timeline]
    first = phases.index("step") if "step" in phases else len(phases)
    state = max(0, totals[first] - totals[first - 1]) if 0 < first < len(phases) else 0
    bands = [[], [], [], []]
    for i, (phase, total) in enumerate(timeline):
        base = min(totals[0], total)
        opt = min(state if i >= first else 0, total - base)
        rest = total - base - opt
        during_backward = phase in ("backward", "step")
        for band, value in zip(bands, (base, opt, rest if during_backward else 0, 0 if during_backward else rest)):
            band.append(value)
    return bands


def _stacks(fig):
    """{x centre: [(bottom, height), ...]} over every rectangle the figure's axes draw."""
    stacks = {}
    for ax in fig.axes:
        for patch in ax.patches:
            try:
                x, w = float(patch.get_x()), float(patch.get_width())
                y, h = float(patch.get_y()), float(patch.get_height())
            except (AttributeError, TypeError):
                continue
            stacks.setdefault(round(x + w / 2, 6), []).append((y, h))
    return stacks


def check_plot_memory_timeline(plot_memory_timeline) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    device = torch.device("cpu")
    model, batches = timeline_setup(device, steps=2)
    with torch.enable_grad(), _probe.quiet():
        timeline = reference_memory_timeline(model, _adam(model), batches, F.cross_entropy)
    n = len(timeline)
    before = set(plt.get_fignums())
    try:
        fig = call(plot_memory_timeline, "plot_memory_timeline", timeline)
        expect(isinstance(fig, Figure), f"plot_memory_timeline should return a matplotlib Figure, got "
               f"{type(fig).__name__} (plt.subplots() returns (fig, ax): return fig).", "M49")
        expect(len(fig.axes) >= 1, "plot_memory_timeline returned a Figure without axes.")
        stacks = _stacks(fig)
        expect(stacks, "plot_memory_timeline's figure draws no bars: draw one stacked bar per timeline entry "
               "(ax.bar with bottom=).", "M50")
        expect(sorted(stacks) == list(range(n)),
               f"plot_memory_timeline drew bars at x = {sorted(stacks)[:6]}...; put entry i's stack at x = i "
               f"(0 to {n - 1}), one stack per timeline entry.", "M50")
        totals = [b for _, b in timeline]
        peak = max(totals)
        top = max(range(n), key=lambda i: totals[i])
        drawn_top = sum(h for _, h in stacks[top])
        unit = next((s for s in _UNITS.values() if abs(drawn_top * s - peak) <= 0.01 * peak), None)
        expect(unit is not None, f"the tallest stack should add up to the timeline's peak ({peak} B, in bytes, kB, "
               f"MB, KiB or MiB); it adds up to {drawn_top:.4g}. Stack the bands so each total is the live memory.",
               "M50")
        expected = timeline_bands(timeline)
        floor = 0.005 * peak
        for i in range(n):
            drawn = [h * unit for _, h in sorted(stacks[i]) if h * unit > floor]
            wanted = [band[i] for band in expected if band[i] > floor]
            names = [name for name, band in zip(BANDS, expected) if band[i] > floor]
            where = f"entry {i} ({timeline[i][0]!r}, step {i // len(PHASES) + 1})"
            if len(drawn) != len(wanted):
                fail(f"at {where} the stack has {len(drawn)} visible band(s); the prompt's split gives "
                     f"{len(wanted)}, bottom up: {', '.join(names)}. Draw the four bands separately "
                     f"({', '.join(BANDS)}), none merged.", "M50")
            if any(abs(d - w) > 0.01 * peak for d, w in zip(drawn, wanted)):
                if sorted(round(d / peak, 2) for d in drawn) == sorted(round(w / peak, 2) for w in wanted):
                    fail(f"at {where} the bands are stacked in another order; bottom up they are: "
                         f"{', '.join(BANDS)}.", "M50")
                fail(f"at {where} the bands' heights are {[round(d) for d in drawn]} bytes; the prompt's split "
                     f"gives {[round(w) for w in wanted]} ({', '.join(names)}, bottom up).", "M50")
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
        expect(got == cause, f"OOM_CAUSE[{where!r}] is {got!r}: {_OOM_WHY[where]}.", "M51")
