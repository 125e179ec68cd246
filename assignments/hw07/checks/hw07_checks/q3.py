"""q3 — Broadcasting: compatible shapes can still mean the wrong thing (handout §1.3)."""
from __future__ import annotations

import torch

from ._common import (CheckFailure, call, close, close_float, expect, fail, generator, require_function,
                      require_tensor, shape_text)

N_RANDOM_CASES = 300


def _random_shape_pair(g: torch.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Mostly compatible pairs, with rank differences, 1s, 0s and some conflicts."""
    rank_a = int(torch.randint(0, 5, (1,), generator=g))
    rank_b = int(torch.randint(0, 5, (1,), generator=g))
    sizes = [0, 1, 1, 2, 3, 4, 5]
    a = [sizes[int(i)] for i in torch.randint(0, len(sizes), (rank_a,), generator=g)]
    b = []
    for k in range(rank_b):
        j = rank_a - rank_b + k  # the axis of a aligned with b's axis k (from the right)
        pick = float(torch.rand(1, generator=g))
        if 0 <= j < rank_a and pick < 0.55:
            b.append(a[j])
        elif pick < 0.8:
            b.append(1)
        else:
            b.append(sizes[int(torch.randint(0, len(sizes), (1,), generator=g))])
    if float(torch.rand(1, generator=g)) < 0.5:
        a, b = b, a
    return tuple(a), tuple(b)


def _torch_broadcast(a, b):
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def _left_aligned(a, b):
    """The shape a left-to-right comparison would give (the misconception), or None."""
    out = []
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else 1
        y = b[k] if k < len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def _as_shape(value, name):
    expect(isinstance(value, tuple) and all(isinstance(s, int) and not isinstance(s, bool) for s in value),
           f"{name} should return a tuple of ints, got {value!r}.")
    return tuple(value)


def _student_shape(fn, name, a, b):
    """Call the student's shape function first, before any expected value exists in this frame."""
    require_function(fn, name)
    try:
        return _as_shape(fn(a, b), name), None
    except ValueError as exc:
        return None, exc
    except NotImplementedError:
        fail(f"{name} still raises NotImplementedError: write its body.")
    except CheckFailure:
        raise
    except Exception as exc:
        fail(f"{name}({a}, {b}) raised {type(exc).__name__}: {exc}")


def check_broadcast_shape(broadcast_shape) -> None:
    fixed = [((3, 1), (3,)), ((2, 3, 4), (4,)), ((5, 1, 4), (3, 1)), ((), (2, 3)), ((0,), (1,)),
             ((2, 0, 3), (1, 3)), ((1,), ()), ((4, 1, 1), (1, 2, 0))]
    g = generator(731)
    cases = fixed + [_random_shape_pair(g) for _ in range(N_RANDOM_CASES)]
    for a, b in cases:
        got, error = _student_shape(broadcast_shape, "broadcast_shape", a, b)
        expected = _torch_broadcast(a, b)
        if expected is None:
            expect(error is not None, f"broadcast_shape({a}, {b}) returned {got!r}, but these shapes are "
                   "incompatible (torch.broadcast_shapes rejects them): raise ValueError.")
            continue
        expect(error is None, f"broadcast_shape({a}, {b}) raised ValueError ({error}), but they broadcast to "
               f"{expected}.")
        if got != expected:
            if len(a) != len(b) and _left_aligned(a, b) == got:
                fail(f"broadcast_shape({a}, {b}) returned {got}; expected {expected}. You compared axes from the "
                     "left; broadcasting aligns shapes at the right, and missing leading axes act like size 1.", "M13")
            if 0 in a + b:
                fail(f"broadcast_shape({a}, {b}) returned {got}; expected {expected}. Size 0 is a real size: "
                     "it pairs with 0 or 1, and 1 stretches to 0.", "M41")
            fail(f"broadcast_shape({a}, {b}) returned {got}; torch.broadcast_shapes gives {expected}.")


def _matmul_expected(a, b):
    try:
        return tuple((torch.empty(a, device="meta") @ torch.empty(b, device="meta")).shape)
    except RuntimeError:
        return None


def _random_matmul_pair(g):
    lead_a, lead_b = _random_shape_pair(g)
    lead_a, lead_b = lead_a[:2], lead_b[:2]
    n, k, m = (int(x) for x in torch.randint(0, 5, (3,), generator=g))
    k2 = k if float(torch.rand(1, generator=g)) < 0.85 else k + 1
    return lead_a + (n, k), lead_b + (k2, m)


def check_matmul_shape(matmul_shape) -> None:
    fixed = [((32, 10, 3, 4), (10, 4, 5)), ((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (5, 6)),
             ((2, 3, 4), (3, 4, 5)), ((0, 3, 4), (4, 2)), ((1, 2, 3), (7, 3, 1))]
    g = generator(732)
    for a, b in fixed + [_random_matmul_pair(g) for _ in range(N_RANDOM_CASES)]:
        got, error = _student_shape(matmul_shape, "matmul_shape", a, b)
        expected = _matmul_expected(a, b)
        if expected is None:
            expect(error is not None, f"matmul_shape({a}, {b}) returned {got!r}, but A @ B fails for these shapes "
                   "(inner dimensions differ or leading dimensions do not broadcast): raise ValueError.")
            continue
        expect(error is None, f"matmul_shape({a}, {b}) raised ValueError ({error}), but A @ B has shape {expected}.")
        if got != expected:
            fail(f"matmul_shape({a}, {b}) returned {got}; A @ B has shape {expected}. The inner dimension is "
                 "contracted and the leading dimensions broadcast, right-aligned.", "M44")


def _reference_mse(p, t):
    return (p.reshape(-1).double() - t.reshape(-1).double()).square().mean()


def check_pointwise_mse(pointwise_mse) -> None:
    g = generator(733)
    for B in (5, 1, 2):
        for p_shape, t_shape in [((B, 1), (B,)), ((B,), (B, 1)), ((B,), (B,)), ((B, 1), (B, 1))]:
            p, t = torch.randn(p_shape, generator=g), torch.randn(t_shape, generator=g)
            name = f"pointwise_mse(predictions {p_shape}, targets {t_shape})"
            try:
                out = pointwise_mse(p, t)
            except NotImplementedError:
                fail("pointwise_mse still raises NotImplementedError: write its body.")
            except ValueError as exc:
                if B == 1:
                    fail(f"{name} raised ValueError ({exc}). At B = 1, squeeze() drops the batch axis as well as "
                         "the feature axis; use squeeze(-1), which removes only the trailing size-1 axis.", "M12")
                fail(f"{name} raised ValueError ({exc}), but these shapes pair each prediction with its own target.")
            except Exception as exc:
                fail(f"{name} raised {type(exc).__name__}: {exc}")
            out = require_tensor(out, "pointwise_mse")
            expected = _reference_mse(p, t)
            if tuple(out.shape) == (B, B) and B > 1:
                fail(f"your loss has shape (B, B) = {(B, B)}: the subtraction broadcast (B, 1) against (B,) and "
                     "compared every prediction with every target. Bring both to shape (B,) first.", "M11")
            expect(tuple(out.shape) == (), f"{name} returned shape {tuple(out.shape)}; the loss is a 0-dim tensor.")
            if B > 1 and close(out, (p.reshape(-1, 1) - t.reshape(1, -1)).square().mean()):
                fail("your loss compares every prediction with every target: the subtraction broadcast (B, 1) against "
                     "(B,) to shape (B, B), and averaging hid the extra axis. Bring both to shape (B,) first.", "M11")
            expect(close(out, expected), f"{name} returned {float(out):.6g}; the mean squared error is "
                   f"{float(expected):.6g}.")
    # The handout's example: 14/3, not 454/3.
    out = call(pointwise_mse, "pointwise_mse", torch.tensor([[10.0], [20.0], [30.0]]), torch.tensor([11.0, 22.0, 33.0]))
    expect(close_float(float(out), 14 / 3, rel=1e-5), f"On the handout's example the loss is 14/3, got {float(out)}.")


def check_pointwise_mse_rejects_mismatch(pointwise_mse) -> None:
    """Anything but (B,) or (B, 1) on both sides, with the same B, raises ValueError naming both shapes."""
    g = generator(734)
    bad = [((4, 1), (3,)), ((4,), (5, 1)), ((4, 2), (4,)), ((1, 4), (4,)), ((4, 1, 1), (4,)), ((4,), (4, 3)),
           ((2, 2), (4,)), ((), (1,))]
    for p_shape, t_shape in bad:
        p, t = torch.randn(p_shape, generator=g), torch.randn(t_shape, generator=g)
        try:
            got = pointwise_mse(p, t)
        except NotImplementedError:
            fail("pointwise_mse still raises NotImplementedError: write its body.")
        except ValueError as exc:
            message = str(exc)
            for shape in (p_shape, t_shape):
                expect(any(s in message for s in shape_text(shape)),
                       f"pointwise_mse raised ValueError for predictions {p_shape} and targets {t_shape}, but its "
                       f"message ({message!r}) should show both shapes.", "M14")
            continue
        except Exception as exc:
            fail(f"pointwise_mse(predictions {p_shape}, targets {t_shape}) raised {type(exc).__name__}: {exc}; "
                 "mismatched shapes should raise ValueError with both shapes in the message.", "M14")
        fail(f"pointwise_mse accepted predictions of shape {p_shape} and targets of shape {t_shape} and returned "
             f"{got!r}. Broadcasting makes many such pairs compute something; assert the shapes and raise "
             "ValueError instead.", "M14")


def check_broadcast_bug_minimizer(broadcast_bug_minimizer) -> None:
    g = generator(735)
    for B in (4, 1, 7):
        targets = torch.randn(B, generator=g, dtype=torch.float64) * 3 + 1
        out = require_tensor(call(broadcast_bug_minimizer, "broadcast_bug_minimizer", targets), "broadcast_bug_minimizer")
        expect(tuple(out.shape) == (B,), f"broadcast_bug_minimizer returned shape {tuple(out.shape)}; expected one "
               f"prediction per example, shape ({B},).")
        if B > 1 and close(out, targets):
            fail("broadcast_bug_minimizer returned the targets: they minimize the intended loss. The accidental "
                 "objective compares each prediction with every target, so each prediction's best value is the "
                 "batch's mean target.", "M43")
        expect(close(out, targets.mean().expand(B)), "broadcast_bug_minimizer: each prediction that minimizes "
               "B^-2 Σ_ij (ŷ_i − y_j)² equals the batch's mean target.")
