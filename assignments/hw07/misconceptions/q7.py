"""q7 variants: the spec's misconceptions M31-M33 and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M31", "q7", note="surprisal in nats, not bits", expect=("nats",), source='''
def surprisal_bits(logits, targets, pad_id=None):
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return -logp[real]
'''),
    Variant("M31-worst", "q7", note="worst token reported in nats", expect=("nats",), source='''
def worst_token(logits, targets, pad_id=None):
    nats = -F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if pad_id is not None:
        nats = nats.masked_fill(targets == pad_id, float("-inf"))
    b, t = divmod(int(nats.argmax()), targets.shape[1])
    return b, t, float(nats[b, t])
'''),
    Variant("M32", "q7", note="pad positions included in the surprisals", expect=("pad positions are included",),
            source='''
def surprisal_bits(logits, targets, pad_id=None):
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (-logp / math.log(2)).reshape(-1)
'''),
    Variant("M32-worst", "q7", note="the worst token may be a pad position", expect=("pad positions are included",),
            source='''
def worst_token(logits, targets, pad_id=None):
    bits = -F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1) / math.log(2)
    b, t = divmod(int(bits.argmax()), targets.shape[1])
    return b, t, float(bits[b, t])
'''),
    Variant("M33", "q7", note="flat index returned where (batch, time) is asked", expect=("flat index",), source='''
def worst_token(logits, targets, pad_id=None):
    bits = surprisal_bits(logits, targets, pad_id)
    i = int(bits.argmax())
    return i, float(bits[i])
'''),
    Variant("M33-real-index", "q7", note="index among real targets converted as if it were a position",
            expect=("flat index",), source='''
def worst_token(logits, targets, pad_id=None):
    bits = surprisal_bits(logits, targets, pad_id)
    i = int(bits.argmax())
    b, t = divmod(i, targets.shape[1])
    return b, t, float(bits[i])
'''),
    Variant("M60-categorical-bars", "q7", note="labels as x-values: repeated words share a bar",
            expect=("same x-position",), source='''
def plot_surprisal(bits, labels=None):
    fig, ax = plt.subplots()
    xs = labels if labels is not None else list(range(len(bits)))
    ax.bar(xs, bits.tolist())
    ax.set_ylabel("bits")
    return fig
'''),
    Variant("M49-plot-no-return", "q7", note="plots but returns nothing", expect=("return the matplotlib figure",),
            source='''
def plot_surprisal(bits, labels=None):
    plt.figure()
    plt.bar(range(len(bits)), bits.tolist())
'''),
    # correct alternatives keep full marks
    Variant("log2", "q7", correct=True, note="torch.log2 of the softmax probability", source='''
def surprisal_bits(logits, targets, pad_id=None):
    p = F.softmax(logits.double(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    bits = -torch.log2(p)
    if pad_id is not None:
        bits = bits[targets != pad_id]
    return bits.reshape(-1).to(logits.dtype)
'''),
    Variant("ln2-division", "q7", correct=True, note="cross_entropy per token divided by math.log(2)", source='''
def surprisal_bits(logits, targets, pad_id=None):
    nats = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    keep = targets.reshape(-1) != pad_id if pad_id is not None else slice(None)
    return nats[keep] / math.log(2)
'''),
    Variant("worst-loop", "q7", correct=True, note="explicit loops over positions", source='''
def worst_token(logits, targets, pad_id=None):
    logp = torch.log_softmax(logits, -1)
    best = None
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            if pad_id is not None and targets[b, t].item() == pad_id:
                continue
            bits = -logp[b, t, targets[b, t]].item() / math.log(2)
            if best is None or bits > best[2]:
                best = (b, t, bits)
    return best
'''),
    Variant("pyplot-bars", "q7", correct=True, note="pyplot interface with xticks", source='''
def plot_surprisal(bits, labels=None):
    fig = plt.figure()
    plt.bar(range(len(bits)), [float(b) for b in bits])
    if labels is not None:
        plt.xticks(range(len(bits)), labels)
    plt.ylabel("surprisal (bits)")
    return fig
'''),
    Variant("tick-label", "q7", correct=True, note="ax.bar with tick_label=, float32 heights", source='''
def plot_surprisal(bits, labels=None):
    fig, ax = plt.subplots()
    ax.bar(torch.arange(len(bits)).numpy(), bits.float().numpy(), tick_label=labels)
    ax.set_ylabel("bits")
    return fig
'''),
]

# issue 10: bar positions and the y-axis label
_BARS = '''
def plot_surprisal(bits, labels=None):
    heights = [float(b) for b in bits]
    fig, ax = plt.subplots()
    xs = {xs}
    ax.bar(xs, heights)
    if labels is not None:
        ax.set_xticks(xs, list(labels))
    {ylabel}
    return fig
'''
VARIANTS += [
    Variant("M60-from-one", "q7", note="bars at x = 1..n", expect=("x = i",),
            source=_BARS.format(xs="list(range(1, len(heights) + 1))", ylabel='ax.set_ylabel("surprisal (bits)")')),
    Variant("M60-centred-half", "q7", note="bars at x = i + 0.5", expect=("x = i",),
            source=_BARS.format(xs="[i + 0.5 for i in range(len(heights))]", ylabel='ax.set_ylabel("bits")')),
    Variant("M61-no-ylabel", "q7", note="no y-axis label", expect=("label the y-axis",),
            source=_BARS.format(xs="list(range(len(heights)))", ylabel="pass")),
    Variant("M61-ylabel-no-unit", "q7", note="y-label without the unit", expect=("label the y-axis",),
            source=_BARS.format(xs="list(range(len(heights)))", ylabel='ax.set_ylabel("surprisal")')),
    Variant("M31-ylabel-nats", "q7", note="y-label in nats", expect=("nats",),
            source=_BARS.format(xs="list(range(len(heights)))", ylabel='ax.set_ylabel("surprisal (nats)")')),
    Variant("M31-heights-nats", "q7", note="heights converted to nats", expect=("nats",), source='''
def plot_surprisal(bits, labels=None):
    fig, ax = plt.subplots()
    ax.bar(range(len(bits)), (bits * math.log(2)).tolist())
    ax.set_ylabel("surprisal (nats)")
    return fig
'''),
    Variant("bars-barh-free", "q7", correct=True, note="numpy positions, tick labels set separately, 'Bits' label",
            source='''
def plot_surprisal(bits, labels=None):
    import numpy as np
    values = np.asarray(torch.as_tensor(bits, dtype=torch.float64))
    fig = plt.figure()
    ax = fig.subplots()
    pos = np.arange(values.shape[0])
    ax.bar(pos, values, width=0.6)
    if labels is not None:
        ax.set_xticks(pos)
        ax.set_xticklabels([str(w) for w in labels], rotation=45)
    ax.set_ylabel("Bits per token")
    return fig
'''),
    Variant("bars-loop-one-each", "q7", correct=True, note="one ax.bar call per token, float32", source='''
def plot_surprisal(bits, labels=None):
    fig, ax = plt.subplots(figsize=(6, 2))
    for i, b in enumerate(bits.to(torch.float32)):
        ax.bar(i, b.item(), color="C0")
    if labels:
        plt.xticks(range(len(labels)), labels)
    ax.set(ylabel="-log2 p  [bits]", xlabel="token")
    return fig
'''),
]
