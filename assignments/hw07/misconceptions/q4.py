"""q4 variants: the spec's misconceptions M15-M17, other slips, and correct alternatives."""
from coursekit.harness import Variant

_TIMELINE_HEAD = '''
def memory_timeline(model, optimizer, batches, loss_fn):
    timeline = []
    device = next(model.parameters()).device
'''

VARIANTS = [
    Variant("M15", "q4", note="16P for every dtype and frozen parameter", expect=("16P",), source='''
def adam_static_bytes(model):
    return 16 * sum(p.numel() for p in model.parameters())
'''),
    Variant("M15-frozen", "q4", note="dtype-aware, but frozen parameters get gradients and moments",
            expect=("frozen",), source='''
def adam_static_bytes(model):
    return sum(4 * p.numel() * p.element_size() for p in model.parameters())
'''),
    Variant("M15-dtype", "q4", note="frozen handled, 4 bytes per element assumed", expect=("element_size",), source='''
def adam_static_bytes(model):
    return sum((16 if p.requires_grad else 4) * p.numel() for p in model.parameters())
'''),
    Variant("M45-tied-twice", "q4", note="tied weight counted twice", expect=("tied",), source='''
def adam_static_bytes(model):
    return sum((4 if p.requires_grad else 1) * p.numel() * p.element_size()
               for _, p in model.named_parameters(remove_duplicate=False))
'''),
    Variant("M16", "q4", note="every saved tensor counted, views of one storage twice", expect=("storage once",),
            source='''
def saved_activation_bytes(model, x):
    total = [0]

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            total[0] += t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return total[0]
'''),
    Variant("M16-by-id", "q4", note="deduplicated by id(t), not by storage", expect=("storage",), source='''
def saved_activation_bytes(model, x):
    seen = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            seen[id(t)] = t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())
'''),
    Variant("M46-identity-pack-leak", "q4", note="pack hook returns t: the graph leaks", expect=("t.detach()",), source='''
def saved_activation_bytes(model, x):
    sizes = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(sizes.values())
'''),
    Variant("M17", "q4", note="'step' recorded before optimizer.step()", expect=("optimizer state arriving",),
            source=_TIMELINE_HEAD + '''
    with MemoryProbe(device=device, track=(model, optimizer)) as probe:
        for x, y in batches:
            timeline.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            timeline.append(("forward", probe.live_bytes()))
            loss.backward()
            timeline.append(("backward", probe.live_bytes()))
            timeline.append(("step", probe.live_bytes()))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            timeline.append(("zero_grad", probe.live_bytes()))
            del loss
    return timeline
'''),
    Variant("M17-probe-per-step", "q4", note="a new probe per step that tracks only the model",
            expect=("higher baseline",), source=_TIMELINE_HEAD + '''
    for x, y in batches:
        with MemoryProbe(device=device, track=model) as probe:
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
'''),
    Variant("M47-no-base", "q4", note="probe tracks nothing: no base", expect=("base", "track="), source=_TIMELINE_HEAD + '''
    with MemoryProbe(device=device) as probe:
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
'''),
    Variant("M48-peak-not-live", "q4", note="records the peak instead of live memory", expect=("peak_bytes",),
            source=_TIMELINE_HEAD + '''
    with MemoryProbe(device=device, track=(model, optimizer)) as probe:
        for x, y in batches:
            timeline.append(("start", probe.peak_bytes()))
            loss = loss_fn(model(x), y)
            timeline.append(("forward", probe.peak_bytes()))
            loss.backward()
            timeline.append(("backward", probe.peak_bytes()))
            optimizer.step()
            timeline.append(("step", probe.peak_bytes()))
            optimizer.zero_grad(set_to_none=True)
            timeline.append(("zero_grad", probe.peak_bytes()))
            del loss
    return timeline
'''),
    Variant("M49-plot-returns-axes", "q4", note="returns the Axes, not the Figure", expect=("return fig",), source='''
def plot_memory_timeline(timeline):
    fig, ax = plt.subplots()
    ax.plot([b for _, b in timeline])
    return ax
'''),
    Variant("M51-OOM-swapped", "q4", note="first-step OOM blamed on gradients", expect=("first step",), source='''
OOM_CAUSE = {
    "at the first optimizer step": "gradients",
    "late in the forward pass": "saved activations",
    "in backward": "optimizer state",
}
'''),
    # correct alternatives keep full marks
    Variant("M52-with-params", "q4", note="storage key _cdata, parameters (and their views) included",
            expect=("parameter",),
            source='''
def saved_activation_bytes(model, x):
    sizes = {}

    def pack(t):
        s = t.untyped_storage()
        sizes[s._cdata] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return sum(sizes.values())
'''),
    Variant("nbytes", "q4", correct=True, note="p.nbytes and a generator expression", source='''
def adam_static_bytes(model):
    return int(sum(p.nbytes * (4 if p.requires_grad else 1) for p in model.parameters()))
'''),
    Variant("timeline-default-device", "q4", correct=True, note="probe on the default device, del loss earlier",
            source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    out = []
    with MemoryProbe(track=[model, optimizer]) as probe:
        for x, y in batches:
            out.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            out.append(("forward", probe.live_bytes()))
            loss.backward()
            del loss
            out.append(("backward", probe.live_bytes()))
            optimizer.step()
            out.append(("step", probe.live_bytes()))
            optimizer.zero_grad()
            out.append(("zero_grad", probe.live_bytes()))
    return out
'''),
    Variant("M50-stackplot", "q4", note="stackplot of two bands (no bars)", expect=("stacked bar",), source='''
def plot_memory_timeline(timeline):
    totals = [b / 1e6 for _, b in timeline]
    base = [min(totals[0], t) for t in totals]
    rest = [t - b for t, b in zip(totals, base)]
    fig = plt.figure()
    ax = fig.add_subplot()
    ax.stackplot(range(len(totals)), base, rest, labels=["base", "the rest"])
    ax.set_ylabel("MB")
    return fig
'''),
    Variant("M50-line-totals", "q4", note="a line of totals, no bands", expect=("stacked bar",), source='''
def plot_memory_timeline(timeline):
    fig, ax = plt.subplots()
    ax.plot([b / 1024 for _, b in timeline], marker="o")
    ax.set_xticks(range(len(timeline)), [p for p, _ in timeline], rotation=90)
    return fig
'''),
]

# issue 10: saved views of parameters, storages keyed by the view, an optimizer that holds state,
# zero_grad without set_to_none, the figure's bands and positions
_PLOT_BANDS = '''
def _bands(timeline):
    phases = [p for p, _ in timeline]
    totals = [b for _, b in timeline]
    first = phases.index("step")
    state = max(0, totals[first] - totals[first - 1])
    rows = []
    for i, (phase, total) in enumerate(timeline):
        base = min(totals[0], total)
        opt = min(state if i >= first else 0, total - base)
        rest = total - base - opt
        grads = rest if phase in ("backward", "step") else 0
        rows.append((base, opt, grads, rest - grads))
    return rows
'''

VARIANTS += [
    Variant("M52-leaf-only", "q4", note="leaves out t when t itself is a leaf parameter, keeps its views",
            expect=("parameter",), source='''
def saved_activation_bytes(model, x):
    seen = {}

    def pack(t):
        if not (t.is_leaf and t.requires_grad):
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())
'''),
    Variant("M52-isinstance-parameter", "q4", note="leaves out nn.Parameter instances only", expect=("parameter",),
            source='''
def saved_activation_bytes(model, x):
    seen = {}

    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())
