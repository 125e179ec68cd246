"""Helpers every hidden check uses: seeded inputs, calling student code, comparisons.

References to torch's comparison functions are taken when this module is
imported, before the checks call any student code, so a submission that
rebinds `torch.allclose` later cannot change what the checks compare with.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

_allclose = torch.allclose
_isclose = math.isclose
_equal = torch.equal
_float64 = torch.float64


class CheckFailure(AssertionError):
    """A failed check; its message is what the student and the TA read.

    `misconceptions` holds the ids (misconceptions/ids.yaml) of the mistakes the
    failure detected; empty when it names none in particular.
    """

    def __init__(self, message: str, misconceptions: tuple[str, ...] = ()):
        super().__init__(message)
        self.misconceptions = tuple(misconceptions)


def fail(message: str, *ids: str) -> None:
    raise CheckFailure(message, ids)


def expect(condition: bool, message: str, *ids: str) -> None:
    if not condition:
        raise CheckFailure(message, ids)


def measure(procedure: Callable, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a fixtures procedure on student code: in the sandbox when `fn` is a remote stand-in, else here.

    The procedure returns plain data; a student exception inside it propagates as it is.
    """
    if hasattr(fn, "__remote_measure__"):
        return fn.__remote_measure__(procedure, args, kwargs)
    return procedure(fn, *args, **kwargs)


def generator(seed: int) -> torch.Generator:
    """Every random case is drawn from an explicitly seeded generator."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def require_function(fn: Any, name: str) -> Callable:
    expect(fn is not None, f"{name} is not defined: keep the name {name} from the stub and run its cell.")
    expect(callable(fn), f"{name} should be a function, but it is a {type(fn).__name__}.")
    return fn


def call(fn: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call student code; turn a stub or a crash into a message that says which call failed."""
    require_function(fn, name)
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(f"{name} still raises NotImplementedError: write its body.")
    except CheckFailure:
        raise
    except Exception as exc:  # the student's bug, reported as a failed check
        fail(f"{name}{_describe_args(args)} raised {type(exc).__name__}: {exc}")


def measured(procedure: Callable, fn: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """`measure` with `call`'s messages for a stub or a crash of the student's code."""
    require_function(fn, name)
    try:
        return measure(procedure, fn, *args, **kwargs)
    except NotImplementedError:
        fail(f"{name} still raises NotImplementedError: write its body.")
    except CheckFailure:
        raise
    except Exception as exc:
        fail(f"{name} raised {type(exc).__name__}: {exc}")


def _describe_args(args: tuple) -> str:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(f"<tensor of shape {tuple(a.shape)}>")
        elif isinstance(a, (int, float, str, tuple)) and len(repr(a)) < 40:
            parts.append(repr(a))
        else:
            parts.append(f"<{type(a).__name__}>")
    return "(" + ", ".join(parts) + ")"


def require_tensor(value: Any, name: str) -> torch.Tensor:
    # exact type: a Tensor subclass could redefine the comparisons the checks rely on
    expect(type(value) is torch.Tensor, f"{name} should return a torch.Tensor, got {type(value).__name__}.")
    return value


def expect_shape(value: torch.Tensor, shape: tuple, what: str) -> None:
    expect(tuple(value.shape) == tuple(shape),
           f"{what} has shape {tuple(value.shape)}; expected {tuple(shape)}.")


def close(actual: torch.Tensor, expected: torch.Tensor, *, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """True when the tensors agree in shape and values (compared in float64)."""
    if tuple(actual.shape) != tuple(expected.shape):
        return False
    return bool(_allclose(actual.detach().to(_float64), expected.detach().to(_float64), rtol=rtol, atol=atol))


def close_float(actual: float, expected: float, *, rel: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    return _isclose(float(actual), float(expected), rel_tol=rel, abs_tol=abs_tol)


def shape_text(shape) -> list[str]:
    """The ways a message can print a shape: (4, 1), [4, 1], torch.Size([4, 1])."""
    shape = tuple(int(s) for s in shape)
    return [str(shape), str(list(shape)), str(torch.Size(shape))]


def padded_targets(g: torch.Generator, B: int, T: int, V: int, pad_id, lengths=None) -> torch.Tensor:
    """(B, T) targets: real tokens (never pad_id) followed by padding, a different length per row."""
    real_ids = [i for i in range(V) if i != pad_id]
    picks = torch.randint(0, len(real_ids), (B, T), generator=g)
    targets = torch.tensor(real_ids)[picks]
    if pad_id is not None:
        if lengths is None:
            lengths = [int(torch.randint(1, T + 1, (1,), generator=g)) for _ in range(B)]
        for row, n in enumerate(lengths):
            targets[row, n:] = pad_id
    return targets
