# %%
from memprobe import MemoryProbe

# %% [raw]
# # BEGIN QUESTION
# name: q4
# points: 10

# %% [markdown]
# ### q4 — What occupies memory, and when? (§1.4) (10 points)
#
# Training memory holds parameters, their gradients, the optimizer's state,
# the activations saved for backward, and temporary workspace. For float32
# Adam, parameters, gradients and two moment buffers take about $16P$ bytes for
# $P$ parameters, before activations. Peak memory varies *during* a step: Adam
# allocates its state lazily at the first step, backward releases saved
# tensors but creates `.grad` buffers, and `zero_grad(set_to_none=True)` drops
# those again.
#
# The memory probe shipped with this notebook measures tensor memory the same
# way on a GPU (allocator statistics) and on the CPU (a tracker of tensor
# storages):
#
# ```python
# with MemoryProbe(device="cpu", track=(model, optimizer)) as probe:
#     ...                      # tensors created here are counted
#     probe.live_bytes()       # alive now (tracked tensors included)
#     probe.peak_bytes()       # most alive at once so far
# ```
#
# First, check the $16P$ accounting on a real Adam step.

# %%
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
P = sum(p.numel() for p in mlp.parameters())
adam = torch.optim.Adam(mlp.parameters(), lr=1e-3, foreach=False)
xb, yb = torch.randn(64, 256), torch.randn(64, 256)
with MemoryProbe(device="cpu", track=(mlp, adam)) as probe:
    report = [f"before training, the parameters: {probe.live_bytes():>10,} B = 4P"]
    F.mse_loss(mlp(xb), yb).backward()
    report.append(f"after backward, plus gradients:  {probe.live_bytes():>10,} B = 8P")
    adam.step()
    extra = probe.live_bytes() - 16 * P
    report.append(f"after Adam's first step:         {probe.live_bytes():>10,} B = 16P + {extra} B")
    adam.zero_grad(set_to_none=True)
    report.append(f"after zero_grad(set_to_none):    {probe.live_bytes():>10,} B = 12P + the same")
print("\n".join(report))

# %% [markdown]
# (The few extra bytes are Adam's per-parameter `step` counters.) Now the
# activations: a training forward keeps what backward needs; a forward under
# `no_grad()` keeps nothing.

# %%
with MemoryProbe(device="cpu") as probe:
    out = mlp(xb)
    report = [f"live after a training forward:  {probe.live_bytes():>9,} B"]
    del out
with MemoryProbe(device="cpu") as probe:
    with torch.no_grad():
        out = mlp(xb)
    report.append(f"live after a no_grad() forward: {probe.live_bytes():>9,} B (just the output)")
    del out
print("\n".join(report))

# %% [markdown]
# Write:
#
# - `adam_static_bytes(model)`: bytes of parameters, gradients and Adam's two
#   moment buffers, counted from the real tensors: use each parameter's
#   `element_size()` (a gradient and the moments have the parameter's dtype); a
#   parameter with `requires_grad=False` has no gradient and no optimizer state,
#   only its own bytes. Count each parameter once (`model.parameters()` does;
#   tied weights are one tensor). Buffers such as batch-norm statistics and
#   Adam's small `step` counters are not part of this count.
# - `saved_activation_bytes(model, x)`: the bytes autograd saves for backward in
#   one forward pass `model(x)`. Use
#   `torch.autograd.graph.saved_tensors_hooks(pack, unpack)`: autograd calls
#   `pack(t)` for every tensor it saves. Count each **storage** once
#   (`t.untyped_storage()`: its `data_ptr()` as the key, its `nbytes()` as the
#   size) — a ReLU output that the next layer also saves, or a view of a tensor
#   saved elsewhere, is one storage, and a saved view keeps its whole storage
#   alive. Leave out parameters and views of them (`nn.Linear` saves its
#   transposed weight, a view): a saved `t` belongs to a parameter when its base
#   (`t._base`, or `t` itself when that is `None`) is a leaf that requires
#   grad. Parameters are in memory anyway. Your pack hook
#   must return `t.detach()`, not `t`: returning `t` itself creates a reference
#   cycle through the graph that keeps it alive.
# - `memory_timeline(model, optimizer, batches, loss_fn)`: train one step per
#   `(x, y)` batch and record the probe's `live_bytes()` after each phase:
#   `"start"` (before the forward), `"forward"` (the loss computed),
#   `"backward"`, `"step"` and `"zero_grad"` (with `set_to_none=True`). Return
#   a list of `(phase, bytes)` pairs. Use **one** probe for all steps, on the
#   model's device, tracking the model and the optimizer so the base (and any
#   state that exists already) is counted:
#   `MemoryProbe(device=next(model.parameters()).device, track=(model, optimizer))`.
# - `plot_memory_timeline(timeline)`: a matplotlib `Figure` that shows a
#   timeline the way the handout's figure reads: one stacked bar per entry,
#   entry `i` at x-position `i` (`ax.bar(..., bottom=...)`), heights in bytes,
#   kB, MB, KiB or MiB (say which on the y-axis). Split each entry's total into
#   four bands, drawn bottom up in this order:
#   1. **parameters (base)**: the first entry's total (or the entry's total, if smaller);
#   2. **optimizer state**: from the first `"step"` entry on, the rise across
#      that first step (its total minus the `"backward"` total before it), as
#      far as the rest of the total allows;
#   3. **gradients**: at `"backward"` and `"step"` entries, the rest of the total;
#   4. **activations and other**: at `"start"`, `"forward"` and `"zero_grad"`
#      entries, the rest of the total.
#
#   A band that is zero at an entry may be left out there. The figure below the
#   solution cell shows the result.
# - `OOM_CAUSE`: for each place an out-of-memory error was raised, the likely
#   cause, one of `OOM_CAUSES`.