'''),
    Variant("M16-view-ptr", "q4", note="keyed by the view's data_ptr, the view's own size", expect=("storage",),
            source='''
def saved_activation_bytes(model, x):
    seen = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            seen[t.data_ptr()] = t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())
'''),
    Variant("M16-first-view-size", "q4", note="storage key, but the first view's size", expect=("storage",),
            source='''
def saved_activation_bytes(model, x):
    seen = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            seen.setdefault(t.untyped_storage().data_ptr(), t.numel() * t.element_size())
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())
'''),
    Variant("saved-base-walk", "q4", correct=True, note="walks ._base to the root, a set of storages", source='''
def saved_activation_bytes(model, x):
    storages = {}

    def pack(t):
        root = t
        while root._base is not None:
            root = root._base
        if not (root.is_leaf and root.requires_grad):
            st = t.untyped_storage()
            storages[st.data_ptr()] = int(st.nbytes())
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return int(sum(storages.values()))
'''),
    Variant("saved-param-ptrs", "q4", correct=True, note="parameters recognised by their storages' addresses",
            source='''
def saved_activation_bytes(model, x):
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    sizes = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in param_ptrs:
            sizes[s.data_ptr()] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(sizes.values())
'''),
    Variant("M47-model-only", "q4", note="probe tracks the model only", expect=("optimizer",), source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    out = []
    with MemoryProbe(device=next(model.parameters()).device, track=model) as probe:
        for x, y in batches:
            out.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            out.append(("forward", probe.live_bytes()))
            loss.backward()
            out.append(("backward", probe.live_bytes()))
            optimizer.step()
            out.append(("step", probe.live_bytes()))
            optimizer.zero_grad(set_to_none=True)
            out.append(("zero_grad", probe.live_bytes()))
            del loss
    return out
'''),
    Variant("M47-params-list", "q4", note="tracks list(model.parameters()) only", expect=("optimizer",), source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    out = []
    with MemoryProbe(device=next(model.parameters()).device, track=list(model.parameters())) as probe:
        for x, y in batches:
            out.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            out.append(("forward", probe.live_bytes()))
            loss.backward()
            out.append(("backward", probe.live_bytes()))
            optimizer.step()
            out.append(("step", probe.live_bytes()))
            optimizer.zero_grad(set_to_none=True)
            out.append(("zero_grad", probe.live_bytes()))
            del loss
    return out
'''),
    Variant("M35-timeline-zero-in-place", "q4", note="zero_grad(set_to_none=False) in the timeline",
            expect=("set_to_none=True",), source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    out = []
    with MemoryProbe(device=next(model.parameters()).device, track=(model, optimizer)) as probe:
        for x, y in batches:
            out.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            out.append(("forward", probe.live_bytes()))
            loss.backward()
            out.append(("backward", probe.live_bytes()))
            optimizer.step()
            out.append(("step", probe.live_bytes()))
            optimizer.zero_grad(set_to_none=False)
            out.append(("zero_grad", probe.live_bytes()))
            del loss
    return out
'''),
    Variant("M35-timeline-grad-zero_", "q4", note="p.grad.zero_() for each parameter", expect=("set_to_none=True",),
            source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    out = []
    with MemoryProbe(device=next(model.parameters()).device, track=(model, optimizer)) as probe:
        for x, y in batches:
            out.append(("start", probe.live_bytes()))
            loss = loss_fn(model(x), y)
            out.append(("forward", probe.live_bytes()))
            loss.backward()
            out.append(("backward", probe.live_bytes()))
            optimizer.step()
            out.append(("step", probe.live_bytes()))
            for p in model.parameters():
                p.grad.zero_()
            out.append(("zero_grad", probe.live_bytes()))
            del loss
    return out
'''),
    Variant("timeline-track-separately", "q4", correct=True, note="probe.track(model, optimizer) inside the block",
            source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    readings = []
    probe = MemoryProbe(device=next(model.parameters()).device)
    with probe:
        probe.track(model, optimizer)
        for x, y in batches:
            readings.append(["start", probe.live_bytes()])
            loss = loss_fn(model(x), y)
            readings.append(["forward", probe.live_bytes()])
            loss.backward()
            loss = None
            readings.append(["backward", probe.live_bytes()])
            optimizer.step()
            readings.append(["step", probe.live_bytes()])
            for p in model.parameters():
                p.grad = None
            readings.append(["zero_grad", probe.live_bytes()])
    return [tuple(r) for r in readings]
'''),
    Variant("timeline-dict-phases", "q4", correct=True, note="phases driven by a dict of callables", source='''
def memory_timeline(model, optimizer, batches, loss_fn):
    timeline = []
    with MemoryProbe(device=next(model.parameters()).device, track=[model, optimizer]) as probe:
        for x, y in batches:
            box = {}
            phases = {
                "start": lambda: None,
                "forward": lambda: box.__setitem__("loss", loss_fn(model(x), y)),
                "backward": lambda: box.pop("loss").backward(),
                "step": optimizer.step,
                "zero_grad": lambda: optimizer.zero_grad(set_to_none=True),
            }
            for name, action in phases.items():
                action()
                timeline.append((name, int(probe.live_bytes())))
    return timeline
'''),
    Variant("M50-two-bands", "q4", note="base and everything else: two bands", expect=("band",), source='''
def plot_memory_timeline(timeline):
    totals = [b for _, b in timeline]
    base = [min(totals[0], t) for t in totals]
    fig, ax = plt.subplots()
    xs = list(range(len(totals)))
    ax.bar(xs, base)
    ax.bar(xs, [t - b for t, b in zip(totals, base)], bottom=base)
    ax.set_ylabel("bytes")
    return fig
'''),
    Variant("M50-activations-below-gradients", "q4", note="bands stacked in another order", expect=("order",),
            source=_PLOT_BANDS + '''

def plot_memory_timeline(timeline):
    rows = _bands(timeline)
    fig, ax = plt.subplots()
    bottom = [0] * len(rows)
    for k in (0, 3, 1, 2):
        heights = [r[k] for r in rows]
        ax.bar(range(len(rows)), heights, bottom=bottom)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylabel("bytes")
    return fig
'''),
    Variant("M50-from-one", "q4", note="stacks at x = 1..n", expect=("x = i",), source=_PLOT_BANDS + '''

def plot_memory_timeline(timeline):
    rows = _bands(timeline)
    fig, ax = plt.subplots()
    bottom = [0] * len(rows)
    for k in range(4):
        heights = [r[k] for r in rows]
        ax.bar(range(1, len(rows) + 1), heights, bottom=bottom)
        bottom = [b + h for b, h in zip(bottom, heights)]
    return fig
'''),
    Variant("plot-kib-loop", "q4", correct=True, note="one ax.bar per entry and band, KiB", source=_PLOT_BANDS + '''

def plot_memory_timeline(timeline):
    fig = plt.figure(figsize=(8, 3))
    ax = fig.add_axes([0.1, 0.2, 0.85, 0.7])
    for i, row in enumerate(_bands(timeline)):
        y = 0.0
        for k, value in enumerate(row):
            ax.bar(i, value / 1024, bottom=y, color=f"C{k}")
            y += value / 1024
    ax.set_ylabel("KiB")
    return fig
'''),
    Variant("plot-numpy-MB", "q4", correct=True, note="numpy arrays, MB, legend, zero bands left out",
            source=_PLOT_BANDS + '''

def plot_memory_timeline(timeline):
    import numpy as np
    rows = np.array(_bands(timeline), dtype=float) / 1e6
    fig, ax = plt.subplots()
    bottom = np.zeros(len(rows))
    names = ["parameters", "optimizer state", "gradients", "activations"]
    for k in range(4):
        keep = rows[:, k] > 0
        ax.bar(np.arange(len(rows))[keep], rows[keep, k], bottom=bottom[keep], label=names[k])
        bottom += rows[:, k]
    ax.legend()
    ax.set_ylabel("MB")
    return fig
'''),
]
