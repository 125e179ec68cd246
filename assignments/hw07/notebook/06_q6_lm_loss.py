# %% [markdown]
# ## Part 2 — The language-model loss
#
# A language model's loss is one line of PyTorch: cross-entropy between the
# scores at each position and the token that actually came next. Three things
# decide whether that line computes what you meant: which token is the target
# (the shift), which targets count (padding), and what you divide by (the
# denominator). Each trap below produces a number, never an error.

# %% [raw]
# # BEGIN QUESTION
# name: q6
# points: 12

# %% [markdown]
# ### q6 — Shift, mask, and what n was (§2.1–2.3) (12 points)
#
# **The off-by-one.** A causal model predicts token $t$ from tokens $< t$, so
# inputs and targets are the same sequence shifted by one: a length-5 sequence
# yields 4 predictions. Forget the shift and you train the model to copy its
# input. Watch it happen: a tiny model reads each token and scores the next one,
# on sequences where the next token is usually `previous + 1` (mod 8). One copy
# is trained with the shift, one without.

# %%
def make_sequences(n, T, V=8, seed=0):
    """Sequences where the next token is prev + 1 (mod V) with probability 0.8, else prev + 2."""
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(n, T, dtype=torch.long)
    x[:, 0] = torch.randint(0, V, (n,), generator=g)
    for t in range(1, T):
        step = 1 + (torch.rand(n, generator=g) < 0.2).long()
        x[:, t] = (x[:, t - 1] + step) % V
    return x


def tiny_lm(V=8, d=16, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Embedding(V, d), nn.Linear(d, V))


def train_tiny(shifted, steps=50, V=8):
    model = tiny_lm(V)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    data = make_sequences(64, 12, V)
    for _ in range(steps):
        inputs, targets = (data[:, :-1], data[:, 1:]) if shifted else (data, data)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, loss.item()


shift_model, shift_loss = train_tiny(shifted=True)
copy_model, copy_loss = train_tiny(shifted=False)
held_out = make_sequences(256, 12, seed=1)
with torch.no_grad():
    copy_on_task = F.cross_entropy(copy_model(held_out[:, :-1]).reshape(-1, 8), held_out[:, 1:].reshape(-1)).item()
print(f"trained with the shift:    final loss {shift_loss:.3f} nats (the data's own entropy is about 0.50)")
print(f"trained without the shift: final loss {copy_loss:.3f} nats  <- beautifully low")
print(f"the copy model asked for the next token: loss {copy_on_task:.2f} nats (uniform guessing: {math.log(8):.2f})")

# %% [markdown]
# **Padding.** Real batches pad sequences to a common length. Padding targets
# are often easy to predict, and counting them drags reported perplexity down.
# The handout's batch: 23 real targets at perplexity 12.7, and 17 padding
# targets predicted with probability 0.999.

# %%
PAD_ID, V = 0, 16
flat_targets = torch.tensor([1] * 23 + [PAD_ID] * 17)
correct_p = torch.tensor([1 / 12.7] * 23 + [0.999] * 17, dtype=torch.float64)
probs = ((1 - correct_p) / (V - 1))[:, None].repeat(1, V)
probs[torch.arange(40), flat_targets] = correct_p
flat_logits = probs.log()  # log probabilities are valid logits
masked = F.cross_entropy(flat_logits, flat_targets, ignore_index=PAD_ID)
unmasked = F.cross_entropy(flat_logits, flat_targets)
print("perplexity over real targets:", torch.exp(masked).item())
print("perplexity with padding counted:", torch.exp(unmasked).item())
print("what n was:", (flat_targets != PAD_ID).sum().item(), "real targets, not", flat_targets.numel())

# %% [markdown]
# **What you divide by.** The loss is the summed negative log-probability of
# the real targets divided by **the number of real targets**: not by the number
# of positions `B * T`, not by the number of sequences, and not the mean of
# per-sequence means (that weights a 3-token sequence like a 300-token one).
# `F.cross_entropy` wants raw scores (logits) of shape `(N, V)` and targets of
# shape `(N,)`: flatten the batch and time axes together with `reshape`, in the
# same order for both, and do not apply softmax first.
#
# Every one of these mistakes returns a plausible number. On a batch of two
# sequences, one with 3 real targets and one with 8 (padding id 0):

