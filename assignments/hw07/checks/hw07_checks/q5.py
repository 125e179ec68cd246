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

from . import _probe
from ._probe import fmt_bytes as _fmt
from ._common import close, close_float, expect, fail, generator

_F64 = dict(rtol=1e-9, atol=1e-12)


def reference_accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy) -> float:
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
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


class _SizeRecorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(len(x))
        return x


def _classifier(seed):
    torch.manual_seed(seed)
    return nn.Sequential(_SizeRecorder(), nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()


def _regressor(seed):
    torch.manual_seed(seed)
    return nn.Sequential(_SizeRecorder(), nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)).double()


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
                 "disabling graph recording.")
        fail(f"{name} raised RuntimeError: {exc}")
    except Exception as exc:
        fail(f"{name} raised {type(exc).__name__}: {exc}")


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
        if loss_fn is F.cross_entropy:
            result = _call_accumulate(accumulate_gradients, "accumulate_gradients", model, x, y, m)
        else:
            result = _call_accumulate(accumulate_gradients, "accumulate_gradients", model, x, y, m, loss_fn)
        after = _params(model)
        grads = _grads(model)
        if not _match(after, before, rtol=0, atol=0):
            fail(f"accumulate_gradients changed the weights ({what}). Keep the weights fixed until all "
                 "microbatches are processed: no optimizer step inside accumulation (the caller steps once).")
        seen = model[0].sizes
        expect(seen, "accumulate_gradients never ran the model.")
        if max(seen) > m:
            fail(f"accumulate_gradients ran the model on {max(seen)} examples at once with micro_batch_size={m} "
                 f"({what}): run it on one microbatch at a time, so only a microbatch's activations are alive.")
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
                 "training forward in no_grad() to save memory.")
        if _match(grads, full, **_F64):
            fail(f"accumulate_gradients replaced the gradients that were already in .grad ({what}): it should add to "
                 "them, like backward() does. Clearing is the caller's job (accumulated_train_step clears first).")
        if _match(grads, last, **_F64) or _match(grads, _plus(existing, last), **_F64):
            fail(f"only the last microbatch's gradient survived ({what}): the gradients were cleared inside the "
                 "loop. Clear once before accumulating, never between microbatches.")
        if len(set(sizes)) > 1 and _match(grads, _plus(existing, per_k), **_F64):
            fail(f"accumulate_gradients divided each microbatch's mean loss by the number of microbatches K = {k}, "
                 f"but the microbatches are uneven ({sizes}): the examples of the small one weigh more. Weight each "
                 f"microbatch by its example count: sum the losses (reduction='sum') and divide by all {n} examples, "
                 "or multiply each mean by len(xb) / N.")
        if k > 1 and _match(grads, _plus(existing, unweighted), **_F64):
            fail(f"accumulate_gradients added the microbatch means without dividing ({what}): the gradient is the "
                 "sum of K means, about K times the full-batch gradient. Divide by the total number of examples.")
        fail(f"accumulate_gradients did not add the full-batch gradient of the mean loss to .grad ({what}).")


def check_accumulated_train_step(accumulated_train_step) -> None:
    with torch.enable_grad():
        _check_accumulated_train_step(accumulated_train_step)


