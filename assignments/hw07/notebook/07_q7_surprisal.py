# %% [raw]
# # BEGIN QUESTION
# name: q7
# points: 8

# %% [markdown]
# ### q7 — The token that cost you (§2.4) (8 points)
#
# The loss is an average of per-token surprisals, so you can always break it
# back apart. The surprisal of a target in **bits** is $-\log_2 p(\text{target})$;
# `log_softmax` gives natural logs (nats), so divide by $\ln 2$ (or use
# `torch.log2`). The mean surprisal in bits, exponentiated base 2, equals the
# mean loss in nats exponentiated base $e$ — when both average over the same
# evaluated positions.
#
# Here is a bigram model read off a tiny corpus, and two sentences for it to score.

# %%
corpus = "the cat sat on the mat . the dog sat on the log . the cat saw the dog .".split()
words = sorted(set(corpus))
word_id = {w: i for i, w in enumerate(words)}
counts = torch.full((len(words), len(words)), 0.1)  # a little smoothing: unseen pairs stay possible
for a, b in zip(corpus, corpus[1:]):
    counts[word_id[a], word_id[b]] += 1
bigram_logits = (counts / counts.sum(1, keepdim=True)).log()  # row a: log p(next | a)

sentences = ["the dog sat on the mat .", "the mat saw on the cat ."]
ids = torch.tensor([[word_id[w] for w in s.split()] for s in sentences])  # (2, 7)
sent_inputs, sent_targets = ids[:, :-1], ids[:, 1:]
sent_logits = bigram_logits[sent_inputs]  # (2, 6, V): the score of every next word at every position
sent_loss = F.cross_entropy(sent_logits.reshape(-1, len(words)), sent_targets.reshape(-1))
print(f"mean loss {sent_loss.item():.3f} nats, perplexity {sent_loss.exp().item():.2f}")

# %% [markdown]
# Write:
#
# - `surprisal_bits(logits, targets, pad_id=None)`: `(B, T, V)` logits and
#   `(B, T)` targets to a 1-D tensor of surprisals in bits, one per **real**
#   target (targets equal to `pad_id` are left out), in (batch, time) order.
# - `worst_token(logits, targets, pad_id=None)`: the costliest real target as
#   `(batch index, time index, bits)`, a tuple of `int`, `int`, `float`. Its
#   position in the batch, not its position in the flat list of real targets.
# - `plot_surprisal(bits, labels=None)`: a bar chart with one bar per token,
#   bar `i` at x-position `i` with height `bits[i]` (accept a 1-D tensor);
#   when `labels` are given, they are the tick labels under the bars (a
#   sentence can repeat a word). Give the y-axis a label that names the unit,
#   bits (for example `"surprisal (bits)"`). Use bars (`ax.bar`), and return
#   the matplotlib `Figure`.

# %% [raw]
# # BEGIN SOLUTION

# %%
def surprisal_bits(logits, targets, pad_id=None):
    """Surprisal in bits of every real target, flat in (batch, time) order."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q7: write surprisal_bits")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T), nats
    bits = -logp / math.log(2)
    real = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return bits[real]  # boolean indexing keeps (batch, time) order
    # END SOLUTION


def worst_token(logits, targets, pad_id=None):
    """(batch index, time index, bits) of the real target with the highest surprisal."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q7: write worst_token")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    logp = F.log_softmax(logits.detach(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    bits = -logp / math.log(2)
    if pad_id is not None:
        bits = bits.masked_fill(targets == pad_id, float("-inf"))  # padding can never be the worst
    flat = int(bits.argmax())
    b, t = divmod(flat, targets.shape[1])  # flat index over (B, T) -> (batch, time)
    return b, t, float(bits[b, t])
    # END SOLUTION


def plot_surprisal(bits, labels=None):
    """Bar chart of per-token surprisal in bits; returns the Figure."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q7: write plot_surprisal")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    heights = torch.as_tensor(bits).detach().cpu().double().tolist()
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(heights)), 3))
    positions = list(range(len(heights)))
    ax.bar(positions, heights, color="tab:blue")
    if labels is not None:
        ax.set_xticks(positions, [str(label) for label in labels])  # positions, so repeated words keep their own bar
    ax.set_ylabel("surprisal (bits)")
    ax.set_xlabel("target token")
    fig.tight_layout()
    return fig
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Break the loss of the two sentences into bars, find the word that cost the
# most, and confirm that the two averages meet.

# %%
try:
    sent_bits = surprisal_bits(sent_logits, sent_targets)
    wb, wt, worst_bits = worst_token(sent_logits, sent_targets)
    print(f"worst: sentence {wb}, target {wt} ({words[sent_targets[wb, wt]]!r} after "
          f"{words[sent_inputs[wb, wt]]!r}), {worst_bits:.2f} bits")
    print("2 ** mean bits:", (2 ** sent_bits.mean()).item(), " exp(loss):", sent_loss.exp().item())
    fig = plot_surprisal(sent_bits, labels=[words[i] for i in sent_targets.reshape(-1)])
except NotImplementedError as exc:
    print(exc)

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_surprisal_bits_example(surprisal_bits, worst_token):
    import math
    import torch
    # two equally likely tokens: every target costs exactly 1 bit
    logits = torch.zeros(1, 3, 2)
    targets = torch.tensor([[0, 1, 1]])
    bits = surprisal_bits(logits, targets)
    assert isinstance(bits, torch.Tensor) and tuple(bits.shape) == (3,), "one surprisal per target, a 1-D tensor"
    assert torch.allclose(bits, torch.ones(3)), f"p = 1/2 costs 1 bit, got {bits.tolist()}"
    assert tuple(surprisal_bits(logits, targets, pad_id=0).shape) == (2,), "targets equal to pad_id are left out"
    logits[0, 1, 0] = 3.0  # target 1 at position 1 becomes unlikely
    b, t, worst = worst_token(logits, targets)
    assert (b, t) == (0, 1), f"the costliest target is at (batch 0, time 1), got {(b, t)}"
    assert abs(worst + math.log2(1 / (1 + math.exp(3.0)))) < 1e-5, "bits of the costliest target"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_plot_surprisal_returns_figure(plot_surprisal):
    import matplotlib.pyplot as plt
    import torch
    from matplotlib.figure import Figure
    fig = plot_surprisal(torch.tensor([1.0, 2.5, 0.5]), labels=["a", "b", "c"])
    try:
        assert isinstance(fig, Figure), f"return the matplotlib Figure, got {type(fig).__name__}"
    finally:
        plt.close("all")

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_surprisal_bits_hidden(surprisal_bits):
    from hw07_checks import q7
    q7.check_surprisal_bits(surprisal_bits)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_worst_token_hidden(worst_token):
    from hw07_checks import q7
    q7.check_worst_token(worst_token)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_plot_surprisal_hidden(plot_surprisal):
    from hw07_checks import q7
    q7.check_plot_surprisal(plot_surprisal)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
