"""The plain-data channel between the examiner and a sandbox (both sides use this module).

Messages are length-prefixed JSON. Values are JSON with a few tagged forms
(a dict with one key starting with "$"): tensors travel as dtype, shape and
base64 bytes; sets, tuples, dicts with non-string keys, torch.Size, numpy
values and non-finite floats have tags of their own. Nothing is ever pickled.

`decode` is written for hostile input: it is given hard limits on depth,
element count and tensor bytes, validates every tag, and raises `WireError`
(the submission's error, never the batch's) on anything else. The sandbox
copy of this module is the student's to change; only the examiner's copy is
trusted.
"""
from __future__ import annotations

import base64
import json
import math
import os
import struct

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 24 << 20      # one message from a sandbox (JSON parsing multiplies it in memory)
MAX_DEPTH = 40
MAX_ITEMS = 200_000               # containers' elements, all levels together
MAX_TENSOR_BYTES = 16 << 20       # all tensors of one message together
MAX_STRING = 1 << 20

DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "complex128")
NUMPY_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


class WireError(Exception):
    """Malformed or oversized data from the other side."""


# ----------------------------------------------------------------------------- framing


def send(fd: int, message: dict) -> None:
    body = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
    data = HEADER.pack(len(body)) + body
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd: int, limit: int = MAX_MESSAGE_BYTES) -> dict:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size))
    if size > limit:
        raise WireError(f"message of {size:,} bytes is over the {limit:,}-byte limit")
    try:
        message = json.loads(_read_exact(fd, size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"unreadable message ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


# ----------------------------------------------------------------------------- encoding


def encode_tensor(t) -> dict:
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in DTYPES:
        return {"$opaque": f"Tensor[{dtype}]"}
    flat = t.contiguous().reshape(-1)
    raw = flat.view(torch.int16) if dtype == "bfloat16" else flat
    data = raw.numpy().tobytes()
    return {"$tensor": {"dtype": dtype, "shape": list(t.shape), "data": base64.b64encode(data).decode("ascii")}}


def encode(value, extra=None, _depth: int = 0):
    """Plain data for `value`; `extra(value)` may return an encoding for types this module does not know."""
    if _depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) in (int, bool):
        return value if abs(value) < (1 << 53) else {"$int": str(value)}
    if type(value) is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if extra is not None:
        special = extra(value)
        if special is not None:
            return special
    try:
        import torch
    except ImportError:  # pragma: no cover - both sides have torch
        torch = None
    if torch is not None and type(value) is torch.Size:
        return {"$size": [int(s) for s in value]}
    if torch is not None and isinstance(value, torch.Tensor):
        return encode_tensor(value)
    kind = type(value)
    if kind is tuple:
        return {"$tuple": [encode(v, extra, _depth + 1) for v in value]}
    if kind is list:
        return [encode(v, extra, _depth + 1) for v in value]
    if kind in (set, frozenset):
        return {"$" + kind.__name__: [encode(v, extra, _depth + 1) for v in value]}
    if kind is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            return {k: encode(v, extra, _depth + 1) for k, v in value.items()}
        return {"$dict": [[encode(k, extra, _depth + 1), encode(v, extra, _depth + 1)] for k, v in value.items()]}
    module = getattr(kind, "__module__", "")
    if module == "numpy" and hasattr(value, "dtype") and str(value.dtype) in NUMPY_DTYPES:
        import numpy as np

        arr = np.array(value, copy=True, order="C")  # keeps 0-dim (ascontiguousarray would make it 1-dim)
        return {"$numpy": {"dtype": str(value.dtype), "shape": list(arr.shape),
                           "scalar": not isinstance(value, np.ndarray),
                           "data": base64.b64encode(arr.tobytes()).decode("ascii")}}
    return {"$opaque": str(getattr(kind, "__name__", "object"))[:80]}


# ----------------------------------------------------------------------------- decoding


class _Budget:
    def __init__(self):
        self.items = 0
        self.tensor_bytes = 0

    def count(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise WireError(f"more than {MAX_ITEMS:,} values")

    def bytes(self, n: int) -> None:
        self.tensor_bytes += n
        if self.tensor_bytes > MAX_TENSOR_BYTES:
            raise WireError(f"more than {MAX_TENSOR_BYTES >> 20} MiB of tensor data")


def _shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(s) is int and 0 <= s < (1 << 40) for s in shape):
        raise WireError("bad tensor shape")
    return tuple(shape)


def _b64(data, expected: int, budget: _Budget) -> bytes:
    if not isinstance(data, str) or len(data) > 4 * (expected // 3 + 2):
        raise WireError("bad tensor data")
    budget.bytes(expected)
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise WireError("bad tensor data") from None
    if len(raw) != expected:
        raise WireError("tensor data does not match its shape")
    return raw


def decode_tensor(spec, budget: _Budget):
    import torch

    if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
        raise WireError("bad tensor")
    shape = _shape(spec.get("shape"))
    dtype = getattr(torch, spec["dtype"])
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = _b64(spec.get("data"), numel * itemsize, budget)
    storage_dtype = torch.int16 if dtype == torch.bfloat16 else dtype
    flat = torch.frombuffer(bytearray(raw), dtype=storage_dtype) if raw else torch.empty(0, dtype=storage_dtype)
    if dtype == torch.bfloat16:
        flat = flat.view(torch.bfloat16)
    return flat.reshape(shape).clone()


_OPAQUE_TYPES: dict[str, type] = {}


def opaque(type_name) -> object:
    """An instance of an empty class named like the sandbox's object: every check on it fails, its name reads right."""
    name = type_name if isinstance(type_name, str) and type_name.isidentifier() else "object"
    cls = _OPAQUE_TYPES.setdefault(name, type(name, (), {"__repr__": lambda self: f"<{name} from the sandbox>"}))
    return cls()


def decode(obj, extra=None, budget: _Budget | None = None, _depth: int = 0):
    """Python values from plain data; `extra(tag, body, decode_child)` handles tags this module does not."""
    budget = budget or _Budget()
    if _depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    budget.count()
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, str):
        if len(obj) > MAX_STRING:
            raise WireError("string too long")
        return obj
    child = lambda v: decode(v, extra, budget, _depth + 1)  # noqa: E731
    if isinstance(obj, list):
        budget.count(len(obj))
        return [child(v) for v in obj]
    if not isinstance(obj, dict):
        raise WireError("unknown value")
    if len(obj) == 1:
        (tag, body), = obj.items()
        if tag.startswith("$"):
            return _decode_tag(tag, body, child, extra, budget)
    budget.count(len(obj))
    return {str(k): child(v) for k, v in obj.items()}


def _decode_tag(tag, body, child, extra, budget):
    import torch

    if tag == "$tensor":
        return decode_tensor(body, budget)
    if tag in ("$tuple", "$set", "$frozenset", "$size"):
        if not isinstance(body, list):
            raise WireError(f"bad {tag}")
        budget.count(len(body))
        items = [child(v) for v in body]
        if tag == "$size":
            if not all(type(s) is int for s in items):
                raise WireError("bad torch.Size")
            return torch.Size(items)
        try:
            return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
        except TypeError:
            raise WireError(f"unhashable element in {tag}") from None
    if tag == "$dict":
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise WireError("bad $dict")
        budget.count(len(body))
        try:
            return {child(k): child(v) for k, v in body}
        except TypeError:
            raise WireError("unhashable dict key") from None
    if tag == "$float":
        if body not in ("nan", "inf", "-inf"):
            raise WireError("bad $float")
        return float(body)
    if tag == "$int":
        if not isinstance(body, str) or len(body) > 400:
            raise WireError("bad $int")
        try:
            return int(body)
        except ValueError:
            raise WireError("bad $int") from None
    if tag == "$numpy":
        return _decode_numpy(body, budget)
    if tag == "$opaque":
        return opaque(body)
    if extra is not None:
        return extra(tag, body, child)
    raise WireError(f"unknown tag {tag[:40]!r}")


def _decode_numpy(body, budget):
    import numpy as np

    if not isinstance(body, dict) or body.get("dtype") not in NUMPY_DTYPES:
        raise WireError("bad numpy value")
    shape = _shape(body.get("shape"))
    dtype = np.dtype(body["dtype"])
    raw = _b64(body.get("data"), math.prod(shape) * dtype.itemsize, budget)
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return arr[()] if body.get("scalar") is True and arr.ndim == 0 else arr
