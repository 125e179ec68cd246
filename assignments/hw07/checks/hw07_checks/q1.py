"""q1 — Three switches with three different jobs (handout §1.1).

`train_step` and `evaluate` are checked on small float64 models (exact
comparisons with a reference update), with a module that records the mode
each forward pass ran in. `evaluate`'s graph recording (M4) gives the right
numbers, so it is caught by measurement: its peak memory, against the
reference's measured by the same probe in the same process.
"""
from __future__ import annotations

import copy
import numbers

import torch
import torch.nn.functional as F

from . import _probe, fixtures
from ._probe import fmt_bytes as _fmt
from ._common import close, close_float, expect, fail, generator, measured

PARTS = ("forward behavior", "graph recording", "gradient buffers", "parameters", "optimizer state")
EXPECTED_SWITCHES = {
    "model.eval()": {"forward behavior"},
    "model.train()": {"forward behavior"},
    "torch.no_grad()": {"graph recording"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "loss.backward()": {"gradient buffers"},
    "optimizer.step()": {"parameters", "optimizer state"},
}
_WHY = {
    "model.eval()": "eval() only changes how layers such as dropout and batch norm behave; it does not stop "
                    "autograd from recording a graph",
    "model.train()": "train() only switches layer behaviour back (dropout active again)",
    "torch.no_grad()": "no_grad() stops graph recording; it does not change layer behaviour, gradients or weights",
    "optimizer.zero_grad(set_to_none=True)": "zero_grad clears the gradient buffers (set_to_none drops them); it "
                                             "does not touch weights or the optimizer's moments",
    "loss.backward()": "backward() adds to the leaves' .grad buffers; the weights change only at step()",
    "optimizer.step()": "step() updates the parameters and the optimizer's state (momentum, Adam's moments, which "
                        "are allocated at the first step)",
}


def _model(seed: int, dropout: float = 0.0):
    return fixtures.recorder_model(seed, dropout)


def _recorder(model) -> _Recorder:
    return next(m for m in model.modules() if isinstance(m, fixtures.Recorder))


def _params(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _all_close(actual, expected, **tol) -> bool:
    return len(actual) == len(expected) and all(close(a, e, **tol) for a, e in zip(actual, expected))


def _not_a_float(value, name: str) -> None:
    if isinstance(value, torch.Tensor):
        graph = " that requires grad" if value.requires_grad else ""
        fail(f"{name} returned a torch.Tensor{graph}; return a Python float with loss.item(). A loss tensor keeps "
             "its graph (grad_fn and everything it references) alive for as long as you hold it: logging loss "
             "tensors in a list retains every step's graph.", "M3")
    expect(isinstance(value, numbers.Real) and not isinstance(value, bool),
           f"{name} should return the loss as a Python float (loss.item()), got {type(value).__name__}.", "M3")


# ----------------------------------------------------------------------------- train_step


def _reference_train_step(model, optimizer, loss_fn, x, y) -> float:
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def check_train_step(train_step) -> None:
    with torch.enable_grad():
        _check_train_step(train_step)


def _check_train_step(train_step) -> None:
    g = generator(1101)
    lr = 0.1
    for case, (n, from_eval) in enumerate([(6, True), (4, False), (1, True)]):
        model = _model(1110 + case)
        x, y = torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randn(n, 2, generator=g, dtype=torch.float64)
        # Stale gradients from an earlier batch, as a training loop leaves them.
        xs = torch.randn(5, 3, generator=g, dtype=torch.float64)
        ys = torch.randn(5, 2, generator=g, dtype=torch.float64)
        F.mse_loss(model(xs), ys).backward()
        stale = [p.grad.clone() for p in model.parameters()]
        stale_objects = [p.grad for p in model.parameters()]
        if from_eval:
            model.eval()  # e.g. right after validation
        reference = copy.deepcopy(model)
        _recorder(model).seen.clear()
        before = _params(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        try:
            result = train_step(model, optimizer, F.mse_loss, x, y)
        except NotImplementedError:
            fail("train_step still raises NotImplementedError: write its body.")
        except Exception as exc:
            fail(f"train_step(model, optimizer, F.mse_loss, x of shape {tuple(x.shape)}, y) raised "
                 f"{type(exc).__name__}: {exc}")
        expected_loss = _reference_train_step(reference, torch.optim.SGD(reference.parameters(), lr=lr),
                                               F.mse_loss, x, y)
        _not_a_float(result, "train_step")
        seen = _recorder(model).seen
        expect(len(seen) >= 1, "train_step never ran the model's forward pass.")
        if from_eval and not seen[0][0]:
            fail("train_step ran the forward pass with the model in eval mode (it came from validation): call "
                 "model.train() at the start of the step. The training flag is separate state; nothing else "
                 "switches it back.", "M34")
        after = _params(model)
        if _all_close(after, before, rtol=0, atol=0):
            fail("train_step did not change the parameters. If you clear the gradients after backward() and "
                 "before step(), step() finds no gradients: clear them before backward().", "M2")
        # What the weights would be if the stale gradients had been added in.
        fresh = [(b - r.detach()) / lr for b, r in zip(before, reference.parameters())]
        accumulated = [b - lr * (s + f) for b, s, f in zip(before, stale, fresh)]
        if _all_close(after, accumulated, rtol=1e-9, atol=1e-12):
            fail("train_step's update used the old gradients plus the new ones: backward() adds to .grad, so the "
                 "gradients accumulate across calls. Clear them with optimizer.zero_grad(set_to_none=True) "
                 "before backward() (clearing only after step() still lets gradients left by someone else in).", "M1")
        expect(_all_close(after, [p.detach() for p in reference.parameters()], rtol=1e-9, atol=1e-12),
               "train_step's update differs from one SGD step on this batch's gradient (train mode, clear, "
               "forward, loss, backward, step).")
        if any(p.grad is s for p, s in zip(model.parameters(), stale_objects)):
            fail("train_step zeroed the old gradient tensors in place (set_to_none=False) and reused them: use "
                 "optimizer.zero_grad(set_to_none=True), which drops the buffers so their memory can be freed.", "M35")
        expect(close_float(result, expected_loss, rel=1e-9),
               f"train_step returned {result!r}; the loss of this batch before the update is {expected_loss!r}.")
        expect(model.training, "after train_step the model should be in training mode.", "M34")


# ----------------------------------------------------------------------------- evaluate


def _reference_evaluate(model, batches, loss_fn) -> float:
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for x, y in batches:
                total += loss_fn(model(x), y).item() * len(x)
                count += len(x)
    finally:
        model.train(was_training)
    return total / count


def _call_evaluate(evaluate, model, batches, loss_fn):
    try:
        return evaluate(model, batches, loss_fn)
    except NotImplementedError:
        fail("evaluate still raises NotImplementedError: write its body.")
    except TypeError as exc:
        if "len()" in str(exc) or "not subscriptable" in str(exc):
            fail(f"evaluate raised TypeError: {exc}. `batches` may be any iterable of (x, y) pairs, such as a "
                 "generator: go through it once with a for loop and count the examples as you go.", "M37")
        fail(f"evaluate raised TypeError: {exc}")
    except Exception as exc:
        fail(f"evaluate raised {type(exc).__name__}: {exc}")


def check_evaluate(evaluate) -> None:
    with torch.enable_grad():
        _check_evaluate(evaluate)


def _check_evaluate(evaluate) -> None:
    g = generator(1102)
    for case, (sizes, train_before, one_pass) in enumerate(
            [((5, 5, 2), True, False), ((3, 7, 1, 4), False, False), ((4, 1), True, True), ((2,), True, False),
             ((6, 3), True, True)]):
        model = _model(1120 + case, dropout=0.5)
        batches = [(torch.randn(n, 3, generator=g, dtype=torch.float64),
                    torch.randn(n, 2, generator=g, dtype=torch.float64)) for n in sizes]
        # Gradients left by training: evaluation must leave them exactly as they are.
        F.mse_loss(model(batches[0][0]), batches[0][1]).backward()
        model[0].weight.grad = None  # a parameter without a gradient must stay without one
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        model.train(train_before)
        _recorder(model).seen.clear()
        expected = _reference_evaluate(copy.deepcopy(model), batches, F.mse_loss)
        result = _call_evaluate(evaluate, model, iter(batches) if one_pass else list(batches), F.mse_loss)
        _not_a_float(result, "evaluate")
        seen = _recorder(model).seen
        if one_pass and len(seen) < len(sizes):
            fail(f"evaluate ran {len(seen)} forward passes for {len(sizes)} batches given as a one-pass iterator: "
                 "`batches` may be a generator, so go through it once (no len(), no second loop).", "M37")
        expect(len(seen) == len(sizes), f"evaluate ran {len(seen)} forward passes for {len(sizes)} batches; run the "
               "model once on each batch.")
        if any(training for training, _ in seen):
            fail("evaluate ran the model in training mode, so dropout was active and the loss is noisy: call "
                 "model.eval() before the loop. (no_grad() alone stops graph recording; it does not change layer "
                 "behaviour.)", "M5")
        if not torch.is_grad_enabled():
            fail("after evaluate, autograd is still disabled for the code that follows: use `with torch.no_grad():` "
                 "around the loop, which restores the previous mode on exit.", "M36")
        if model.training != train_before:
            if train_before:
                fail("evaluate left the model in eval mode: the next training step would run without dropout. "
                     "Remember model.training before switching and restore it with model.train(was_training).", "M7")
            fail("evaluate switched a model that was in eval mode to training mode: restore the *previous* flag "
                 "(was_training = model.training ... model.train(was_training)), not always train().", "M7")
        for p, before in zip(model.parameters(), grads):
            if before is None:
                expect(p.grad is None, "evaluate created gradients: evaluation performs no backward pass.", "M8")
            else:
                expect(p.grad is not None and close(p.grad, before, rtol=0, atol=0),
                       "evaluate cleared or changed the parameters' gradients. Validation performs no backward "
                       "pass and needs no gradient clearing: leave .grad exactly as you found it (no zero_grad).", "M8")
        means = [_reference_evaluate(copy.deepcopy(model), [b], F.mse_loss) for b in batches]
        if len(set(sizes)) > 1 and close_float(result, sum(means) / len(means), rel=1e-9):
            fail(f"evaluate returned the mean of the batch means; with batches of sizes {sizes} that weights the "
                 "examples of small batches more. Return the mean loss per example: weight each batch's mean by "
                 "its number of examples and divide by the total count.", "M6")
        expect(close_float(result, expected, rel=1e-9, abs_tol=1e-12),
               f"evaluate returned {result!r} for batches of sizes {sizes}; the mean loss per example in eval "
               f"mode is {expected!r}.")


def _memory_inputs():
    device = _probe.device()
    g = generator(1103)
    model = fixtures.deep_mlp(device)
    batches = [(torch.randn(n, 128, generator=g).to(device), torch.randint(0, 128, (n,), generator=g).to(device))
               for n in (32, 32, 32, 17)]
    return model, batches


def _value(described):
    """The number a result described by fixtures.plain stands for (a float, or a one-element tensor's value)."""
    if isinstance(described, dict):
        return described.get("value")
    return described if isinstance(described, (int, float)) and not isinstance(described, bool) else None


def measure_evaluate_memory(evaluate) -> dict:
    """Peak and live bytes of evaluate and of the reference (no_grad), each on a fresh copy of one model."""
    model, batches = _memory_inputs()
    figures = {"device": str(_probe.device())}
    figures["yours"] = measured(fixtures.evaluate_memory, evaluate, "evaluate", copy.deepcopy(model), batches,
                                F.cross_entropy)
    figures["reference"] = fixtures.evaluate_memory(_reference_evaluate, copy.deepcopy(model), batches,
                                                    F.cross_entropy)
    with torch.enable_grad(), _probe.quiet():
        _, figures["saved_one_batch"] = _probe.saved_tensor_bytes(
            lambda: F.cross_entropy(model(batches[0][0]), batches[0][1]))
    return figures


def check_evaluate_memory(evaluate) -> None:
    """M4: evaluation without no_grad() builds and holds each batch's graph; only memory shows it.

    Judges memory only: the return type is check_evaluate's business.
    """
    figures = measure_evaluate_memory(evaluate)
    ref, mine, saved = figures["reference"], figures["yours"], figures["saved_one_batch"]
    value = _value(mine["result"])
    expect(value is not None and close_float(value, ref["result"], rel=1e-4, abs_tol=1e-6),
           f"evaluate returned {mine['result']!r}; the mean loss per example in eval mode is {ref['result']!r} "
           "(memory not assessed until the value is right).")
    if mine["peak"] > ref["peak"] + saved / 2:
        fail(f"evaluate built a backward graph: its peak memory was {_fmt(mine['peak'])}, against "
             f"{_fmt(ref['peak'])} for the same loop under torch.no_grad() (one batch's saved activations "
             f"are {_fmt(saved)}). model.eval() changes layer behaviour but does not stop graph recording; "
             "wrap the loop in torch.no_grad() so intermediates are freed as soon as they are used.", "M4")
    if mine["live"] > ref["live"] + saved / 2:
        fail(f"after evaluate returned, {_fmt(mine['live'])} it created were still alive (reference: "
             f"{_fmt(ref['live'])}): it keeps graphs or tensors from the loop. Keep loss.item(), not loss "
             "tensors.", "M4")


# ----------------------------------------------------------------------------- SWITCHES


def check_switches(SWITCHES) -> None:
    expect(isinstance(SWITCHES, dict), f"SWITCHES should be a dict, got {type(SWITCHES).__name__}.")
    missing = [k for k in EXPECTED_SWITCHES if k not in SWITCHES]
    expect(not missing, f"SWITCHES is missing the keys {missing}; keep the six keys of the stub exactly.")
    for key, expected in EXPECTED_SWITCHES.items():
        value = SWITCHES[key]
        expect(not isinstance(value, str) and hasattr(value, "__iter__"),
               f"SWITCHES[{key!r}] should be a set of strings, got {type(value).__name__}.")
        value = set(value)
        unknown = sorted(v for v in value if v not in PARTS)
        expect(not unknown, f"SWITCHES[{key!r}] contains {unknown}; use only names from {sorted(PARTS)}.")
        if value != expected:
            detail = "; ".join(filter(None, [
                f"it lists {len(value - expected)} thing(s) the operation does not change" if value - expected else "",
                f"it misses {len(expected - value)} thing(s) the operation changes" if expected - value else ""]))
            fail(f"SWITCHES[{key!r}] is not right: {detail}. Hint: {_WHY[key]}.", "M38")
