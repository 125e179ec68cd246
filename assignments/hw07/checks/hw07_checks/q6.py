"""q6 — Shift, mask, and what n was (handout §2.1–2.3).

Every reference value is computed here from log_softmax and gather in float64,
never from the student's functions. When a result is wrong, the check computes
what each misconception from the handout would have returned on the same case
and names the one that matches.
"""
from __future__ import annotations

import math

import torch

from . import fixtures
from ._common import call, close_float, expect, fail, generator, padded_targets, require_tensor

_log_softmax = torch.log_softmax
_softmax = torch.softmax
_float64 = torch.float64
_exp = math.exp


# ----------------------------------------------------------------------------- cases


def _logits(g: torch.Generator, B: int, T: int, V: int, dtype=_float64, scale: float = 2.0) -> torch.Tensor:
    return (torch.randn(B, T, V, generator=g, dtype=_float64) * scale).to(dtype)


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(B, T) negative log-probability of each target, float64."""
    lp = _log_softmax(logits.detach().to(_float64), -1)
    return -lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _mask(targets: torch.Tensor, pad_id) -> torch.Tensor:
    return torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id


def _reference_loss(logits, targets, pad_id) -> float:
    nll, m = _nll(logits, targets), _mask(targets, pad_id)
    return float(nll[m].sum() / m.sum())


def _misconceptions(logits, targets, pad_id) -> list[tuple[float, str]]:
    """(value the mistake gives, message) for each mistake the handout warns about."""
    nll, m = _nll(logits, targets), _mask(targets, pad_id)
    B, T, V = logits.shape
    n_real = int(m.sum())
    summed = float(nll[m].sum())
    out = []
    if pad_id is not None and n_real < m.numel():
        out.append((float(nll.mean()),
                    f"your loss counts the padding targets: it averages over all {m.numel()} positions, padding "
                    f"included, instead of the {n_real} real targets. Exclude targets equal to pad_id "
                    "(ignore_index=pad_id, or a mask) from both the sum and the count.", "M26"))
        out.append((summed / m.numel(),
                    f"your loss divides the real targets' summed loss by the number of positions B * T = {m.numel()}; "
                    f"the denominator is the number of real (non-pad) targets, {n_real}. Ask what n was.", "M27"))
    if B > 1:
        out.append((summed / B,
                    f"your loss divides the summed loss by the number of sequences B = {B}; the denominator is the "
                    f"number of real targets, {n_real}.", "M27"))
        per_seq = [float(nll[b][m[b]].mean()) for b in range(B) if m[b].any()]
        if len(set(int(r.sum()) for r in m)) > 1:
            out.append((sum(per_seq) / len(per_seq),
                        "your loss is the mean of per-sequence mean losses. With sequences of different lengths "
                        "that weights a short sequence's tokens more than a long one's; the token-averaged loss "
                        "divides the sum over all real targets by their total count.", "M27"))
    if pad_id is None and bool((targets == 0).any()):
        zero = targets != 0
        out.append((float(nll[zero].sum() / zero.sum()),
                    "with pad_id=None every target is real, including token id 0; your loss left out the targets "
                    "equal to 0. Mask only when pad_id is given.", "M26"))
    out.append((summed, f"your loss is the summed loss over the real targets, not its mean: divide by the {n_real} "
                        "real targets.", "M27"))
    sm = _softmax(logits.detach().to(_float64), -1)
    soft_nll = -_log_softmax(sm, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    out.append((float(soft_nll[m].sum() / m.sum()),
                "your loss applies softmax before cross-entropy. F.cross_entropy takes raw scores (logits) and applies "
                "log_softmax itself; softmax first squashes every score into [0, 1], so the loss barely moves.", "M28"))
    if B > 1 and T > 1:
        flat_t, flat_m = targets.reshape(-1), m.reshape(-1)
        for scrambled in (logits.detach().to(_float64).transpose(0, 1).reshape(-1, V),):
            lp = _log_softmax(scrambled, -1).gather(-1, flat_t.unsqueeze(-1)).squeeze(-1)
            out.append((float(-lp[flat_m].sum() / flat_m.sum()),
                        "your loss pairs logits and targets from different positions: the batch and time axes "
                        "were scrambled by a transpose before the reshape. Flatten (B, T, V) logits and (B, T) "
                        "targets in the same (batch, time) order, e.g. logits.reshape(-1, V) with targets.reshape(-1).", "M29"))
        t_scr = targets.transpose(0, 1).reshape(-1)
        m_scr = _mask(t_scr, pad_id)
        lp = _log_softmax(logits.detach().to(_float64).reshape(-1, V), -1).gather(-1, t_scr.unsqueeze(-1)).squeeze(-1)
        out.append((float(-lp[m_scr].sum() / m_scr.sum()),
                    "your loss pairs logits and targets from different positions: the targets' batch and time axes "
                    "were scrambled by a transpose before the reshape. Flatten logits and targets in the same "
                    "(batch, time) order.", "M29"))
    return out


def _diagnose(value: float, expected: float, logits, targets, pad_id, what: str) -> None:
    for wrong, message, mid in _misconceptions(logits, targets, pad_id):
        if not close_float(wrong, expected, rel=1e-6) and close_float(value, wrong, rel=1e-5, abs_tol=1e-7):
            fail(message, mid)
    fail(f"{what}: got {value:.6f}, expected {expected:.6f}.")


def _case_text(logits, targets, pad_id) -> str:
    return f"logits of shape {tuple(logits.shape)}, targets {tuple(targets.shape)}, pad_id={pad_id}"


# ----------------------------------------------------------------------------- shift


def check_shift_for_next_token(shift_for_next_token) -> None:
    g = generator(760)
    for B, T in [(3, 6), (1, 2), (4, 2), (2, 9)]:
        x = torch.randint(0, 50, (B, T), generator=g)
        x[:, 1:] += 50 * torch.arange(1, T)  # every position's token differs from its neighbours'
        out = call(shift_for_next_token, "shift_for_next_token", x)
        expect(isinstance(out, (tuple, list)) and len(out) == 2,
               f"shift_for_next_token should return a pair (inputs, targets), got {type(out).__name__}.")
        inputs, targets = (require_tensor(t, "shift_for_next_token") for t in out)
        case = f"shift_for_next_token(x of shape {(B, T)})"
        if tuple(inputs.shape) == tuple(targets.shape) and torch.equal(inputs, targets):
            fail(f"{case} returned targets equal to the inputs: with no shift the model is trained to copy its "
                 "input, which gives a beautifully low loss and a useless model. Targets are the next tokens: "
                 "inputs = x[:, :-1], targets = x[:, 1:].", "M24")
        if tuple(inputs.shape) == (B, T - 1) and tuple(targets.shape) == (B, T - 1):
            if torch.equal(inputs, x[:, 1:]) and torch.equal(targets, x[:, :-1]):
                fail(f"{case} shifted the wrong way: your targets are the previous tokens, so the model learns to "
                     "predict the past. A causal model predicts token t from tokens < t: inputs = x[:, :-1], "
                     "targets = x[:, 1:].", "M25")
        if tuple(inputs.shape) == (B - 1, T) or tuple(targets.shape) == (B - 1, T):
            fail(f"{case} returned shapes {tuple(inputs.shape)} and {tuple(targets.shape)}: you shifted along the "
                 "batch axis. Shift along time (axis 1): each (B, T-1).", "M59")
        expect(tuple(inputs.shape) == (B, T - 1) and tuple(targets.shape) == (B, T - 1),
               f"{case} returned shapes {tuple(inputs.shape)} and {tuple(targets.shape)}; a length-{T} sequence "
               f"yields {T - 1} predictions, so both should be {(B, T - 1)}.")
        expect(torch.equal(inputs, x[:, :-1]), f"{case}: inputs should be x[:, :-1] (drop the last token).")
        expect(torch.equal(targets, x[:, 1:]), f"{case}: targets should be x[:, 1:] (drop the first token).")


# ----------------------------------------------------------------------------- lm_loss


def _diagnostic_case(seed: int):
    """Uneven padding with a non-zero pad id, B != T != V, so every misconception gives its own value."""
    g = generator(seed)
    B, T, V, pad = 3, 5, 7, 2
    targets = padded_targets(g, B, T, V, pad, lengths=[5, 3, 1])
    return _logits(g, B, T, V), targets, pad


def _random_cases(seed: int):
    g = generator(seed)
    cases = [_diagnostic_case(seed + 1)]
    # (B, T, V, pad_id, dtype): B = 1, T = 2, a vocabulary of 2, pad_id None, pad ids other than 0
    for B, T, V, pad, dtype in [(4, 6, 5, None, _float64), (1, 2, 2, None, _float64), (1, 2, 2, 0, _float64),
                                (1, 2, 2, 1, _float64), (2, 7, 9, 8, torch.float32), (5, 4, 3, 0, _float64),
                                (3, 3, 11, 5, torch.float32), (6, 10, 4, 3, _float64)]:
        targets = padded_targets(g, B, T, V, pad)
        cases.append((_logits(g, B, T, V, dtype), targets, pad))
    # pad_id=None with targets that contain 0: nothing is padding
    targets = torch.randint(0, 3, (3, 4), generator=g)
    targets[:, -1] = 0
    cases.append((_logits(g, 3, 4, 3), targets, None))
    # a sequence whose targets are all padding contributes nothing
    targets = padded_targets(g, 3, 4, 6, 4, lengths=[4, 0, 2])
    cases.append((_logits(g, 3, 4, 6), targets, 4))
    return cases


def _call_loss(lm_loss, logits, targets, pad_id):
    if pad_id is None:
        return call(lm_loss, "lm_loss", logits, targets)
    return call(lm_loss, "lm_loss", logits, targets, pad_id=pad_id)


def check_lm_loss(lm_loss) -> None:
    for logits, targets, pad_id in _random_cases(761):
        B, T, V = logits.shape
        case = _case_text(logits, targets, pad_id)
        leaf = logits.clone().requires_grad_(True)
        out = require_tensor(_call_loss(lm_loss, leaf, targets.clone(), pad_id), "lm_loss")
        if tuple(out.shape) != ():
            fail(f"lm_loss({case}) returned shape {tuple(out.shape)}; the loss is one number, a 0-dim tensor: the "
                 "mean over the real targets.")
        expected = _reference_loss(logits, targets, pad_id)
        rel = 1e-6 if logits.dtype == _float64 else 1e-5  # a float32 computation of float64 logits is fine
        value = float(out.detach().to(_float64))
        if not close_float(value, expected, rel=rel, abs_tol=1e-9):
            _diagnose(value, expected, logits, targets, pad_id, f"lm_loss({case}) gives the wrong value")
        expect(out.requires_grad and out.grad_fn is not None,
               f"lm_loss({case}) returned a tensor that is not connected to the logits' graph: keep it a tensor "
               "(no .item(), .detach() or torch.tensor(...)) so that backward reaches the model.")
        out.backward()
        ref_leaf = logits.detach().to(_float64).requires_grad_(True)
        m = _mask(targets, pad_id)
        ref = -(_log_softmax(ref_leaf, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[m]).sum() / m.sum()
        ref.backward()
        expect(leaf.grad is not None and tuple(leaf.grad.shape) == tuple(logits.shape)
               and torch.allclose(leaf.grad.to(_float64), ref_leaf.grad, rtol=1e-4, atol=1e-7),
               f"lm_loss({case}) has the right value but the wrong gradient with respect to the logits.")


def check_perplexity(perplexity) -> None:
    for logits, targets, pad_id in _random_cases(762)[:6] + [_handout_case()]:
        case = _case_text(logits, targets, pad_id)
        out = call(perplexity, "perplexity", logits.clone(), targets.clone()) if pad_id is None else \
            call(perplexity, "perplexity", logits.clone(), targets.clone(), pad_id=pad_id)
        if isinstance(out, torch.Tensor):
            fail(f"perplexity({case}) returned a tensor; return a Python float (use .item() or math.exp).")
        expect(isinstance(out, float), f"perplexity({case}) should return a Python float, got {type(out).__name__}.")
        loss = _reference_loss(logits, targets, pad_id)
        expected = _exp(loss)
        if close_float(out, expected, rel=1e-5):
            continue
        if close_float(out, 2.0 ** loss, rel=1e-5):
            fail(f"perplexity({case}) returned 2 ** loss. The loss from cross_entropy is in nats (natural log), so "
                 "perplexity is exp(loss); 2 ** H is for H in bits.", "M58")
        if close_float(out, loss, rel=1e-5):
            fail(f"perplexity({case}) returned the loss itself; perplexity is exp(loss).", "M64")
        for wrong, message, mid in _misconceptions(logits, targets, pad_id):
            if not close_float(wrong, loss, rel=1e-6) and close_float(out, _exp(wrong), rel=1e-5):
                fail("perplexity is exp of a wrong loss: " + message, mid)
        fail(f"perplexity({case}) returned {out:.6f}; expected exp(mean loss over real targets) = {expected:.6f}.")


def _handout_case():
    """The handout's batch: 23 real targets at perplexity 12.7, 17 padding targets predicted with p = 0.999."""
    V = 16
    targets = torch.tensor([[1] * 23 + [0] * 17])
    p = torch.tensor([1 / 12.7] * 23 + [0.999] * 17, dtype=_float64)
    probs = ((1 - p) / (V - 1))[:, None].repeat(1, V)
    probs[torch.arange(40), targets[0]] = p
    return probs.log()[None], targets, 0