# %%
OOM_CAUSES = {"optimizer state", "saved activations", "gradients"}

# %% [raw]
# # BEGIN SOLUTION

# %%
def adam_static_bytes(model):
    """Bytes of parameters, gradients and Adam's two moments, from the real tensors."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q4: write adam_static_bytes")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    total = 0
    for p in model.parameters():
        copies = 4 if p.requires_grad else 1  # parameter, gradient, exp_avg, exp_avg_sq
        total += copies * p.numel() * p.element_size()
    return total
    # END SOLUTION


def saved_activation_bytes(model, x):
    """Bytes autograd saves for backward during model(x), each storage once, parameters left out."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q4: write saved_activation_bytes")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    sizes = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):  # parameters are in memory anyway
            storage = t.untyped_storage()
            sizes[storage.data_ptr()] = storage.nbytes()
        return t.detach()  # not t: that would keep the graph alive through a cycle

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(sizes.values())
    # END SOLUTION


def memory_timeline(model, optimizer, batches, loss_fn):
    """[(phase, live bytes)] after start/forward/backward/step/zero_grad of each training step."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q4: write memory_timeline")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    timeline = []
    device = next(model.parameters()).device
    with MemoryProbe(device=device, track=(model, optimizer)) as probe:
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
    # END SOLUTION


def plot_memory_timeline(timeline):
    """Stacked bars, bottom up: base, optimizer state, gradients, activations; returns the Figure."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q4: write plot_memory_timeline")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    phases = [phase for phase, _ in timeline]
    totals = [nbytes for _, nbytes in timeline]
    base = totals[0]
    first_step = phases.index("step") if "step" in phases else len(phases)
    state = max(0, totals[first_step] - totals[first_step - 1]) if first_step < len(phases) else 0
    bands = {"parameters (base)": [], "optimizer state": [], "gradients": [], "activations and other": []}
    for i, (phase, total) in enumerate(timeline):
        below = min(base, total)
        opt = min(state if i >= first_step else 0, total - below)
        rest = total - below - opt
        bands["parameters (base)"].append(below)
        bands["optimizer state"].append(opt)
        bands["gradients"].append(rest if phase in ("backward", "step") else 0)
        bands["activations and other"].append(0 if phase in ("backward", "step") else rest)
    colors = ["#59a14f", "#edc948", "#4e79a7", "#e15759"]
    mib = 2 ** 20
    fig, ax = plt.subplots(figsize=(10, 4))
    xs = range(len(timeline))
    bottom = [0.0] * len(timeline)
    for (label, values), color in zip(bands.items(), colors):
        heights = [v / mib for v in values]
        ax.bar(xs, heights, bottom=bottom, color=color, label=label, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights)]
    top = max(bottom)
    starts = [i for i, phase in enumerate(phases) if phase == "start"] + [len(phases)]
    for k, (first, end) in enumerate(zip(starts, starts[1:])):
        if first > 0:
            ax.axvline(first - 0.5, color="0.6", linewidth=0.8, linestyle=":")
        ax.text((first + end - 1) / 2, top * 1.04, f"step {k + 1}", ha="center", fontsize=9)
    ax.set_ylim(0, top * 1.12)
    ax.set_xticks(list(xs), phases, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("live memory (MiB)")
    ax.set_title("Live memory during training steps (read bottom up)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
    # END SOLUTION


""" # BEGIN PROMPT
OOM_CAUSE = {
    "at the first optimizer step": ...,
    "late in the forward pass": ...,
    "in backward": ...,
}
""" # END PROMPT
# BEGIN SOLUTION NO PROMPT
OOM_CAUSE = {
    "at the first optimizer step": "optimizer state",
    "late in the forward pass": "saved activations",
    "in backward": "gradients",
}
# END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Three training steps of a small MLP with Adam, measured phase by phase and
# drawn the way the handout's figure reads. The green base stays; the yellow
# band arrives at the first `step()` and never leaves, so each later cycle
# starts higher; within a cycle, activations rise in the forward pass and
# backward turns them into gradients, which `zero_grad` drops.

# %%
torch.manual_seed(3)
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                    nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
steps = [(torch.randn(128, 64), torch.randint(0, 64, (128,))) for _ in range(3)]
report = []
try:
    report.append(f"adam_static_bytes: {adam_static_bytes(net):,} B (16P for P = "
                  f"{sum(p.numel() for p in net.parameters()):,})")
    report.append(f"saved activations of one forward: {saved_activation_bytes(net, steps[0][0]):,} B")
    timeline = memory_timeline(net, torch.optim.Adam(net.parameters(), lr=1e-3, foreach=False), steps,
                               F.cross_entropy)
    report += [f"step 1 {phase:>9}: {nbytes:>9,} B" for phase, nbytes in timeline[:5]]
    print("\n".join(report))
    fig = plot_memory_timeline(timeline)
    plt.show()
except NotImplementedError as exc:
    print("\n".join(report + [str(exc)]))

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_adam_static_bytes_16p(adam_static_bytes):
    import torch
    model = torch.nn.Linear(10, 5)  # P = 55 float32 parameters
    assert adam_static_bytes(model) == 16 * 55, "float32 Adam: 16 bytes per parameter"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_saved_activation_bytes_example(saved_activation_bytes):
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    got = saved_activation_bytes(model, torch.randn(3, 4))
    assert isinstance(got, int), f"return an int, got {type(got).__name__}"
    # Linear saves its input (3 x 4 floats) and its weight (a parameter); ReLU its output (3 x 8 floats).
    assert got == 144, f"expected 144 bytes (the weight is in memory anyway: leave it out), got {got}"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_memory_timeline_format(memory_timeline):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    batches = [(torch.randn(2, 4), torch.tensor([0, 2]))]
    timeline = memory_timeline(model, torch.optim.Adam(model.parameters()), batches, F.cross_entropy)
    assert [phase for phase, _ in timeline] == ["start", "forward", "backward", "step", "zero_grad"]
    assert all(isinstance(b, int) for _, b in timeline), "live memory in bytes, as ints"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_oom_cause_format(OOM_CAUSE, OOM_CAUSES):
    keys = {"at the first optimizer step", "late in the forward pass", "in backward"}
    assert isinstance(OOM_CAUSE, dict) and set(OOM_CAUSE) == keys, f"OOM_CAUSE needs exactly the keys {keys}"
    assert all(v in OOM_CAUSES for v in OOM_CAUSE.values()), "each cause is one of OOM_CAUSES"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_adam_static_bytes_hidden(adam_static_bytes):
    from hw07_checks import q4
    q4.check_adam_static_bytes(adam_static_bytes)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_saved_activation_bytes_hidden(saved_activation_bytes):
    from hw07_checks import q4
    q4.check_saved_activation_bytes(saved_activation_bytes)
    q4.check_saved_activation_bytes_no_leak(saved_activation_bytes)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_memory_timeline_hidden(memory_timeline):
    from hw07_checks import q4
    q4.check_memory_timeline(memory_timeline)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_plot_memory_timeline_hidden(plot_memory_timeline):
    from hw07_checks import q4
    q4.check_plot_memory_timeline(plot_memory_timeline)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_oom_cause_hidden(OOM_CAUSE):
    from hw07_checks import q4
    q4.check_oom_cause(OOM_CAUSE)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
