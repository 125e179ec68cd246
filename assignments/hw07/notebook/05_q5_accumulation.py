# %%
import copy

from memprobe import MemoryProbe
from torch.utils.checkpoint import checkpoint

# %% [raw]
# # BEGIN QUESTION
# name: q5
# points: 10

# %% [markdown]
# ### q5 — Responding to OOM: smaller live batches, same objective (§1.5) (10 points)
#
# When activation memory dominates, process the batch in **microbatches** and
# call `backward()` after each one: its saved tensors are released before the
# next microbatch runs, and the gradients add up in `.grad`. Keep the weights
# fixed until every microbatch is processed, then step once. The goal is the
# gradient of the **full-batch mean loss**. A microbatch of $n_k$ of the $N$
# examples contributes its mean loss weighted by its share of the examples,
# $n_k / N$ (dividing each microbatch mean by $K$ is right only when all
# microbatches have the same size; summing with `reduction="sum"` and dividing by
# $N$ is right only when the mean runs over the batch axis alone, not for MSE
# on `(B, k)` targets).
#
# First, the handout's check: accumulation with an uneven last microbatch
# gives the full-batch gradient.

# %%
torch.manual_seed(5)
full = nn.Linear(3, 2).double()
small = copy.deepcopy(full)
x5 = torch.randn(5, 3, dtype=torch.float64)
y5 = torch.tensor([0, 1, 0, 1, 1])
F.cross_entropy(full(x5), y5).backward()
for xb, yb in zip(x5.split(2), y5.split(2)):  # sizes 2, 2, 1
    (F.cross_entropy(small(xb), yb) * (len(yb) / len(y5))).backward()
print("same gradients:", all(torch.allclose(a.grad, b.grad) for a, b in zip(full.parameters(), small.parameters())))

# %% [markdown]
# Now watch what accumulation saves, and what it does not when done wrong:
# the peak memory of four microbatches of 32 examples, with `backward()` after
# each microbatch, and with the losses summed into one graph and a single
# `backward()` at the end.

# %%
torch.manual_seed(6)
mlp = nn.Sequential(*[nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU())
                      for _ in range(4)])
x_big, y_big = torch.randn(128, 128), torch.randint(0, 128, (128,))
report = []
for name in ("backward per microbatch", "sum, one backward"):
    mlp.zero_grad(set_to_none=True)
    with MemoryProbe(device="cpu") as probe:
        total = 0
        for xb, yb in zip(x_big.split(32), y_big.split(32)):
            loss = F.cross_entropy(mlp(xb), yb) * (len(xb) / len(x_big))
            if name == "backward per microbatch":
                loss.backward()
            else:
                total = total + loss  # every microbatch's graph stays attached to `total`
        if name != "backward per microbatch":
            total.backward()
        del loss, total
    report.append(f"{name:>24}: peak {probe.peak_bytes():>10,} B")
try:
    report.append(f"one microbatch's saved activations: {saved_activation_bytes(mlp, x_big[:32]):,} B")
except NotImplementedError as exc:  # q4's function
    report.append(str(exc))
print("\n".join(report))

# %% [markdown]
# **Activation checkpointing** keeps only selected boundary tensors (here:
# each block's input) and recomputes a block's intermediates during backward:
# extra compute for fewer saved activations.
#
# Write:
#
# - `accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy)`:
#   add to `.grad` exactly the gradient of the full batch's mean loss, in
#   microbatches of `micro_batch_size` examples (the last may be smaller),
#   calling `backward()` once per microbatch. Do not clear existing gradients
#   (like `backward()`, it *adds*), do not change the weights, and return the
#   full-batch mean loss as a Python float. `loss_fn(prediction, target)`
#   returns a batch mean (it also accepts `reduction=`).
# - `accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=F.cross_entropy)`:
#   one update: clear the gradients, accumulate, one optimizer step; return the
#   full-batch mean loss.
# - `checkpointed_forward(blocks, x)`: run `x` through a sequence of modules,
#   each wrapped in `checkpoint(block, x, use_reentrant=False)`; the same output
#   and gradients as the plain forward, fewer saved bytes.

