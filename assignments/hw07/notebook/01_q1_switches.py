# %% [markdown]
# ## Part 1 — Execution modes, batching and memory

# %%
import gc

from memprobe import MemoryProbe

torch.set_num_threads(1)  # the tensors of this homework are small: one thread is faster
# The memory probe collects garbage before each reading; freezing the objects that exist
# now (imported modules) makes those collections cheap.
gc.collect()
gc.freeze()

# %% [raw]
# # BEGIN QUESTION
# name: q1
# points: 10

# %% [markdown]
# ### q1 — Three switches with three different jobs (§1.1) (10 points)
#
# A module's **training flag**, autograd's **recording mode** and a
# parameter's **gradient buffer** are separate pieces of state. Changing one
# does not change the others. Read a training loop by asking three questions:
# which forward behaviour is active, is a backward graph being built, and what
# is already in the gradient buffers?
#
# Run the handout's experiment and watch each switch do exactly one job.

# %%
torch.manual_seed(4)
model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, target = torch.randn(4, 3), torch.randn(4, 1)

model.train()
optimizer.zero_grad(set_to_none=True)
loss = (model(x) - target).square().mean()
loss.backward()
optimizer.step()
old_grad = model[0].weight.grad.clone()

model.eval()
seen = [f"after eval(), the forward still records a graph: {model(x).requires_grad}"]
with torch.no_grad():
    prediction = model(x)
seen.append(f"under no_grad(), it does not: {prediction.requires_grad}")
seen.append(f"neither touched the gradients: {torch.equal(model[0].weight.grad, old_grad)}")
optimizer.zero_grad(set_to_none=True)
seen.append(f"zero_grad(set_to_none=True) drops them: {all(p.grad is None for p in model.parameters())}")
model.train()  # ready for the next training step
print("\n".join(seen))

# %% [markdown]
# `backward()` **adds** to the leaves' `.grad`. Call it twice without clearing
# and the second gradient is the sum of both:

# %%
w = torch.ones(2, requires_grad=True)
(3 * w).sum().backward()
(3 * w).sum().backward()
print("gradient after two backward calls without clearing:", w.grad.tolist())

# %% [markdown]
# Write:
#
# - `train_step(model, optimizer, loss_fn, x, y)`: one ordinary update. Put the
#   model in training mode, clear the gradient buffers with
#   `set_to_none=True` **before** backward, then forward, loss, backward, step.
#   Return the loss as a Python `float` (`loss.item()`): a loss tensor keeps its
#   graph alive for as long as anyone holds it.
# - `evaluate(model, batches, loss_fn)`: the mean of `loss_fn` over the whole
#   data set, returned as a Python `float`. `batches` is an iterable of `(x, y)`
#   batches of possibly different sizes (it may be a generator, so go through
#   it once); `loss_fn` returns a batch *mean*, so weight each batch's value by
#   its number of examples `len(x)` and divide by the total number of examples
#   (for a loss with several outputs per example, such as MSE on `(B, k)`
#   targets, this is still the mean over the whole data set). Use
#   `eval()` and `no_grad()`, leave the model in the training mode you found it
#   in, do not touch any `.grad` (validation needs no gradient clearing: it
#   performs no backward pass), and keep no graph.
# - `SWITCHES`: for each operation, the set of things it changes, chosen from
#   `PARTS`. The optimizer is `torch.optim.Adam` (it keeps per-parameter state).

# %%
PARTS = {"forward behavior", "graph recording", "gradient buffers", "parameters", "optimizer state"}

# %% [raw]
# # BEGIN SOLUTION

# %%
def train_step(model, optimizer, loss_fn, x, y):
    """One update on the batch (x, y); returns the loss as a Python float."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q1: write train_step")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
    # END SOLUTION


def evaluate(model, batches, loss_fn):
    """Mean loss per example over (x, y) batches, in eval mode and without a graph."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q1: write evaluate")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for xb, yb in batches:
                total += loss_fn(model(xb), yb).item() * len(xb)  # batch mean -> batch sum
                count += len(xb)
    finally:
        model.train(was_training)
    return total / count
    # END SOLUTION


