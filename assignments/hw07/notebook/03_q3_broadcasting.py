# %% [raw]
# # BEGIN QUESTION
# name: q3
# points: 8

# %% [markdown]
# ### q3 — Broadcasting: compatible shapes can still mean the wrong thing (§1.3) (8 points)
#
# For elementwise arithmetic, compare axes **from right to left**: paired sizes
# must match or one must be 1; absent leading axes act like size 1. Size 0 is a
# real size (it pairs with 0 or 1). Broadcasting knows sizes, not whether an
# axis means "example" or "feature".
#
# First, see the regression bug from the handout: the subtraction succeeds and
# compares every prediction with every target.

# %%
predictions = torch.tensor([[10.0], [20.0], [30.0]])  # (3, 1)
targets = torch.tensor([11.0, 22.0, 33.0])            # (3,)
wrong = predictions - targets                         # (3, 3)
print("shape of the difference:", tuple(wrong.shape))
print("accidental loss:", wrong.square().mean().item(), "= 454/3 ≈", 454 / 3)

# %% [markdown]
# Write:
#
# - `broadcast_shape(a, b)`: the elementwise broadcast rule by hand, for two
#   shapes given as tuples of ints; return the result as a tuple, or raise
#   `ValueError` when the shapes are incompatible. (No `torch.broadcast_shapes`:
#   the hidden tests compare your rule against it on hundreds of random shapes.)
# - `pointwise_mse(predictions, targets)`: the mean squared error as a 0-dim
#   tensor, pairing each prediction with **its own** target. Each argument may be
#   `(B,)` or `(B, 1)`; bring both to one scalar per example, shape `(B,)`, then
#   subtract. `B = 1` must work. Any other shape pair raises `ValueError` whose
#   message shows both shapes.
# - `broadcast_bug_minimizer(targets)`: the predictions `(B,)` that minimize the
#   accidental objective $B^{-2}\sum_{i,j}(\hat y_i - y_j)^2$.
# - `matmul_shape(a, b)`: the shape of `A @ B` for tensors of rank ≥ 2 (the
#   inner dimension is contracted, the leading dimensions broadcast), or
#   `ValueError` when `A @ B` would fail.

# %% [raw]
# # BEGIN SOLUTION

# %%
def broadcast_shape(a, b):
    """Shape of an elementwise op between tensors of shapes a and b (tuples of ints)."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q3: write broadcast_shape")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    a, b = tuple(a), tuple(b)
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a  # missing leading axes act like size 1
    b = (1,) * (rank - len(b)) + b
    result = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast: {x} vs {y}")
        result.append(y if x == 1 else x)
    return tuple(result)
    # END SOLUTION


def pointwise_mse(predictions, targets):
    """Mean squared error, one prediction per target; (B,) or (B, 1) each."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q3: write pointwise_mse")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    def per_example(x):
        if x.dim() == 2 and x.shape[-1] == 1:
            return x.squeeze(-1)  # (B, 1) -> (B,), also when B = 1
        return x if x.dim() == 1 else None

    p, t = per_example(predictions), per_example(targets)
    if p is None or t is None or p.shape != t.shape:
        raise ValueError(
            f"predictions {tuple(predictions.shape)} and targets {tuple(targets.shape)} "
            "are not one scalar per example of the same batch"
        )
    return (p - t).square().mean()
    # END SOLUTION


def broadcast_bug_minimizer(targets):
    """Predictions (B,) minimizing B^-2 sum_ij (yhat_i - y_j)^2."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q3: write broadcast_bug_minimizer")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return targets.mean().expand(targets.shape[0]).clone()
    # END SOLUTION


def matmul_shape(a, b):
    """Shape of A @ B for shapes a, b of rank >= 2, or ValueError."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q3: write matmul_shape")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    a, b = tuple(a), tuple(b)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"matmul_shape expects rank >= 2, got {a} and {b}")
    if a[-1] != b[-2]:
        raise ValueError(f"inner dimensions differ: {a} @ {b}")
    return broadcast_shape(a[:-2], b[:-2]) + (a[-2], b[-1])
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Check the handout's numbers with your `pointwise_mse`: 14/3 for the paired loss.

# %%
try:
    print("paired loss:", pointwise_mse(predictions, targets).item(), "= 14/3 ≈", 14 / 3)
    print("minimizer of the accidental objective:", broadcast_bug_minimizer(targets).tolist())
except NotImplementedError as exc:
    print(exc)

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_broadcast_shape_examples(broadcast_shape):
    assert tuple(broadcast_shape((3, 1), (3,))) == (3, 3), "(3, 1) with (3,): compare from the right, 1 stretches"
    assert tuple(broadcast_shape((2, 3, 4), (4,))) == (2, 3, 4), "a (d,) bias broadcasts over (B, T, d)"
    try:
        broadcast_shape((2, 3), (3, 2))
    except ValueError:
        pass
    else:
        raise AssertionError("(2, 3) and (3, 2) are incompatible: raise ValueError")

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_pointwise_mse_handout_example(pointwise_mse):
    import torch
    loss = pointwise_mse(torch.tensor([[10.0], [20.0], [30.0]]), torch.tensor([11.0, 22.0, 33.0]))
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0, "the loss is a 0-dim tensor"
    assert abs(loss.item() - 14 / 3) < 1e-5, f"the handout's example gives 14/3, got {loss.item()}"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_matmul_shape_example(matmul_shape, broadcast_bug_minimizer):
    import torch
    assert tuple(matmul_shape((32, 10, 3, 4), (10, 4, 5))) == (32, 10, 3, 5), "the handout's example: (32, 10, 3, 5)"
    out = broadcast_bug_minimizer(torch.tensor([11.0, 22.0, 33.0]))
    assert tuple(out.shape) == (3,), "one prediction per example"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_broadcast_shape_hidden(broadcast_shape):
    from hw07_checks import q3
    q3.check_broadcast_shape(broadcast_shape)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_pointwise_mse_hidden(pointwise_mse):
    from hw07_checks import q3
    q3.check_pointwise_mse(pointwise_mse)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_pointwise_mse_rejects_mismatch_hidden(pointwise_mse):
    from hw07_checks import q3
    q3.check_pointwise_mse_rejects_mismatch(pointwise_mse)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_broadcast_bug_minimizer_hidden(broadcast_bug_minimizer):
    from hw07_checks import q3
    q3.check_broadcast_bug_minimizer(broadcast_bug_minimizer)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_matmul_shape_hidden(matmul_shape):
    from hw07_checks import q3
    q3.check_matmul_shape(matmul_shape)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
