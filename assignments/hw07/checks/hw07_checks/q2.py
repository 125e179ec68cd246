"""q2 — Batching: every axis has a meaning (handout §1.2)."""
from __future__ import annotations

import torch

from . import fixtures
from ._common import call, close, expect, expect_shape, fail, generator, measured, require_tensor

# Sizes chosen so that no two axes share a length: a swapped axis shows in the shape.
B, T, V, D = 3, 5, 11, 4


def check_embed(embed) -> None:
    g = generator(702)
    table = torch.randn(V, D, generator=g)
    ids = torch.randint(0, V, (B, T), generator=g)
    out = require_tensor(call(embed, "embed", ids, table), "embed")
    if tuple(out.shape) == (T, B, D):
        fail(f"embed returned shape (T, B, d) = {(T, B, D)}: the batch and position axes are swapped. "
             "Token ids (B, T) should become (B, T, d): batch, sequence position, embedding coordinate.", "M10")
    expect_shape(out, (B, T, D), "embed(ids of shape (B, T), table of shape (V, d))")
    expect(close(out, table[ids]), "embed gives the right shape but the wrong vectors: row [b, t] of the "
           "result must be table[token_ids[b, t]].")
    # A square batch (B == T) hides a transpose in the shape; the values still show it.
    square_ids = torch.randint(0, V, (4, 4), generator=g)
    out = require_tensor(call(embed, "embed", square_ids, table), "embed")
    if close(out, table[square_ids].transpose(0, 1)):
        fail("With B == T, embed returned result[b, t] = table[ids[t, b]]: the batch and position axes are "
             "swapped. An axis's size does not tell you its meaning.", "M10")
    expect(close(out, table[square_ids]), "embed(ids of shape (4, 4), table) gives the wrong vectors.")
    # B = 1, T = 1 and an int32/long mix must work too.
    one = torch.tensor([[3]])
    out = require_tensor(call(embed, "embed", one, table), "embed")
    expect(close(out, table[one]), "embed fails for a batch with one sequence of one token: expected shape (1, 1, d).")


def check_embed_vectorized(embed) -> None:
    g = generator(7021)
    table = torch.randn(V, D, generator=g)
    ids = torch.randint(0, V, (8, 16), generator=g)
    ops = measured(fixtures.count_tensor_ops, embed, "embed", ids, table)
    expect(ops <= 16, f"embed ran {ops} tensor operations for 8 x 16 tokens: it looks like a Python loop over "
           "tokens. Index the table with the whole (B, T) id tensor at once.", "M39")


def check_batched_linear(batched_linear) -> None:
    g = generator(703)
    d = h = 6  # square, non-symmetric W: X @ W has the right shape and the wrong values
    W = torch.randn(h, d, generator=g)
    b = torch.randn(h, generator=g)
    for lead in [(2, 3), (5,), (), (2, 1, 3)]:
        X = torch.randn(*lead, d, generator=g)
        out = require_tensor(call(batched_linear, "batched_linear", X, W, b), "batched_linear")
        expected = X @ W.T + b
        if close(out, X @ W + b):
            fail("batched_linear computed X @ W + b. W has shape (h, d): each output is W @ x + b, so the batched "
                 "form is X @ W.T + b. With square W the shapes agree and only the values are wrong.", "M9")
        expect_shape(out, expected.shape, f"batched_linear(X of shape {tuple(X.shape)}, W (h, d), b (h,))")
        expect(close(out, expected, rtol=1e-4, atol=1e-5),
               f"batched_linear gives wrong values for X of shape {tuple(X.shape)}: expected X @ W.T + b.")
    # Rectangular W and several leading axes.
    W = torch.randn(3, 5, generator=g)
    b = torch.randn(3, generator=g)
    X = torch.randn(2, 4, 7, 5, generator=g)
    out = require_tensor(call(batched_linear, "batched_linear", X, W, b), "batched_linear")
    expect_shape(out, (2, 4, 7, 3), "batched_linear(X (2, 4, 7, d=5), W (h=3, d=5), b (3,))")
    expect(close(out, X @ W.T + b, rtol=1e-4, atol=1e-5), "batched_linear gives wrong values with three leading axes.")


def check_batched_linear_vectorized(batched_linear) -> None:
    g = generator(7031)
    W, b = torch.randn(4, 3, generator=g), torch.randn(4, generator=g)
    X = torch.randn(8, 16, 3, generator=g)
    ops = measured(fixtures.count_tensor_ops, batched_linear, "batched_linear", X, W, b)
    expect(ops <= 16, f"batched_linear ran {ops} tensor operations for 8 x 16 positions: it looks like a Python "
           "loop. One matrix multiplication acts on the last axis for every leading index at once.", "M39")


def check_linear_macs(linear_macs) -> None:
    for B_, T_, d, h in [(2, 3, 4, 5), (32, 128, 768, 3072), (1, 1, 1, 1), (7, 1, 13, 2)]:
        got = call(linear_macs, "linear_macs", B_, T_, d, h)
        expected = B_ * T_ * d * h
        expect(isinstance(got, int) and not isinstance(got, bool),
               f"linear_macs should return a Python int, got {type(got).__name__}.")
        if got == 2 * expected:
            fail("linear_macs returned 2·BTdh: that counts floating-point operations (a multiply and an add). "
                 "One multiply-accumulate is one of each, so the count is B·T·d·h.", "M40")
        expect(got == expected, f"linear_macs{(B_, T_, d, h)} returned {got}; expected B·T·d·h = {expected}.")