# %%
g = torch.Generator().manual_seed(0)
demo_logits = torch.randn(2, 8, 5, generator=g, dtype=torch.float64) * 2
demo_targets = torch.randint(1, 5, (2, 8), generator=g)
demo_targets[0, 3:] = 0  # sequence 0: 3 real targets, then padding
nll = -F.log_softmax(demo_logits, dim=-1).gather(-1, demo_targets[..., None]).squeeze(-1)  # (B, T)
real = demo_targets != 0
candidates = {
    "sum over real targets / real targets (correct)": nll[real].sum() / real.sum(),
    "padding counted": nll.mean(),
    "sum over real targets / positions B*T": nll[real].sum() / real.numel(),
    "sum over real targets / sequences B": nll[real].sum() / 2,
    "mean of per-sequence means": torch.stack([nll[b][real[b]].mean() for b in range(2)]).mean(),
    "softmax before cross_entropy": F.cross_entropy(demo_logits.softmax(-1).reshape(-1, 5), demo_targets.reshape(-1),
                                                    ignore_index=0),
    "transpose before reshape": F.cross_entropy(demo_logits.transpose(0, 1).reshape(-1, 5), demo_targets.reshape(-1),
                                                ignore_index=0),
}
for label, value in candidates.items():
    print(f"{value.item():7.3f}  {label}")

# %% [markdown]
# Write:
#
# - `shift_for_next_token(x)`: `(B, T)` token ids to `(inputs, targets)`, each
#   `(B, T-1)`.
# - `lm_loss(logits, targets, pad_id=None)`: `(B, T, V)` logits and `(B, T)`
#   targets (already aligned) to a 0-dim tensor: the mean negative
#   log-probability over the targets that are not `pad_id` (all of them when
#   `pad_id` is `None`). The result must stay connected to the graph, so
#   `lm_loss(...).backward()` works.
# - `perplexity(logits, targets, pad_id=None)`: $\exp$ of that loss, as a
#   Python `float`.
# - `accumulate_lm_gradients(model, batch, micro_batch_size, pad_id)`: `batch`
#   is `(B, T)` token ids with padding; shift inside, run `model` on
#   microbatches of at most `micro_batch_size` sequences (`model(inputs)` maps
#   `(b, T-1)` ids to `(b, T-1, V)` logits), and call `backward` once per
#   microbatch so that `.grad` **grows by** the gradient of the token-averaged
#   loss over the whole batch. Microbatches hold different numbers of real
#   targets: divide each microbatch's summed loss by the real targets of the
#   **whole batch**. Do not clear `.grad`, do not step. Return the batch's mean
#   loss as a float.

# %% [raw]
# # BEGIN SOLUTION

# %%
def shift_for_next_token(x):
    """(B, T) token ids -> (inputs, targets), each (B, T-1): predict x[:, t+1] from x[:, :t+1]."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q6: write shift_for_next_token")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return x[:, :-1], x[:, 1:]
    # END SOLUTION


def lm_loss(logits, targets, pad_id=None):
    """(B, T, V) logits, (B, T) targets -> mean negative log-probability over non-pad targets (0-dim)."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q6: write lm_loss")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    V = logits.size(-1)
    ignore = -100 if pad_id is None else pad_id  # -100 is never a token id
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore)
    # END SOLUTION


def perplexity(logits, targets, pad_id=None):
    """exp(mean negative log-probability over non-pad targets), as a Python float."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q6: write perplexity")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    with torch.no_grad():
        return math.exp(lm_loss(logits, targets, pad_id).item())
    # END SOLUTION


def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    """Add to .grad the gradient of the whole batch's token-averaged LM loss, one microbatch at a time."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q6: write accumulate_lm_gradients")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ignore = -100 if pad_id is None else pad_id
    n_real = int((targets != ignore).sum())  # real targets of the whole batch: the one denominator
    total = 0.0
    for start in range(0, batch.shape[0], micro_batch_size):
        logits = model(inputs[start:start + micro_batch_size])
        summed = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                 targets[start:start + micro_batch_size].reshape(-1),
                                 ignore_index=ignore, reduction="sum")
        (summed / n_real).backward()  # frees this microbatch's graph before the next forward
        total += summed.item()
    return total / n_real
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Your functions on the handout's padded batch (one sequence of 40 targets),
# and the shift on the handout's sequence:

