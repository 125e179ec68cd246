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
    Variant("tied-twice", "q4", note="tied weight counted twice", expect=("tied",), source='''
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
    Variant("identity-pack-leak", "q4", note="pack hook returns t: the graph leaks", expect=("t.detach()",), source='''
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
    Variant("no-base", "q4", note="probe tracks nothing: no base", expect=("base", "track="), source=_TIMELINE_HEAD + '''
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
    Variant("peak-not-live", "q4", note="records the peak instead of live memory", expect=("the probe measures",),
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
    Variant("plot-returns-axes", "q4", note="returns the Axes, not the Figure", expect=("return fig",), source='''
def plot_memory_timeline(timeline):
    fig, ax = plt.subplots()
    ax.plot([b for _, b in timeline])
    return ax
'''),
    Variant("OOM-swapped", "q4", note="first-step OOM blamed on gradients", expect=("first step",), source='''
OOM_CAUSE = {
    "at the first optimizer step": "gradients",
    "late in the forward pass": "saved activations",
    "in backward": "optimizer state",
}
'''),
    # correct alternatives keep full marks
    Variant("storage-cdata-with-params", "q4", correct=True, note="storage key _cdata, parameters included",
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
    Variant("plot-stackplot-MB", "q4", correct=True, note="stackplot in MB", source='''
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
    Variant("plot-line-KiB", "q4", correct=True, note="a line of totals in KiB", source='''
def plot_memory_timeline(timeline):
    fig, ax = plt.subplots()
    ax.plot([b / 1024 for _, b in timeline], marker="o")
    ax.set_xticks(range(len(timeline)), [p for p, _ in timeline], rotation=90)
    return fig
'''),
]
