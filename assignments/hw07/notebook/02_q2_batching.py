# %% [raw]
# # BEGIN QUESTION
# name: q2
# points: 6

# %% [markdown]
# ### q2 — Batching: give every axis a meaning (§1.2) (6 points)
#
# For language data we use $X \in \mathbb{R}^{B \times T \times d}$: batch,
# sequence position, embedding coordinate. Token ids have shape $(B, T)$;
# looking up each id's embedding adds the final feature axis. A linear layer
# acts on the last axis, and its bias broadcasts over examples and positions.
#
# Write, **without Python loops**:
#
# - `embed(token_ids, table)`: ids of shape `(B, T)` and a table of shape
#   `(V, d)` to embeddings of shape `(B, T, d)`, where `out[b, t] = table[token_ids[b, t]]`.
# - `batched_linear(X, W, b)`: `X` of shape `(..., d)` (any number of leading
#   axes), `W` of shape `(h, d)`, `b` of shape `(h,)`, to `(..., h)`: every
#   position's vector `x` becomes `W @ x + b`.
# - `linear_macs(B, T, d, h)`: the leading multiply-accumulate count of that
#   layer on a `(B, T, d)` input, as a Python `int`.
#
# An axis's size does not tell you its meaning: the hidden tests use square
# weight matrices and square batches, where a wrong axis keeps the right shape.

# %% [raw]
# # BEGIN SOLUTION

# %%
def embed(token_ids, table):
    """(B, T) token ids and a (V, d) table -> (B, T, d) embeddings."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q2: write embed")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return table[token_ids]
    # END SOLUTION


def batched_linear(X, W, b):
    """X (..., d), W (h, d), b (h,) -> (..., h): W @ x + b at every leading index."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q2: write batched_linear")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return X @ W.T + b
    # END SOLUTION


def linear_macs(B, T, d, h):
    """Leading multiply-accumulate count of a (h, d) linear layer on a (B, T, d) input."""
    """ # BEGIN PROMPT
    raise NotImplementedError("q2: write linear_macs")
    """ # END PROMPT
    # BEGIN SOLUTION NO PROMPT
    return B * T * d * h
    # END SOLUTION

# %% [raw]
# # END SOLUTION

# %% [markdown]
# Compare your vectorized `batched_linear` with the handout's loop: the two must agree.

# %%
X, W, b = torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(5)
try:
    loop = torch.stack([torch.stack([W @ token + b for token in seq]) for seq in X])
    torch.testing.assert_close(batched_linear(X, W, b), loop)
    print("Vectorized and loop results agree:", tuple(loop.shape))
except NotImplementedError as exc:
    print(exc)

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_embed_worked_example(embed):
    import torch
    table = torch.arange(12.0).reshape(4, 3)  # V = 4, d = 3
    out = embed(torch.tensor([[0, 3], [1, 1]]), table)
    assert isinstance(out, torch.Tensor), f"embed should return a tensor, got {type(out).__name__}"
    assert tuple(out.shape) == (2, 2, 3), f"embed should return (B, T, d) = (2, 2, 3), got {tuple(out.shape)}"
    assert out[0, 1].tolist() == [9.0, 10.0, 11.0], "out[b, t] should be table[token_ids[b, t]]"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_batched_linear_shapes(batched_linear):
    import torch
    W, b = torch.ones(5, 4), torch.zeros(5)
    for lead in [(2, 3), (7,), (2, 2, 2)]:
        out = batched_linear(torch.ones(*lead, 4), W, b)
        assert tuple(out.shape) == lead + (5,), f"X of shape {lead + (4,)} should give {lead + (5,)}, got {tuple(out.shape)}"
    assert torch.allclose(out, torch.full(out.shape, 4.0)), "with W all ones and b = 0, each output is the sum of x's 4 entries"

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_linear_macs_example(linear_macs):
    assert linear_macs(2, 3, 4, 5) == 120, "the handout's example: B·T·d·h = 2·3·4·5"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 2
""" # END TEST CONFIG
def test_embed_hidden(embed):
    from hw07_checks import q2
    q2.check_embed(embed)
    q2.check_embed_vectorized(embed)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 3
""" # END TEST CONFIG
def test_batched_linear_hidden(batched_linear):
    from hw07_checks import q2
    q2.check_batched_linear(batched_linear)
    q2.check_batched_linear_vectorized(batched_linear)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_linear_macs_hidden(linear_macs):
    from hw07_checks import q2
    q2.check_linear_macs(linear_macs)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION
