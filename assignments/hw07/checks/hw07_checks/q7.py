"""q7 — The token that cost you (handout §2.4).

References come from log_softmax and gather in float64, converted to bits by
dividing by ln 2. Figures made by the student's plot_surprisal are closed after
each check.
"""
from __future__ import annotations

import math
import numbers

import torch

from ._common import call, close, close_float, expect, fail, generator, padded_targets, require_tensor

_log_softmax = torch.log_softmax
_float64 = torch.float64
_LN2 = math.log(2)


def _bits_grid(logits, targets):
    """(B, T) surprisal in bits of every target, padding included, float64."""
    lp = _log_softmax(logits.detach().to(_float64), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return -lp / _LN2


def _real(targets, pad_id):
    return torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id


def _cases(seed):
    g = generator(seed)
    cases = []
    # (B, T, V, pad_id, lengths, dtype): uneven padding, pad ids other than 0, B = 1, T = 2, V = 2, pad_id None
    for B, T, V, pad, lengths, dtype in [(3, 5, 7, 2, [5, 2, 4], _float64), (1, 2, 2, None, None, _float64),
                                         (1, 2, 2, 0, [1], _float64), (4, 6, 5, None, None, torch.float32),
                                         (2, 4, 3, 1, [4, 2], torch.float32), (5, 3, 9, 8, None, _float64),
                                         (2, 2, 2, 1, [2, 1], _float64)]:
        targets = padded_targets(g, B, T, V, pad, lengths)
        logits = (torch.randn(B, T, V, generator=g, dtype=_float64) * 2.5).to(dtype)
        cases.append((logits, targets, pad))
    return cases


def _call(fn, name, logits, targets, pad_id):
    # copies: a submission that edits its arguments in place cannot change the reference
    if pad_id is None:
        return call(fn, name, logits.clone(), targets.clone())
    return call(fn, name, logits.clone(), targets.clone(), pad_id=pad_id)


def _case_text(logits, targets, pad_id):
    return f"logits of shape {tuple(logits.shape)}, targets {tuple(targets.shape)}, pad_id={pad_id}"


def check_surprisal_bits(surprisal_bits) -> None:
    for logits, targets, pad_id in _cases(771):
        case = f"surprisal_bits({_case_text(logits, targets, pad_id)})"
        out = require_tensor(_call(surprisal_bits, "surprisal_bits", logits, targets, pad_id), "surprisal_bits")
        grid = _bits_grid(logits, targets)
        real = _real(targets, pad_id)
        expected = grid[real]
        tol = dict(rtol=1e-6, atol=1e-6) if logits.dtype == _float64 else dict(rtol=1e-4, atol=1e-5)
        n_real, n_all = int(real.sum()), real.numel()
        if out.dim() == 2 and tuple(out.shape) == tuple(targets.shape):
            if n_real < n_all:
                fail(f"{case} returned a {tuple(out.shape)} grid with a value at every position: pad positions are "
                     f"included. Return a 1-D tensor of the {n_real} real targets only (targets equal to pad_id are "
                     "not evaluated).", "M32")
            fail(f"{case} returned shape {tuple(out.shape)}; return a 1-D tensor, one surprisal per real target "
                 "in (batch, time) order.")
        if out.dim() == 1 and out.numel() == n_all and n_real < n_all:
            fail(f"{case} returned {n_all} values, one per position: pad positions are included. Keep only the "
                 f"{n_real} real targets; padding is not part of the evaluated target set.", "M32")
        expect(out.dim() == 1 and out.numel() == n_real,
               f"{case} returned shape {tuple(out.shape)}; expected ({n_real},): one surprisal per real target.")
        if close(out, expected, **tol):
            continue
        if close(out, expected * _LN2, **tol):
            fail(f"{case} returned surprisals in nats: -log p with the natural log. Bits are -log2 p: divide by "
                 "ln 2 (math.log(2)) or use torch.log2.", "M31")
        if close(out, _bits_grid(logits, targets).transpose(0, 1)[real.transpose(0, 1)], **tol):
            fail(f"{case} returned the right surprisals in (time, batch) order; flatten in (batch, time) order: "
                 "all of sequence 0's targets, then sequence 1's, ...")
        if close(out, -expected, **tol) or close(out, -expected * _LN2, **tol):
            fail(f"{case} returned negative values: surprisal is -log2 p(target), which is never negative.")
        fail(f"{case} returned {[round(v, 4) for v in out.detach().double().tolist()[:6]]}...; expected "
             f"{[round(v, 4) for v in expected.tolist()[:6]]}... (bits, -log2 p of each real target).")


def _pad_trap_case():
    """Padding positions the model predicts terribly, sitting before the worst real target in flat order."""
    g = generator(772)
    B, T, V, pad = 3, 4, 5, 3
    targets = padded_targets(g, B, T, V, pad, lengths=[2, 4, 3])
    logits = torch.randn(B, T, V, generator=g, dtype=_float64)
    pad_rows, pad_cols = (targets == pad).nonzero(as_tuple=True)
    logits[pad_rows, pad_cols, pad] = -12.0   # a pad target costs about 17 bits: the worst if counted
    logits[2, 1, targets[2, 1]] = -6.0        # the worst real target: row 2, time 1
    return logits, targets, pad


def _as_int(value, what, case):
    if isinstance(value, torch.Tensor):
        fail(f"{case} returned a tensor as the {what}; return a Python int (use .item()).")
    expect(isinstance(value, numbers.Integral) and not isinstance(value, bool),
           f"{case} returned {value!r} as the {what}; expected a Python int.")
    return int(value)


def check_worst_token(worst_token) -> None:
    for logits, targets, pad_id in [_pad_trap_case()] + _cases(773):
        case = f"worst_token({_case_text(logits, targets, pad_id)})"
        B, T = targets.shape
        out = _call(worst_token, "worst_token", logits, targets, pad_id)
        grid = _bits_grid(logits, targets)
        real = _real(targets, pad_id)
        masked = grid.masked_fill(~real, float("-inf"))
        flat = int(masked.argmax())
        b, t = divmod(flat, T)
        expected_bits = float(grid[b, t])
        real_rank = int(real.reshape(-1)[:flat].sum())  # its index in the flat list of real targets
        flat_answers = {flat, real_rank}
        if isinstance(out, torch.Tensor) and out.numel() == 1 or isinstance(out, numbers.Integral):
            fail(f"{case} returned a single flat index {int(out)}; return (batch index, time index, bits). "
                 f"A flat index i over (B, T) is position divmod(i, T) = (i // T, i % T).", "M33")
        expect(isinstance(out, (tuple, list)),
               f"{case} should return a tuple (batch index, time index, bits), got {type(out).__name__}.")
        if len(out) == 2:
            fail(f"{case} returned {len(out)} values; return (batch index, time index, bits). If you have a flat "
                 "index i over (B, T), the position is divmod(i, T).", "M33")
        expect(len(out) == 3, f"{case} should return (batch index, time index, bits), got {len(out)} values.")
        ob = _as_int(out[0], "batch index", case)
        ot = _as_int(out[1], "time index", case)
        expect(isinstance(out[2], numbers.Real) and not isinstance(out[2], torch.Tensor),
               f"{case} returned {type(out[2]).__name__} as the bits; return a Python float.")
        if (ob, ot) != (b, t):
            if 0 <= ob < B and 0 <= ot < T and not bool(real[ob, ot]):
                fail(f"{case} points at (batch {ob}, time {ot}), a pad position: pad positions are included. "
                     "Padding targets are not evaluated; the costliest target must be a real one.", "M32")
            if ob in flat_answers or ot in flat_answers or (ob, ot) in (divmod(real_rank, T), divmod(flat, B)):
                fail(f"{case} returned (batch {ob}, time {ot}); the costliest target is at (batch {b}, time {t}). "
                     f"You returned a flat index, or converted the wrong one: its flat index over (B, T) is {flat} "
                     f"and its index among the real targets is {real_rank}. A (batch, time) position comes from the "
                     f"flat index over (B, T) as divmod({flat}, T = {T}).", "M33")
            fail(f"{case} returned position (batch {ob}, time {ot}); the costliest real target is at "
                 f"(batch {b}, time {t}) with {expected_bits:.4f} bits.")
        tol = 1e-6 if logits.dtype == _float64 else 1e-5
        if close_float(out[2], expected_bits * _LN2, rel=tol):
            fail(f"{case} reported {float(out[2]):.4f} for the costliest target: that is nats. Report bits: "
                 "divide -log p by ln 2.", "M31")
        expect(close_float(out[2], expected_bits, rel=tol, abs_tol=tol),
               f"{case} reported {float(out[2]):.4f} bits; the costliest target costs {expected_bits:.4f} bits.")


def _bars(fig):
    """(bars, their axes) from the first axes that draws rectangles (a rebuilt Figure keeps `patches`)."""
    for ax in fig.axes:
        found = [p for p in ax.patches if hasattr(p, "get_height") and hasattr(p, "get_x")]
        if found:
            return found, ax
    return [], None


def check_plot_surprisal(plot_surprisal) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    g = generator(774)
    words = ["the", "cat", "sat", "on", "the", "mat", "."]  # "the" twice: two bars, two tick labels
    for n, labels in [(7, words), (5, None), (1, ["x"]), (12, None)]:
        bits = torch.rand(n, generator=g, dtype=_float64) * 6 + 0.1
        case = f"plot_surprisal(bits of shape ({n},), labels={'None' if labels is None else 'a list of ' + str(n)})"
        before = set(plt.get_fignums())
        fig = None
        try:
            fig = call(plot_surprisal, "plot_surprisal", bits.clone(), labels)
            expect(isinstance(fig, Figure),
                   f"{case} returned {type(fig).__name__}; return the matplotlib Figure (e.g. fig, ax = "
                   "plt.subplots()).", "M49")
            bars, ax = _bars(fig)
            expect(len(bars) == n, f"{case} drew {len(bars)} bars; expected one bar per token, {n}.", "M60")
            xs = [float(p.get_x()) + float(p.get_width()) / 2 for p in bars]
            order = sorted(range(n), key=xs.__getitem__)
            expect(len(set(round(x, 6) for x in xs)) == n,
                   f"{case} put several bars at the same x-position. With labels as x-values, matplotlib maps "
                   "repeated words to one category; place bar i at x = i and set the labels as tick labels.", "M60")
            positions = [round(xs[i], 6) for i in order]
            expect(positions == list(range(n)),
                   f"{case} put the bars at x = {positions[:4]}...; bar i (token i) goes at x = i, from 0 to {n - 1}.",
                   "M60")
            heights = torch.tensor([float(bars[i].get_height()) for i in order], dtype=_float64)
            if close(heights, bits * _LN2, rtol=1e-6, atol=1e-6):
                fail(f"{case}: the bar heights are the surprisals in nats; the bars show the bits they are given.",
                     "M31")
            expect(close(heights, bits, rtol=1e-6, atol=1e-6),
                   f"{case}: the bar heights, left to right, should be the surprisals in bits in the given order.")
            ylabel = ax.get_ylabel().lower()
            if "nat" in ylabel.replace("natural", ""):
                fail(f"{case}: the y-axis label {ax.get_ylabel()!r} says nats; the bars are surprisals in bits.",
                     "M31")
            expect("bit" in ylabel, f"{case}: label the y-axis with the unit of the bars, e.g. "
                   f"\"surprisal (bits)\" (got {ax.get_ylabel()!r}).", "M61")
            if labels is not None:
                ticks = {round(float(pos), 6): str(text) for pos, text in zip(ax.get_xticks(), _tick_texts(ax))}
                shown = [ticks.get(round(xs[i], 6)) for i in order]
                expect(shown == [str(w) for w in labels],
                       f"{case}: the tick label under bar i should be labels[i]; got {shown}.", "M60")
        finally:
            for num in set(plt.get_fignums()) - before:
                plt.close(num)
            if isinstance(fig, Figure):
                plt.close(fig)


def _tick_texts(ax) -> list:
    return [label.get_text() if hasattr(label, "get_text") else label for label in ax.get_xticklabels()]