# %% [raw]
# # BEGIN SOLUTION

# %%
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    """Add the full-batch gradient of the mean loss to .grad, one microbatch at a time."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q5: write accumulate_gradients")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(x))  # the microbatch mean, weighted by its share
        loss.backward()  # frees this microbatch's graph before the next one
        total += loss.item()
    return total
    # END SOLUTION


def accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    """Clear, accumulate over microbatches, one optimizer step; returns the full-batch mean loss."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q5: write accumulated_train_step")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    optimizer.zero_grad(set_to_none=True)
    loss = accumulate_gradients(model, x, y, micro_batch_size, loss_fn)
    optimizer.step()
    return loss
    # END SOLUTION


def checkpointed_forward(blocks, x):
    """Run x through the blocks in order, checkpointing each block."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q5: write checkpointed_forward")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Measure your functions: the peak of `accumulate_gradients` should not grow
# with the number of microbatches, and after `checkpointed_forward` far less
# should be alive than after the plain forward.

# %%
report = []
try:
    for k in (2, 4, 8):
        xk, yk = torch.randn(32 * k, 128), torch.randint(0, 128, (32 * k,))
        mlp.zero_grad(set_to_none=True)
        with MemoryProbe(device="cpu") as probe:
            accumulate_gradients(mlp, xk, yk, 32)
        report.append(f"K = {k}: peak {probe.peak_bytes():>10,} B")
    mlp.zero_grad(set_to_none=True)
    for name, forward in (("plain forward", mlp), ("checkpointed", lambda h: checkpointed_forward(mlp, h))):
        with MemoryProbe(device="cpu") as probe:
            out = forward(x_big[:32])
            report.append(f"{name:>14}: live after forward {probe.live_bytes():>9,} B")
            del out
except NotImplementedError as exc:
    report.append(str(exc))
print("\n".join(report))

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_accumulate_handout_example(accumulate_gradients):
    import copy
    import torch
    import torch.nn.functional as F
    torch.manual_seed(5)
    full = torch.nn.Linear(3, 2).double()
    small = copy.deepcopy(full)
    x = torch.randn(5, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 1, 1])
    F.cross_entropy(full(x), y).backward()
    loss = accumulate_gradients(small, x, y, 2)  # microbatches of 2, 2, 1
    assert isinstance(loss, float), f"return the full-batch mean loss as a Python float, got {type(loss).__name__}"
    for a, b in zip(full.parameters(), small.parameters()):
        assert b.grad is not None and torch.allclose(a.grad, b.grad), "gradients differ from the full batch's"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_checkpointed_forward_output(checkpointed_forward):
    import torch
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)]
    x = torch.randn(2, 4)
    expected = blocks[2](blocks[1](blocks[0](x)))
    out = checkpointed_forward(blocks, x)
    assert torch.allclose(out, expected), "the output should equal running the blocks in order"
    assert out.requires_grad, "the output should carry a graph for backward"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_accumulate_gradients_hidden(accumulate_gradients):
    from hw07_checks import q5
    q5.check_accumulate_gradients(accumulate_gradients)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_accumulation_memory_hidden(accumulate_gradients):
    from hw07_checks import q5
    q5.check_accumulation_memory(accumulate_gradients)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_accumulated_train_step_hidden(accumulated_train_step):
    from hw07_checks import q5
    q5.check_accumulated_train_step(accumulated_train_step)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_checkpointed_forward_hidden(checkpointed_forward):
    from hw07_checks import q5
    q5.check_checkpointed_forward(checkpointed_forward)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_checkpoint_memory_hidden(checkpointed_forward):
    from hw07_checks import q5
    q5.check_checkpoint_memory(checkpointed_forward)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