def _check_accumulated_train_step(accumulated_train_step) -> None:
    expect(accumulated_train_step is not None and callable(accumulated_train_step),
           "accumulated_train_step is not defined: keep the name from the stub and run its cell.")
    g = generator(1503)
    for model, x, y, m, loss_fn, loss_name in _cases()[:3] + _cases()[-1:]:
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
            if loss_fn is F.cross_entropy:
                result = _call_accumulate(accumulated_train_step, "accumulated_train_step", model, optimizer, x, y, m)
            else:
                result = _call_accumulate(accumulated_train_step, "accumulated_train_step", model, optimizer, x, y,
                                          m, loss_fn)
        finally:
            handle.remove()
        if len(steps) != 1:
            fail(f"accumulated_train_step called optimizer.step() {len(steps)} times for one update ({what}). Step "
                 "once, after every microbatch's backward: stepping inside the loop updates the weights between "
                 "microbatches, and the later ones see different weights.")
        if not _match(_params(model), _params(reference), **_F64):
            if _match(_params(model), _params(unclear), **_F64):
                fail(f"accumulated_train_step stepped on the stale gradients plus the new ones ({what}): clear the "
                     "gradients first (optimizer.zero_grad(set_to_none=True)), then accumulate, then step once.")
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
    data = {k: (torch.randn(micro * k, 128, generator=g).to(device),
                torch.randint(0, 128, (micro * k,), generator=g).to(device)) for k in ks}
    figures = {"device": str(device), "micro": micro, "ks": ks, "reference": {}, "yours": {}, "correct": True}
    expected = {}
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, data[ks[0]][0][:micro], data[ks[0]][1][:micro], F.cross_entropy)
        _, figures["saved_one_microbatch"] = _probe.saved_tensor_bytes(
            lambda: F.cross_entropy(model(data[ks[0]][0][:micro]), data[ks[0]][1][:micro]))
        for who, fn in (("reference", reference_accumulate_gradients), ("yours", accumulate_gradients)):
            for k in ks:
                model.zero_grad(set_to_none=True)
                x, y = data[k]
                result, peak, _ = _probe.peak_and_live(
                    lambda: _call_accumulate(fn, "accumulate_gradients", model, x, y, micro))
                figures[who][k] = peak
                grads = _grads(model)
                if who == "reference":
                    expected[k] = (grads, result)
                elif not (_match(grads, expected[k][0], rtol=1e-4, atol=1e-6) and isinstance(result, float)
                          and close_float(result, expected[k][1], rel=1e-4)):
                    figures["correct"] = False
        model.zero_grad(set_to_none=True)
    for who in ("reference", "yours"):
        figures[who]["slope"] = (figures[who][ks[-1]] - figures[who][ks[0]]) / (ks[-1] - ks[0])
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
             "call backward() on each microbatch's loss, and keep loss.item(), not the tensor.")
    if mine[k2] > ref[k2] + saved / 2:
        fail(f"accumulate_gradients peaks at {_fmt(mine[k2])} for {k2} microbatches, against "
             f"{_fmt(ref[k2])} for backward per microbatch (one microbatch's saved activations: "
             f"{_fmt(saved)}): release each microbatch's graph before the next forward.")


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
               "checkpoint(block, x, use_reentrant=False).")
        F.mse_loss(out, target).backward()
        mine = [p.grad for b in blocks for p in b.parameters()]
        theirs = [p.grad for b in twin for p in b.parameters()]
        if any(gr is None for gr in mine):
            fail("after backward through checkpointed_forward, some parameters have no gradient. With "
                 "use_reentrant=True and an input that does not require grad, checkpoint silently drops the "
                 "parameters' gradients: use checkpoint(block, x, use_reentrant=False).")
        expect(_match(mine, theirs, **_F64), "the gradients through checkpointed_forward differ from the plain "
               "forward's: checkpointing must give the same output and the same gradients.")
        if input_grad:
            expect(x.grad is not None and close(x.grad, x_twin.grad, **_F64),
                   "the gradient with respect to the input differs from the plain forward's.")


def measure_checkpoint_memory(checkpointed_forward) -> dict:
    """Live bytes right after the forward (output held): plain, reference checkpointing, yours."""
    device = _probe.device()
    model = _mlp(device, seed=1550)
    blocks = list(model)
    g = generator(1506)
    x = torch.randn(32, 128, generator=g).to(device)
    y = torch.randint(0, 128, (32,), generator=g).to(device)
    figures, outputs, grads = {"device": str(device)}, {}, {}
    with torch.enable_grad(), _probe.quiet():
        _probe.warm_up(model, x, y, F.cross_entropy)
        for who, fn in (("plain", lambda b, h: nn.Sequential(*b)(h)),
                        ("reference", reference_checkpointed_forward), ("yours", checkpointed_forward)):
            with _probe.MemoryProbe(device=device) as probe:
                if who == "yours":
                    try:
                        out = fn(blocks, x)
                    except NotImplementedError:
                        fail("checkpointed_forward still raises NotImplementedError: write its body.")
                    except Exception as exc:
                        fail(f"checkpointed_forward raised {type(exc).__name__}: {exc}")
                else:
                    out = fn(blocks, x)
                figures[who] = probe.live_bytes()
                outputs[who] = out.detach().clone() if isinstance(out, torch.Tensor) else out
                if isinstance(out, torch.Tensor) and out.requires_grad:
                    F.cross_entropy(out, y).backward()
                del out
            grads[who] = [p.grad for p in model.parameters()]
            model.zero_grad(set_to_none=True)
    figures["same_output"] = isinstance(outputs["yours"], torch.Tensor) and close(
        outputs["yours"], outputs["plain"], rtol=1e-4, atol=1e-5)
    figures["same_gradients"] = all(gr is not None for gr in grads["yours"]) and _match(
        grads["yours"], grads["plain"], rtol=1e-3, atol=1e-5)
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
             "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False), not the plain call.")
