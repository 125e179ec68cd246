"""q5 — Responding to OOM: smaller live batches, same objective (handout §1.5).

Numbers in float64 on the CPU (accumulation must equal the full-batch
gradient, uneven last microbatch included). Memory on the probe's device:
the peak of accumulation must not grow with the number of microbatches
(M18, measured as a slope from K = 2 to K = 8 against the reference's), and
a checkpointed forward must leave about as little alive as the reference
checkpointing does (M23, "live after forward": a forward + backward peak is
dominated by gradients and cannot tell them apart).
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import _probe, fixtures
from ._probe import fmt_bytes as _fmt
from ._common import close, close_float, expect, fail, generator, measured

_F64 = dict(rtol=1e-9, atol=1e-12)


def reference_accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy) -> float:
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(x))  # the microbatch mean, weighted by its share
        loss.backward()
        total += loss.item()
    return total


def reference_checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def _grads(model):
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _match(actual, expected, **tol) -> bool:
    return all((a is None) == (e is None) and (a is None or close(a, e, **tol)) for a, e in zip(actual, expected))


def _plus(a, b):
    return [None if x is None and y is None else (0 if x is None else x) + (0 if y is None else y)
            for x, y in zip(a, b)]


def _contribution(model, x, y, loss_fn, scale):
    """Gradient of scale * loss_fn(model(x), y) (mean reduction), on a copy."""
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    (loss_fn(twin(x), y) * scale).backward()
    return _grads(twin)


def _classifier(seed):
    torch.manual_seed(seed)
    return nn.Sequential(fixtures.SizeRecorder(), nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()


def _regressor(seed, outputs=1):
    torch.manual_seed(seed)
    return nn.Sequential(fixtures.SizeRecorder(), nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, outputs)).double()


def _call_accumulate(fn, name, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(f"{name} still raises NotImplementedError: write its body.")
    except RuntimeError as exc:
        if "does not require grad" in str(exc):
            fail(f"{name} raised RuntimeError: {exc}. A forward pass under torch.no_grad() records no graph, so "
                 "there is nothing to backpropagate: run each microbatch's forward with autograd on and call "
                 "backward on it. Accumulation saves memory by releasing each microbatch's graph, not by "
                 "disabling graph recording.", "M22")
        fail(f"{name} raised RuntimeError: {exc}")
    except Exception as exc:
        fail(f"{name} raised {type(exc).__name__}: {exc}")


def _leave_loss_fn_out(n: int) -> bool:
    """Cross-entropy cases rely on the default loss_fn for even batch sizes and pass it explicitly otherwise."""
    return n % 2 == 0


def _cases():
    g = generator(1501)
    ce = F.cross_entropy
    cases = []
    for seed, (n, m) in enumerate([(10, 4), (7, 3), (6, 2), (5, 5), (5, 8), (9, 1)]):
        x = torch.randn(n, 5, generator=g, dtype=torch.float64)
        y = torch.randint(0, 3, (n,), generator=g)
        cases.append((_classifier(1510 + seed), x, y, m, ce, "F.cross_entropy"))
    x = torch.randn(11, 4, generator=g, dtype=torch.float64)
    y = torch.randn(11, 1, generator=g, dtype=torch.float64)  # one target per example: sum / N is the mean
    cases.append((_regressor(1520), x, y, 4, F.mse_loss, "F.mse_loss"))
    # (B, 3) targets: the mean runs over 3 numbers per example, so sum / N is 3 times the mean
    x = torch.randn(10, 4, generator=g, dtype=torch.float64)
    y = torch.randn(10, 3, generator=g, dtype=torch.float64)
    cases.append((_regressor(1521, outputs=3), x, y, 4, F.mse_loss, "F.mse_loss with (B, 3) targets"))
    cases.append((_regressor(1522, outputs=3), x[:7], y[:7], 3, fixtures.mse_mean_of_sums,
                  "a mean-reduced loss over (B, 3) targets"))
    return cases


def check_accumulate_gradients(accumulate_gradients) -> None:
    with torch.enable_grad():
        _check_accumulate_gradients(accumulate_gradients)


def _check_accumulate_gradients(accumulate_gradients) -> None:
    expect(accumulate_gradients is not None and callable(accumulate_gradients),
           "accumulate_gradients is not defined: keep the name from the stub and run its cell.")
    g = generator(1502)
    for model, x, y, m, loss_fn, loss_name in _cases():
        n = len(x)
        sizes = [len(c) for c in x.split(m)]
        what = f"{n} examples in microbatches of {m} (sizes {sizes}), loss_fn={loss_name}"
        # Gradients already in the buffers: accumulation adds to them.
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
        existing = _grads(model)
        before = _params(model)
        full = _contribution(model, x, y, loss_fn, 1.0)
        expected_loss = loss_fn(copy.deepcopy(model)(x), y).item()
        model[0].sizes.clear()
        if loss_fn is F.cross_entropy and _leave_loss_fn_out(len(x)):
            result = _call_accumulate(accumulate_gradients, "accumulate_gradients", model, x, y, m)
        else:
            result = _call_accumulate(accumulate_gradients, "accumulate_gradients", model, x, y, m, loss_fn)
        after = _params(model)
        grads = _grads(model)
        if not _match(after, before, rtol=0, atol=0):
            fail(f"accumulate_gradients changed the weights ({what}). Keep the weights fixed until all "
                 "microbatches are processed: no optimizer step inside accumulation (the caller steps once).", "M21")
        seen = model[0].sizes
        expect(seen, "accumulate_gradients never ran the model.")
        if max(seen) > m:
            fail(f"accumulate_gradients ran the model on {max(seen)} examples at once with micro_batch_size={m} "
                 f"({what}): run it on one microbatch at a time, so only a microbatch's activations are alive.", "M55")
        expected = _plus(existing, full)
        if _match(grads, expected, **_F64):
            expect(isinstance(result, float) and not isinstance(result, bool),
                   f"accumulate_gradients should return the full-batch mean loss as a Python float, got "
                   f"{type(result).__name__}.")
            expect(close_float(result, expected_loss, rel=1e-9, abs_tol=1e-12),
                   f"accumulate_gradients returned {result!r} ({what}); the full-batch mean loss is "
                   f"{expected_loss!r}.")
            continue
        chunks = list(zip(x.split(m), y.split(m)))
        k = len(chunks)
        per_k, unweighted, last = [None] * len(existing), [None] * len(existing), None
        for xb, yb in chunks:
            per_k = _plus(per_k, _contribution(model, xb, yb, loss_fn, 1.0 / k))
            unweighted = _plus(unweighted, _contribution(model, xb, yb, loss_fn, 1.0))
            last = _contribution(model, xb, yb, loss_fn, len(xb) / n)
        if all(gr is None or close(gr, torch.zeros_like(gr), rtol=0, atol=0) for gr in grads) or \
                _match(grads, existing, **_F64):
            fail(f"accumulate_gradients added no gradient ({what}). If the microbatch forward runs under "
                 "torch.no_grad(), no graph is recorded and backward has nothing to propagate; do not put a "
                 "training forward in no_grad() to save memory.", "M22")
        if _match(grads, full, **_F64):
            fail(f"accumulate_gradients replaced the gradients that were already in .grad ({what}): it should add to "
                 "them, like backward() does. Clearing is the caller's job (accumulated_train_step clears first).", "M54")
        if _match(grads, last, **_F64) or _match(grads, _plus(existing, last), **_F64):
            fail(f"only the last microbatch's gradient survived ({what}): the gradients were cleared inside the "
                 "loop. Clear once before accumulating, never between microbatches.", "M21")
        if len(set(sizes)) > 1 and _match(grads, _plus(existing, per_k), **_F64):
            fail(f"accumulate_gradients divided each microbatch's mean loss by the number of microbatches K = {k}, "
                 f"but the microbatches are uneven ({sizes}): the examples of the small one weigh more. Weight each "
                 f"microbatch's mean by its share of the examples, len(xb) / N with N = {n}.", "M19")
        per_element = y[0].numel()
        if per_element > 1 and _match(grads, _plus(existing, [None if gr is None else gr * per_element
                                                              for gr in full]), **_F64):
            fail(f"accumulate_gradients gives {per_element} times the gradient of the full-batch mean loss ({what}): "
                 f"the mean runs over {per_element} numbers per example, so summing the losses (reduction='sum') "
                 "and dividing by the number of examples is not the mean. Weight each microbatch's mean loss by "
                 "its share of the examples, len(xb) / N.", "M53")
        if _match(grads, _plus(existing, [None if gr is None else gr * n for gr in full]), **_F64):
            fail(f"accumulate_gradients added the gradient of the summed loss, {n} times the mean's ({what}): "
                 "weight each microbatch's mean loss by its share of the examples, len(xb) / N.", "M20")
        if k > 1 and _match(grads, _plus(existing, unweighted), **_F64):
            fail(f"accumulate_gradients added the microbatch means without dividing ({what}): the gradient is the "
                 "sum of K means, about K times the full-batch gradient. Weight each microbatch's mean by len(xb) / N.", "M20")
        fail(f"accumulate_gradients did not add the full-batch gradient of the mean loss to .grad ({what}).")


def check_accumulated_train_step(accumulated_train_step) -> None:
    with torch.enable_grad():
        _check_accumulated_train_step(accumulated_train_step)


def _check_accumulated_train_step(accumulated_train_step) -> None:
    expect(accumulated_train_step is not None and callable(accumulated_train_step),
           "accumulated_train_step is not defined: keep the name from the stub and run its cell.")
    g = generator(1503)
    for model, x, y, m, loss_fn, loss_name in _cases()[:3] + _cases()[-3:]:
        what = f"{len(x)} examples in microbatches of {m}, loss_fn={loss_name}"
        # A previous update left gradients and momentum behind.
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn(model(x[:3]), y[:3]).backward()
        optimizer.step()
        loss_fn(model(x[-2:]), y[-2:]).backward()  # stale gradients in the buffers
        reference, unclear = copy.deepcopy(model), copy.deepcopy(model)  # unclear: the stale gradients kept
        for twin, clear in ((reference, True), (unclear, False)):
            for p, q in zip(twin.parameters(), model.parameters()):  # deepcopy drops a Parameter's .grad
                p.grad = None if q.grad is None else q.grad.clone()
            twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
            twin_optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # no shared buffers
            if clear:
                twin_optimizer.zero_grad(set_to_none=True)
            twin_loss = reference_accumulate_gradients(twin, x, y, m, loss_fn)
            twin_optimizer.step()
            if clear:
                expected_loss = twin_loss
        steps = []
        handle = optimizer.register_step_post_hook(lambda *_: steps.append(1))
        try:
            if loss_fn is F.cross_entropy and _leave_loss_fn_out(len(x)):
                result = _call_accumulate(accumulated_train_step, "accumulated_train_step", model, optimizer, x, y, m)
            else:
                result = _call_accumulate(accumulated_train_step, "accumulated_train_step", model, optimizer, x, y,
                                          m, loss_fn)
        finally:
            handle.remove()
        if len(steps) != 1:
            fail(f"accumulated_train_step called optimizer.step() {len(steps)} times for one update ({what}). Step "
                 "once, after every microbatch's backward: stepping inside the loop updates the weights between "
                 "microbatches, and the later ones see different weights.", "M21")
        if not _match(_params(model), _params(reference), **_F64):
            if _match(_params(model), _params(unclear), **_F64):
                fail(f"accumulated_train_step stepped on the stale gradients plus the new ones ({what}): clear the "
                     "gradients first (optimizer.zero_grad(set_to_none=True)), then accumulate, then step once.", "M1")
            fail(f"accumulated_train_step's update differs from one SGD step on the full-batch gradient ({what}): "
                 "clear, accumulate the gradient of the full batch's mean loss (check accumulate_gradients), then "
                 "step once.")
        expect(isinstance(result, float) and not isinstance(result, bool),
               f"accumulated_train_step should return the full-batch mean loss as a Python float, got "
               f"{type(result).__name__}.")
        expect(close_float(result, expected_loss, rel=1e-9, abs_tol=1e-12),
               f"accumulated_train_step returned {result!r}; the full-batch mean loss is {expected_loss!r}.")


def _mlp(device, width=128, hidden=512, depth=4, seed=1530):
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width), nn.ReLU())
                           for _ in range(depth)]).to(device)


def measure_accumulation_memory(accumulate_gradients, micro=32, ks=(2, 8)) -> dict:
    """Peak bytes of accumulate_gradients and of the reference for K microbatches of `micro` examples."""
    device = _probe.device()
    g = generator(1504)
    model = _mlp(device)
    data = [(torch.randn(micro * k, 128, generator=g).to(device),
             torch.randint(0, 128, (micro * k,), generator=g).to(device)) for k in ks]
    figures = {"device": str(device), "micro": micro, "ks": ks}
    mine = measured(fixtures.accumulation_peaks, accumulate_gradients, "accumulate_gradients",
                    copy.deepcopy(model), data, micro)
    ref = fixtures.accumulation_peaks(reference_accumulate_gradients, copy.deepcopy(model), data, micro)
    figures["correct"] = all(
        isinstance(r_mine, float) and close_float(r_mine, r_ref, rel=1e-4) and _match(g_mine, g_ref, rtol=1e-4, atol=1e-6)
        for r_mine, r_ref, g_mine, g_ref in zip(mine["results"], ref["results"], mine["grads"], ref["grads"]))
    with torch.enable_grad(), _probe.quiet():
        _, figures["saved_one_microbatch"] = _probe.saved_tensor_bytes(
            lambda: F.cross_entropy(model(data[0][0][:micro]), data[0][1][:micro]))
    for who, measured_peaks in (("reference", ref), ("yours", mine)):
        peaks = dict(zip(ks, measured_peaks["peaks"]))
        peaks["slope"] = (peaks[ks[-1]] - peaks[ks[0]]) / (ks[-1] - ks[0])
        figures[who] = peaks
    return figures


def check_accumulation_memory(accumulate_gradients) -> None:
    """M18: the peak of accumulation stays near one microbatch's, whatever the number of microbatches."""
    figures = measure_accumulation_memory(accumulate_gradients)
    micro, (k1, k2) = figures["micro"], figures["ks"]
    ref, mine, saved = figures["reference"], figures["yours"], figures["saved_one_microbatch"]
    expect(figures["correct"], f"accumulate_gradients gives wrong gradients or loss for {micro * k2} examples in "
           f"microbatches of {micro} (memory not assessed until they are right).")
    if mine["slope"] - ref["slope"] > saved / 2:
        fail(f"the peak memory of accumulate_gradients grows with the number of microbatches: "
             f"{_fmt(mine[k1])} for K = {k1}, {_fmt(mine[k2])} for K = {k2}, about "
             f"{_fmt(mine['slope'])} more per microbatch (one microbatch's saved activations: "
             f"{_fmt(saved)}; reference: {_fmt(ref[k1])} and {_fmt(ref[k2])}). Summing "
             "graph-connected losses and calling backward once at the end keeps every microbatch's graph alive: "
             "call backward() on each microbatch's loss, and keep loss.item(), not the tensor.", "M18")
    if mine[k2] > ref[k2] + saved / 2:
        fail(f"accumulate_gradients peaks at {_fmt(mine[k2])} for {k2} microbatches, against "
             f"{_fmt(ref[k2])} for backward per microbatch (one microbatch's saved activations: "
             f"{_fmt(saved)}): release each microbatch's graph before the next forward.", "M18")