# %%
try:
    print("shift:", [t.tolist() for t in shift_for_next_token(torch.tensor([[5, 9, 2, 7, 4]]))])
    print("perplexity, padding excluded:", perplexity(flat_logits[None], flat_targets[None], pad_id=PAD_ID))
    print("perplexity, padding counted: ", perplexity(flat_logits[None], flat_targets[None]))
except NotImplementedError as exc:
    print(exc)

# %% [markdown]
# Accumulation with uneven microbatches gives the full-batch gradient only with
# the whole batch's count as the denominator. Compare with one full-batch
# backward (in float64, they agree to rounding):

# %%
try:
    lm = tiny_lm(V=9).double()  # tokens 0..7, and 8 for padding
    padded = make_sequences(5, 9, seed=2)
    for row, length in enumerate([9, 3, 6, 2, 8]):
        padded[row, length:] = 8
    accumulate_lm_gradients(lm, padded, micro_batch_size=2, pad_id=8)
    accumulated = [p.grad.clone() for p in lm.parameters()]
    lm.zero_grad(set_to_none=True)
    inputs, targets = padded[:, :-1], padded[:, 1:]
    F.cross_entropy(lm(inputs).reshape(-1, 9), targets.reshape(-1), ignore_index=8).backward()
    print("same gradient as the full batch:",
          all(torch.allclose(a, p.grad) for a, p in zip(accumulated, lm.parameters())))
except NotImplementedError as exc:
    print(exc)

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_shift_example(shift_for_next_token):
    import torch
    inputs, targets = shift_for_next_token(torch.tensor([[5, 9, 2, 7, 4]]))
    assert inputs.tolist() == [[5, 9, 2, 7]], f"inputs drop the last token: expected [[5, 9, 2, 7]], got {inputs.tolist()}"
    assert targets.tolist() == [[9, 2, 7, 4]], f"targets drop the first token: expected [[9, 2, 7, 4]], got {targets.tolist()}"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_lm_loss_handout_example(lm_loss, perplexity):
    import math
    import torch
    V = 16
    targets = torch.tensor([[1] * 23 + [0] * 17])
    p = torch.tensor([1 / 12.7] * 23 + [0.999] * 17, dtype=torch.float64)
    probs = ((1 - p) / (V - 1))[:, None].repeat(1, V)
    probs[torch.arange(40), targets[0]] = p
    logits = probs.log()[None]  # (1, 40, 16)
    loss = lm_loss(logits, targets, pad_id=0)
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0, "lm_loss returns a 0-dim tensor"
    assert abs(loss.item() - math.log(12.7)) < 1e-8, f"masked loss should be log(12.7) = {math.log(12.7):.6f}, got {loss.item():.6f}"
    ppl = perplexity(logits, targets, pad_id=0)
    assert isinstance(ppl, float), f"perplexity returns a Python float, got {type(ppl).__name__}"
    assert abs(ppl - 12.7) < 1e-6, f"real-target perplexity is 12.7, got {ppl}"
    assert 4.3 < perplexity(logits, targets) < 4.4, "with pad_id=None every target counts: about 4.31"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_accumulate_lm_gradients_runs(accumulate_lm_gradients):
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5)).double()
    batch = torch.tensor([[1, 2, 3, 4], [2, 3, 0, 0], [4, 1, 2, 0]])
    loss = accumulate_lm_gradients(model, batch, 2, 0)
    assert isinstance(loss, float), f"return the batch's mean loss as a Python float, got {type(loss).__name__}"
    assert all(p.grad is not None for p in model.parameters()), "every parameter should have a .grad after the call"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_shift_hidden(shift_for_next_token):
    from hw07_checks import q6
    q6.check_shift_for_next_token(shift_for_next_token)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 4
""" # END TEST CONFIG
def test_lm_loss_hidden(lm_loss):
    from hw07_checks import q6
    q6.check_lm_loss(lm_loss)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_perplexity_hidden(perplexity):
    from hw07_checks import q6
    q6.check_perplexity(perplexity)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 4
""" # END TEST CONFIG
def test_accumulate_lm_gradients_hidden(accumulate_lm_gradients):
    from hw07_checks import q6
    q6.check_accumulate_lm_gradients(accumulate_lm_gradients)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