""" # BEGIN PROMPT
SWITCHES = {
    "model.eval()": set(),
    "model.train()": set(),
    "torch.no_grad()": set(),
    "optimizer.zero_grad(set_to_none=True)": set(),
    "loss.backward()": set(),
    "optimizer.step()": set(),
}
""" # END PROMPT
# BEGIN SOLUTION NO PROMPT
SWITCHES = {
    "model.eval()": {"forward behavior"},
    "model.train()": {"forward behavior"},
    "torch.no_grad()": {"graph recording"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "loss.backward()": {"gradient buffers"},
    "optimizer.step()": {"parameters", "optimizer state"},
}
# END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Train a few steps, then validate on batches of uneven sizes. The training
# flag must survive validation, and the gradients must be exactly as
# training left them.

# %%
torch.manual_seed(1)
model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x_train, y_train = torch.randn(64, 3), torch.randn(64, 1)
x_val, y_val = torch.randn(25, 3), torch.randn(25, 1)
report = []  # printed once at the end
try:
    for step in range(3):
        report.append(f"step {step}: training loss {train_step(model, optimizer, F.mse_loss, x_train, y_train):.4f}")
    grads = [p.grad.clone() for p in model.parameters()]
    val = evaluate(model, zip(x_val.split(10), y_val.split(10)), F.mse_loss)  # sizes 10, 10, 5
    report.append(f"validation loss per example: {val:.4f}")
    report.append(f"still in training mode: {model.training}")
    report.append(f"gradients untouched: {all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads))}")
except NotImplementedError as exc:
    report.append(str(exc))
print("\n".join(report))

# %% [markdown]
# **What `no_grad()` saves.** `eval()` alone still records a graph, and each
# recorded graph keeps the activations it saved for backward. Measure it with
# the memory probe (`memprobe.py`, next to this notebook): the peak of a
# validation loop with and without `no_grad()`.

# %%
torch.manual_seed(2)
deep = nn.Sequential(*[nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU())
                       for _ in range(8)])
val_batches = [(torch.randn(32, 128), torch.randint(0, 128, (32,))) for _ in range(4)]


def eval_without_no_grad(model, batches, loss_fn):
    model.eval()  # layer behaviour switched, but every forward still records a graph
    total = sum(loss_fn(model(xb), yb).item() * len(xb) for xb, yb in batches)
    return total / sum(len(xb) for xb, _ in batches)


report = []
for name, fn in [("eval() only", eval_without_no_grad), ("your evaluate", evaluate)]:
    try:
        with MemoryProbe(device="cpu") as probe:
            fn(deep, val_batches, F.cross_entropy)
        report.append(f"{name:>14}: peak {probe.peak_bytes():>9,} B")
    except NotImplementedError as exc:
        report.append(str(exc))
deep.train()
print("\n".join(report))

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_train_step_returns_float(train_step):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    before = model.weight.detach().clone()
    loss = train_step(model, optimizer, F.mse_loss, x, y)
    assert isinstance(loss, float), f"train_step should return a Python float (loss.item()), got {type(loss).__name__}"
    assert not torch.equal(model.weight, before), "train_step should update the parameters"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_evaluate_example(evaluate):
    import torch
    import torch.nn.functional as F
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    model.train()
    x = torch.tensor([[1.0], [2.0], [3.0]])
    batches = [(x[:2], torch.zeros(2, 1)), (x[2:], torch.zeros(1, 1))]
    result = evaluate(model, batches, F.mse_loss)
    assert isinstance(result, float), f"evaluate should return a Python float, got {type(result).__name__}"
    assert abs(result - 14 / 3) < 1e-6, f"per example: (1 + 4 + 9) / 3 = 14/3, got {result}"
    assert model.training, "evaluate should leave the model in the mode it found it in"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_switches_format(SWITCHES, PARTS):
    keys = ["model.eval()", "model.train()", "torch.no_grad()", "optimizer.zero_grad(set_to_none=True)",
            "loss.backward()", "optimizer.step()"]
    assert isinstance(SWITCHES, dict) and sorted(SWITCHES) == sorted(keys), f"SWITCHES needs exactly the keys {keys}"
    for key, value in SWITCHES.items():
        assert isinstance(value, (set, frozenset)), f"SWITCHES[{key!r}] should be a set"
        assert value <= PARTS, f"SWITCHES[{key!r}] may only contain names from PARTS"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_train_step_hidden(train_step):
    from hw07_checks import q1
    q1.check_train_step(train_step)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_evaluate_hidden(evaluate):
    from hw07_checks import q1
    q1.check_evaluate(evaluate)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_evaluate_memory_hidden(evaluate):
    from hw07_checks import q1
    q1.check_evaluate_memory(evaluate)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_switches_hidden(SWITCHES):
    from hw07_checks import q1
    q1.check_switches(SWITCHES)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
