"""TRUSTED SIDE: stand-ins for the student's names, as the examiner's checks see them.

A `RemoteFunction` is what a hidden check receives in place of a student's
function. Calling it encodes the arguments as recipes (plain data: module
structure and state, optimizer state, tensors), has the sandbox rebuild them
and call the real function, then mirrors the arguments' state after the call
back into the check's own objects and decodes the return value
(docs/CHECKS_CONTRACT.md). A returned tensor with a graph is attached to the
check's leaves through `_RemoteGraph`, whose backward asks the sandbox.
"""
from __future__ import annotations

import builtins
import os
import select
import time

import torch

from . import figure_data, wire
from .sandbox import Sandbox

CALL_TIMEOUT_S = 90.0


class SandboxLost(BaseException):
    """The sandbox died, broke the protocol or ran out of time: no check may swallow this."""


class GraderSetupError(BaseException):
    """The sandbox could not rebuild a check's inputs: the grader's fault, never the student's."""


class Session:
    """The examiner's end of one sandbox's channel; every reply is validated, every wait has a deadline."""

    def __init__(self, sandbox: Sandbox, sandbox_modules: tuple[str, ...]):
        self.sandbox = sandbox
        self.sandbox_modules = sandbox_modules
        self.lost: str | None = None
        os.set_blocking(sandbox.requests, False)

    def _deadline(self, timeout: float) -> float:
        return min(time.monotonic() + timeout, self.sandbox.deadline)

    def lose(self, reason: str) -> SandboxLost:
        if self.lost is None:
            self.lost = reason
            self.sandbox.kill()
        return SandboxLost(self.lost)

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.lose("the submission stopped reading (time limit)")
            _, ready, _ = select.select([], [self.sandbox.requests], [], left)
            if ready:
                try:
                    view = view[os.write(self.sandbox.requests, view):]
                except BlockingIOError:
                    continue
                except OSError:
                    raise self.lose("the submission's process ended") from None

    def _read(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.lose("time limit: the submission did not answer")
            ready, _, _ = select.select([self.sandbox.replies], [], [], left)
            if ready:
                chunk = os.read(self.sandbox.replies, min(n - got, 1 << 20))
                if not chunk:
                    code = self.sandbox.process.poll()
                    raise self.lose("the submission's process ended" + (f" (exit status {code})" if code else ""))
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def receive(self, timeout: float) -> dict:
        import json

        if self.lost:
            raise SandboxLost(self.lost)
        deadline = self._deadline(timeout)
        (size,) = wire.HEADER.unpack(self._read(wire.HEADER.size, deadline))
        if size > wire.MAX_MESSAGE_BYTES:
            raise self.lose(f"the submission sent {size:,} bytes at once (limit {wire.MAX_MESSAGE_BYTES:,})")
        try:
            message = json.loads(self._read(size, deadline).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise self.lose("the submission sent unreadable data") from None
        if not isinstance(message, dict):
            raise self.lose("the submission sent unreadable data")
        return message

    def request(self, message: dict, timeout: float = CALL_TIMEOUT_S) -> dict:
        import json

        if self.lost:
            raise SandboxLost(self.lost)
        body = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
        self._write(wire.HEADER.pack(len(body)) + body, self._deadline(timeout))
        return self.receive(timeout)

    def close(self) -> None:
        if not self.lost:
            try:
                self.request({"op": "bye"}, timeout=0.001)
            except SandboxLost:
                pass
        self.sandbox.kill()


def _raise_student_exception(raised) -> None:
    if not isinstance(raised, dict):
        raise RuntimeError("the submission raised an exception")
    names = raised.get("types") if isinstance(raised.get("types"), list) else []
    message = str(raised.get("message", ""))[:1000]
    if names == ["GraderSetupError"]:
        raise GraderSetupError(message)
    for name in names[:20]:
        cls = getattr(builtins, str(name), None) if isinstance(name, str) else None
        if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, Warning):
            raise cls(message)
    first = str(names[0])[:60] if names else "Exception"
    raise RuntimeError(f"{first}: {message}")


class _Encoder:
    """The call's arguments as recipes; remembers the objects so their state can be mirrored back."""

    def __init__(self, allowed_modules: tuple[str, ...]):
        self.allowed = ("torch", "torch.nn.functional") + allowed_modules
        self.modules: dict[int, torch.nn.Module] = {}
        self.params: dict[int, torch.nn.Parameter] = {}
        self.optimizers: dict[int, torch.optim.Optimizer] = {}
        self.tensors: dict[int, torch.Tensor] = {}
        self._refs: dict[int, int] = {}

    def _ref(self, obj) -> tuple[int, bool]:
        known = id(obj) in self._refs
        if not known:
            self._refs[id(obj)] = len(self._refs) + 1
        return self._refs[id(obj)], known

    def encode(self, value):
        return wire.encode(value, self._extra)

    def _extra(self, v):
        if isinstance(v, torch.nn.Module):
            return self._module(v)
        if isinstance(v, torch.optim.Optimizer):
            return self._optimizer(v)
        if isinstance(v, torch.Tensor):
            ref, known = self._ref(v)
            if known:
                return {"$ref": ref}
            self.tensors[ref] = v
            return {"$arg": {"ref": ref, "value": wire.encode_tensor(v), "requires_grad": v.requires_grad,
                             "grad": None if v.grad is None else wire.encode_tensor(v.grad)}}
        if type(v).__name__ in ("list_iterator", "tuple_iterator", "generator"):
            return {"$iter": [self.encode(item) for item in v]}
        if callable(v) and getattr(v, "__module__", None) in self.allowed and hasattr(v, "__qualname__"):
            return {"$fn": f"{v.__module__}:{v.__qualname__}"}
        if callable(v):
            raise TypeError(f"cannot send {v!r} to the sandbox: pass a function of torch, torch.nn.functional or "
                            "the fixtures module (docs/CHECKS_CONTRACT.md)")
        return None

    def _module(self, m: torch.nn.Module):
        ref, known = self._ref(m)
        if known:
            return {"$ref": ref}
        self.modules[ref] = m
        params = {}
        for name, p in m._parameters.items():
            if p is None:
                params[name] = None
                continue
            pid, known = self._ref(p)
            if known:  # tied: the same Parameter in two places stays one Parameter in the sandbox
                params[name] = {"shared": pid}
                continue
            self.params[pid] = p
            params[name] = {"id": pid, "value": wire.encode_tensor(p), "requires_grad": p.requires_grad,
                            "grad": None if p.grad is None else wire.encode_tensor(p.grad)}
        cls = type(m)
        return {"$module": {"ref": ref, "class": f"{cls.__module__}:{cls.__qualname__}", "training": m.training,
                            "attrs": wire.encode(_plain_attrs(m)), "params": params,
                            "buffers": {k: None if b is None else wire.encode_tensor(b) for k, b in m._buffers.items()},
                            "children": {k: self._module(c) for k, c in m._modules.items() if c is not None}}}

    def _optimizer(self, opt: torch.optim.Optimizer):
        ref, known = self._ref(opt)
        if known:
            return {"$ref": ref}
        self.optimizers[ref] = opt
        ids = {id(p): pid for pid, p in self.params.items()}
        groups = []
        for g in opt.param_groups:
            missing = [p for p in g["params"] if id(p) not in ids]
            if missing:
                raise TypeError("pass the optimizer after the module whose parameters it updates")
            groups.append({"params": [ids[id(p)] for p in g["params"]],
                           "hyper": wire.encode({k: v for k, v in g.items() if k != "params"})})
        state = [[ids[id(p)], wire.encode(s)] for p, s in opt.state.items() if id(p) in ids]
        return {"$optim": {"ref": ref, "class": type(opt).__name__, "groups": groups, "state": state}}

    # ------------------------------------------------------------------------- mirroring back

    def leaves(self) -> list[tuple[str, torch.Tensor]]:
        found = [(f"p{pid}", p) for pid, p in sorted(self.params.items()) if p.requires_grad]
        return found + [(f"t{ref}", t) for ref, t in sorted(self.tensors.items()) if t.requires_grad]

    def apply(self, state) -> None:
        if not isinstance(state, dict):
            raise wire.WireError("bad state")
        with torch.no_grad():
            for ref, spec in _items(state.get("modules")):
                module = self.modules.get(_int(ref))
                if module is not None and isinstance(spec, dict):
                    self._apply_module(module, spec)
            for ref, spec in _items(state.get("optims")):
                opt = self.optimizers.get(_int(ref))
                if opt is not None and isinstance(spec, dict):
                    self._apply_optimizer(opt, spec)
            for ref, spec in _items(state.get("tensors")):
                t = self.tensors.get(_int(ref))
                if t is not None and isinstance(spec, dict):
                    _copy_into(t, spec.get("value"))
                    if t.is_leaf:
                        t.grad = _same_kind(spec.get("grad"), t)
        if isinstance(state.get("grad_enabled"), bool):
            torch.set_grad_enabled(state["grad_enabled"])

    def _apply_module(self, module, spec) -> None:
        if isinstance(spec.get("training"), bool):
            module.training = spec["training"]
        for name, p_spec in _items(spec.get("params")):
            p = module._parameters.get(name)
            if p is None or not isinstance(p_spec, dict):
                continue
            _copy_into(p, p_spec.get("value"))
            grad = _same_kind(p_spec.get("grad"), p)
            if grad is None:
                p.grad = None
            elif p_spec.get("grad_same") is True and p.grad is not None and p.grad.shape == grad.shape:
                p.grad.copy_(grad)
            else:
                p.grad = grad
        for name, value in _items(spec.get("buffers")):
            if name in module._buffers and isinstance(value, torch.Tensor):
                module._buffers[name] = value
        before = _plain_attrs(module)
        for name, value in _items(spec.get("attrs")):
            if name in before:
                setattr(module, name, value)

    def _apply_optimizer(self, opt, spec) -> None:
        for pair in spec.get("state") if isinstance(spec.get("state"), list) else []:
            if isinstance(pair, list) and len(pair) == 2 and _int(pair[0]) in self.params and isinstance(pair[1], dict):
                opt.state[self.params[_int(pair[0])]] = pair[1]
        groups = spec.get("groups") if isinstance(spec.get("groups"), list) else []
        for mine, theirs in zip(opt.param_groups, groups):
            if isinstance(theirs, dict):
                for k, v in theirs.items():
                    if k in mine and k != "params" and isinstance(v, (int, float, bool, tuple, type(None))):
                        mine[k] = v
        steps = spec.get("steps")
        for _ in range(min(steps, 1000) if isinstance(steps, int) and steps > 0 else 0):
            for hook in list(opt._optimizer_step_post_hooks.values()):
                hook(opt, (), {})


def _plain_attrs(m: torch.nn.Module) -> dict:
    return {k: v for k, v in m.__dict__.items() if not k.startswith("_") and k != "training"}


def _items(d):
    return d.items() if isinstance(d, dict) else ()


def _int(x) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _same_kind(value, like: torch.Tensor):
    """A decoded tensor usable as like's gradient or value (same shape), else None."""
    if isinstance(value, torch.Tensor) and value.shape == like.shape:
        return value.to(like.dtype)
    return None


def _copy_into(target: torch.Tensor, value) -> None:
    value = _same_kind(value, target)
    if value is not None:
        target.copy_(value)


class _RemoteGraph(torch.autograd.Function):
    """Ties a returned tensor to the check's leaves; backward runs in the sandbox."""

    @staticmethod
    def forward(ctx, link, value, *leaves):
        ctx.link = link
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        session, graph, encoder, keys = ctx.link
        reply = session.request({"op": "backward", "graph": graph, "grad": wire.encode_tensor(grad)})
        _decode_state(reply, encoder)
        if "raised" in reply:
            _raise_student_exception(reply["raised"])
        grads = wire.decode(reply.get("ok"), _result_tags(session, encoder))
        grads = grads if isinstance(grads, dict) else {}
        leaves = dict(encoder.leaves())
        return (None, None) + tuple(_same_kind(grads.get(k), leaves[k]) for k in keys)


def _decode_state(reply, encoder) -> None:
    if "state" in reply:
        try:
            encoder.apply(wire.decode(reply["state"], _result_tags(None, encoder)))
        except (wire.WireError, figure_data.FigureDataError, RuntimeError, TypeError, ValueError):
            pass  # a state the sandbox garbled mirrors nothing; the checks see unchanged objects


def _result_tags(session, encoder):
    def tag(name, body, child):
        if name == "$gtensor" and isinstance(body, dict):
            value = wire.decode_tensor(body.get("tensor", {}).get("$tensor") if isinstance(body.get("tensor"), dict)
                                       else None, wire._Budget())
            if body.get("requires_grad") is not True or not value.is_floating_point():
                return value
            leaves = encoder.leaves() if session is not None else []
            if isinstance(body.get("graph"), int) and leaves:
                keys = [k for k, _ in leaves]
                with torch.enable_grad():
                    return _RemoteGraph.apply((session, body["graph"], encoder, keys), value, *[t for _, t in leaves])
            return value.requires_grad_(True)
        if name == "$figure":
            return figure_data.rebuild(body)
        raise wire.WireError(f"unknown tag {str(name)[:40]!r}")
    return tag


class RemoteFunction:
    """The check's view of a student function that lives in the sandbox."""

    def __init__(self, session: Session, name: str):
        self._session = session
        self.__name__ = self.__qualname__ = name

    def __repr__(self) -> str:
        return f"<student function {self.__name__}>"

    def __call__(self, *args, **kwargs):
        encoder = _Encoder(self._session.sandbox_modules)
        reply = self._session.request({"op": "call", "name": self.__name__, "args": encoder.encode(list(args)),
                                       "kwargs": encoder.encode(kwargs)})
        return self._finish(reply, encoder)

    def __remote_measure__(self, procedure, args, kwargs):
        encoder = _Encoder(self._session.sandbox_modules)
        reply = self._session.request({"op": "measure", "name": self.__name__,
                                       "procedure": f"{procedure.__module__}:{procedure.__qualname__}",
                                       "args": encoder.encode(list(args)), "kwargs": encoder.encode(dict(kwargs))})
        return self._finish(reply, encoder)

    def _finish(self, reply, encoder):
        try:
            _decode_state(reply, encoder)
            if "raised" in reply:
                _raise_student_exception(reply["raised"])
            return wire.decode(reply.get("ok"), _result_tags(self._session, encoder))
        except (wire.WireError, figure_data.FigureDataError) as exc:
            raise ValueError(f"{self.__name__} returned a value the grader cannot read ({exc})") from None


def stand_ins(session: Session, names: list[str]) -> dict[str, object]:
    """The value the checks get for each name: a RemoteFunction, decoded plain data, or None (missing)."""
    reply = session.request({"op": "describe", "names": names})
    described = reply.get("ok") if isinstance(reply.get("ok"), dict) else {}
    out = {}
    for name in names:
        spec = described.get(name)
        kind = spec.get("kind") if isinstance(spec, dict) else None
        if kind == "callable":
            out[name] = RemoteFunction(session, name)
        elif kind == "value":
            try:
                out[name] = wire.decode(spec.get("value"), _result_tags(None, _Encoder(())))
            except (wire.WireError, figure_data.FigureDataError):
                out[name] = wire.opaque("unreadable")
        else:
            out[name] = None
    return out