# ----------------------------------------------------------------------------- accumulation


_tiny_forward = fixtures.tiny_forward


def _masked_sum(logits, targets, pad_id):
    m = _mask(targets, pad_id)
    lp = _log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return -(lp[m]).sum(), int(m.sum())


def _gradient_of(params, batch, pad_id, objective):
    """Gradient of an objective built from per-microbatch (summed loss, count) pairs."""
    leaves = [p.detach().clone().requires_grad_(True) for p in params]
    value = objective(leaves)
    return [g.detach() for g in torch.autograd.grad(value, leaves)], float(value.detach())


def _accumulation_case(seed, B, T, V, pad_id, lengths):
    g = generator(seed)
    real_ids = [i for i in range(V) if i != pad_id]
    batch = torch.tensor(real_ids)[torch.randint(0, len(real_ids), (B, T), generator=g)]
    if pad_id is not None:
        for row, n in enumerate(lengths):
            batch[row, n:] = pad_id
    return batch


def check_accumulate_lm_gradients(accumulate_lm_gradients) -> None:
    cases = [  # (B, T, V, pad_id, lengths, micro_batch_size): microbatches with different numbers of real targets
        (5, 7, 6, 3, [7, 2, 5, 3, 6], 2),
        (4, 5, 5, 0, [5, 1, 4, 2], 3),
        (1, 2, 2, None, None, 1),
        (3, 4, 2, 1, [4, 3, 2], 1),
        (3, 6, 7, None, None, 2),
        (2, 6, 4, 2, [6, 3], 5),
    ]
    for i, (B, T, V, pad_id, lengths, mbs) in enumerate(cases):
        batch = _accumulation_case(770 + i, B, T, V, pad_id, lengths)
        model = fixtures.TinyLM(V, 3, seed=780 + i)
        params = [model.emb, model.out, model.bias]
        before = [p.detach().clone() for p in params]
        g = generator(790 + i)
        existing = [torch.randn(p.shape, generator=g, dtype=_float64) for p in params]
        for p, e in zip(params, existing):
            p.grad = e.clone()
        case = f"accumulate_lm_gradients(model, batch of shape {(B, T)}, micro_batch_size={mbs}, pad_id={pad_id})"
        out = call(accumulate_lm_gradients, "accumulate_lm_gradients", model, batch, mbs, pad_id)

        inputs, targets = batch[:, :-1], batch[:, 1:]
        micro = [(s, min(s + mbs, B)) for s in range(0, B, mbs)]
        n_total = int(_mask(targets, pad_id).sum())

        def full(ps):
            total, n = _masked_sum(_tiny_forward(ps, inputs), targets, pad_id)
            return total / n

        expected, full_loss = _gradient_of(params, batch, pad_id, full)

        # how the model was called
        for shape in model.calls:
            if len(shape) == 2 and shape[1] == T:
                fail(f"{case} called the model on (b, T) = {shape} ids: shift inside, so the model sees the inputs "
                     f"x[:, :-1] of shape (b, T-1) and is scored on the targets x[:, 1:].")
            expect(len(shape) == 2 and shape[1] == T - 1 and shape[0] <= mbs,
                   f"{case} called the model on ids of shape {shape}; each call should see at most "
                   f"micro_batch_size = {mbs} sequences of T-1 = {T - 1} inputs.")
        covered = sum(s[0] for s in model.calls)
        expect(covered == B, f"{case} ran the model on {covered} sequences in total; every one of the {B} "
               "sequences should be in exactly one microbatch.")
        if len(micro) > 1 and model.backward_seen and all(after == len(model.calls) for _, after in model.backward_seen):
            fail(f"{case} ran every microbatch's forward before any backward: summing graph-connected losses and "
                 "calling backward once at the end keeps every microbatch's graph alive and defeats the memory "
                 "saving. Call backward once per microbatch.", "M18")

        for p, b0 in zip(params, before):
            expect(torch.equal(p.detach(), b0), f"{case} changed the weights: accumulation only adds to .grad; "
                   "the optimizer step comes after it, outside this function.", "M21")
        grads = [p.grad for p in params]
        expect(all(gr is not None for gr in grads), f"{case} left a parameter's .grad as None.")
        added = [gr.detach().to(_float64) - e for gr, e in zip(grads, existing)]
        if all(torch.allclose(a, x, rtol=1e-9, atol=1e-12) for a, x in zip(added, expected)):
            expect(isinstance(out, float) and not isinstance(out, bool),
                   f"{case} should return the batch's mean loss as a Python float, got {type(out).__name__}.")
            if not close_float(out, full_loss, rel=1e-9):
                per_micro = []
                for s, e in micro:
                    total, n = _masked_sum(_tiny_forward(params, inputs[s:e]).detach(), targets[s:e], pad_id)
                    if n:
                        per_micro.append(float(total) / n)
                if per_micro and close_float(out, sum(per_micro) / len(per_micro), rel=1e-6):
                    fail(f"{case} returned the mean of the microbatch means ({out:.6f}); the batch's mean loss "
                         f"is the summed loss over all {n_total} real targets divided by {n_total} "
                         f"({full_loss:.6f}).", "M30")
                fail(f"{case} returned {out!r}; the batch's mean loss over its {n_total} real targets is "
                     f"{full_loss:.6f}.")
            continue

        if all(torch.allclose(gr.detach().to(_float64), x, rtol=1e-9, atol=1e-12) for gr, x in zip(grads, expected)):
            fail(f"{case} replaced the existing .grad instead of adding to it: accumulation adds, so do not clear "
                 "or overwrite gradients inside the function (the caller clears them before the first microbatch).", "M54")
        if len(micro) > 1:
            def own_counts_over_k(ps):
                parts = []
                for s, e in micro:
                    total, n = _masked_sum(_tiny_forward(ps, inputs[s:e]), targets[s:e], pad_id)
                    parts.append(total / max(n, 1))
                return sum(parts) / len(parts)

            def own_counts(ps):
                return own_counts_over_k(ps) * len(micro)

            k = len(micro)
            for objective, message in (
                    (own_counts_over_k, f"your gradient is the mean of the {k} microbatches' mean losses: each "
                                        "microbatch's mean (over its own real targets) divided by the number of "
                                        f"microbatches K = {k}. That weights every microbatch equally, but they hold "
                                        "different numbers of real targets, so a target in a short microbatch "
                                        "counts more. Divide every microbatch's summed loss by the real targets of "
                                        f"the whole batch ({n_total}) instead of its own count and K."),
                    (own_counts, f"your gradient adds up the {k} microbatches' mean losses, each over its own real "
                                 "targets, with no further division: about K times the full-batch gradient, and "
                                 "weighted by microbatch, not by target. Divide every microbatch's summed loss by "
                                 f"the real targets of the whole batch ({n_total}).")):
                wrong, _ = _gradient_of(params, batch, pad_id, objective)
                if all(torch.allclose(a, w, rtol=1e-7, atol=1e-10) for a, w in zip(added, wrong)):
                    fail(f"{case}: {message}", "M30")
        if pad_id is not None:
            def with_padding(ps):
                logits = _tiny_forward(ps, inputs)
                lp = _log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
                return -lp.mean()

            def by_positions(ps):
                total, _ = _masked_sum(_tiny_forward(ps, inputs), targets, pad_id)
                return total / targets.numel()

            for objective, message, mid in (
                    (with_padding, "your gradient counts the padding targets: exclude targets equal to pad_id from "
                                   "the summed loss and from the count.", "M26"),
                    (by_positions, f"your gradient divides by all B * (T-1) = {targets.numel()} positions; divide by "
                                   f"the {n_total} real targets of the whole batch.", "M27")):
                wrong, _ = _gradient_of(params, batch, pad_id, objective)
                if all(torch.allclose(a, w, rtol=1e-7, atol=1e-10) for a, w in zip(added, wrong)):
                    fail(f"{case}: " + message, mid)

        def summed(ps):
            total, _ = _masked_sum(_tiny_forward(ps, inputs), targets, pad_id)
            return total

        wrong, _ = _gradient_of(params, batch, pad_id, summed)
        if all(torch.allclose(a, w, rtol=1e-7, atol=1e-10) for a, w in zip(added, wrong)):
            fail(f"{case}: your gradient is that of the summed loss; divide each microbatch's summed loss by the "
                 f"{n_total} real targets of the whole batch.", "M27")
        fail(f"{case}: the gradient added to .grad differs from the full-batch gradient of the token-averaged loss "
             "(compared in float64). Each microbatch adds the gradient of its summed loss over real targets divided "
             "by the real targets of the whole batch.")