def _blocks(seed, dtype=torch.float64, kinds=("list", "sequential", "modulelist")):
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 6)) for _ in range(3)]
    blocks = [b.to(dtype) for b in blocks]
    return {"list": blocks, "sequential": nn.Sequential(*blocks), "modulelist": nn.ModuleList(blocks)}


def check_checkpointed_forward(checkpointed_forward) -> None:
    with torch.enable_grad():
        _check_checkpointed_forward(checkpointed_forward)


def _check_checkpointed_forward(checkpointed_forward) -> None:
    expect(checkpointed_forward is not None and callable(checkpointed_forward),
           "checkpointed_forward is not defined: keep the name from the stub and run its cell.")
    g = generator(1505)
    for case, (kind, input_grad, n) in enumerate([("list", False, 5), ("sequential", True, 4),
                                                  ("modulelist", False, 1)]):
        blocks = _blocks(1540 + case)[kind]
        twin = copy.deepcopy(blocks)
        x = torch.randn(n, 6, generator=g, dtype=torch.float64)
        target = torch.randn(n, 6, generator=g, dtype=torch.float64)
        x_twin = x.clone()
        if input_grad:
            x.requires_grad_(True)
            x_twin.requires_grad_(True)
        h = x_twin
        for block in twin:
            h = block(h)
        F.mse_loss(h, target).backward()
        try:
            out = checkpointed_forward(blocks, x)
        except NotImplementedError:
            fail("checkpointed_forward still raises NotImplementedError: write its body.")
        except Exception as exc:
            fail(f"checkpointed_forward(blocks as a {kind}, x of shape {tuple(x.shape)}) raised "
                 f"{type(exc).__name__}: {exc}")
        expect(isinstance(out, torch.Tensor), f"checkpointed_forward should return a tensor, got "
               f"{type(out).__name__}.")
        expect(close(out, h, **_F64), f"checkpointed_forward's output differs from running the blocks in order "
               f"(blocks as a {kind}).")
        expect(out.requires_grad, "checkpointed_forward's output does not require grad: no gradient can reach the "
               "blocks' parameters. Run it with autograd on; with use_reentrant=True and an input that does not "
               "require grad, checkpoint's output is cut off from the parameters: use "
               "checkpoint(block, x, use_reentrant=False).", "M56")
        F.mse_loss(out, target).backward()
        per_block = [[p.grad for p in b.parameters()] for b in blocks]
        mine = [gr for grads in per_block for gr in grads]
        theirs = [p.grad for b in twin for p in b.parameters()]
        reached = [all(gr is not None for gr in grads) for grads in per_block]
        if reached[-1] and not all(reached):
            fail("after backward through checkpointed_forward, only the last block(s) have gradients: the chain "
                 "between blocks was cut, e.g. by detaching (x.detach(), torch.no_grad()) or by rebuilding a tensor "
                 "from another's values between blocks. Pass each block's output on as it is: "
                 "x = checkpoint(block, x, use_reentrant=False).", "M57")
        if any(gr is None for gr in mine):
            fail("after backward through checkpointed_forward, some parameters have no gradient. With "
                 "use_reentrant=True and an input that does not require grad, checkpoint silently drops the "
                 "parameters' gradients: use checkpoint(block, x, use_reentrant=False).", "M56")
        expect(_match(mine, theirs, **_F64), "the gradients through checkpointed_forward differ from the plain "
               "forward's: checkpointing must give the same output and the same gradients.")
        if input_grad:
            expect(x.grad is not None and close(x.grad, x_twin.grad, **_F64),
                   "the gradient with respect to the input differs from the plain forward's.")


def _plain_forward(blocks, x):
    for block in blocks:
        x = block(x)
    return x


def measure_checkpoint_memory(checkpointed_forward) -> dict:
    """Live bytes right after the forward (output held): plain, reference checkpointing, yours."""
    device = _probe.device()
    model = _mlp(device, seed=1550)
    g = generator(1506)
    x = torch.randn(32, 128, generator=g).to(device)
    y = torch.randint(0, 128, (32,), generator=g).to(device)
    runs = {"yours": measured(fixtures.checkpoint_live, checkpointed_forward, "checkpointed_forward",
                              copy.deepcopy(model), x, y),
            "plain": fixtures.checkpoint_live(_plain_forward, copy.deepcopy(model), x, y),
            "reference": fixtures.checkpoint_live(reference_checkpointed_forward, copy.deepcopy(model), x, y)}
    figures = {"device": str(device), **{who: run["live"] for who, run in runs.items()}}
    out = runs["yours"]["output"]
    figures["same_output"] = isinstance(out, torch.Tensor) and close(out, runs["plain"]["output"], rtol=1e-4,
                                                                     atol=1e-5)
    figures["same_gradients"] = all(gr is not None for gr in runs["yours"]["grads"]) and _match(
        runs["yours"]["grads"], runs["plain"]["grads"], rtol=1e-3, atol=1e-5)
    return figures


def check_checkpoint_memory(checkpointed_forward) -> None:
    """M23: what stays alive after the forward (its output held) is each block's input, not every activation."""
    figures = measure_checkpoint_memory(checkpointed_forward)
    expect(figures["same_output"], "checkpointed_forward's output differs from the plain forward's (memory not "
           "assessed until it is right).")
    expect(figures["same_gradients"], "the gradients through checkpointed_forward differ from the plain forward's "
           "(memory not assessed until they are right).")
    plain, ref, mine = figures["plain"], figures["reference"], figures["yours"]
    if mine > ref + (plain - ref) / 2:
        fail(f"after checkpointed_forward, {_fmt(mine)} are still alive, about as much as after the plain "
             f"forward ({_fmt(plain)}): every block's intermediate activations were saved for backward. "
             f"Checkpointing each block keeps only the block inputs ({_fmt(ref)} with the reference) and "
             "recomputes the rest during backward: run each block through "
             "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False), not the plain call.", "M23")
