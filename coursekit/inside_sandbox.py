"""UNTRUSTED SIDE: runs inside a submission's sandbox, next to the student's code.

Started by `coursekit.sandbox` as `python -I inside_sandbox.py CELLS.json`
with the channel on file descriptors 3 (requests in) and 4 (replies out). It
runs every code cell of the notebook top to bottom in one IPython shell, as
Jupyter would, then answers the examiner's requests:

* `describe`: what each asked-for name is (missing, callable, or its value);
* `call`: rebuild the arguments from their recipes, call the student's
  function, and report the return value and the arguments' state after it;
* `measure`: run a sandbox-visible procedure of the checks with the student's
  function (memory and op counts are measured here, where the allocations are);
* `backward`: gradients of a returned tensor's graph with respect to the
  arguments' leaves.

Nothing here is trusted: the student's code shares this process and can
change any of it. The examiner validates every reply (`coursekit.wire`).
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_data  # noqa: E402  (copied next to this file)
import wire  # noqa: E402

REQUESTS, REPLIES = os.dup(3), os.dup(4)
os.close(3)
os.close(4)

_FUNCTION_MODULES = ("torch", "torch.nn.functional")
_MAX_REPLY = wire.MAX_MESSAGE_BYTES - (1 << 20)


def _install_otter_stand_in() -> None:
    """`otter.Notebook` without otter: the notebook's grader cells run, check nothing and write nothing."""

    class Notebook:
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    otter = types.ModuleType("otter")
    otter.Notebook = Notebook
    sys.modules["otter"] = otter


def run_notebook(cells: list[str]) -> dict:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    failed = 0
    for source in cells:
        result = shell.run_cell(source, store_history=False)
        failed += not result.success
    return shell.user_ns, failed


# ----------------------------------------------------------------------------- rebuilding arguments


class Rebuilder:
    """Arguments from the examiner's recipes; remembers what it built so the state after a call can be reported."""

    def __init__(self, sandbox_modules: tuple[str, ...]):
        self.allowed = sandbox_modules
        self.modules: dict[int, object] = {}
        self.params: dict[int, object] = {}
        self.optimizers: dict[int, object] = {}
        self.tensors: dict[int, object] = {}
        self.grads_before: dict[int, object] = {}
        self.steps: dict[int, int] = {}

    def _import(self, path: str, *, modules_ok: bool):
        module_name, _, qualname = str(path).partition(":")
        ok = module_name in self.allowed or module_name in _FUNCTION_MODULES or (
            modules_ok and module_name.startswith("torch.nn."))
        if not ok:
            raise ValueError(f"not an allowed origin: {module_name}")
        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def tag(self, tag, body, child):
        import torch

        if tag == "$ref":
            return self.modules.get(body) or self.optimizers.get(body) or self.tensors[body]
        if tag == "$fn":
            return self._import(body, modules_ok=False)
        if tag == "$iter":
            return iter([child(v) for v in body])
        if tag == "$arg":  # a tensor argument whose in-place changes and .grad are reported back
            t = child(body["value"]).requires_grad_(bool(body["requires_grad"]))
            if body.get("grad") is not None:
                t.grad = child(body["grad"])
            self.tensors[body["ref"]] = t
            return t
        if tag == "$module":
            return self._module(body, child)
        if tag == "$optim":
            cls = getattr(torch.optim, body["class"])
            groups = [dict(child(g["hyper"]), params=[self.params[i] for i in g["params"]]) for g in body["groups"]]
            opt = cls(groups)
            for pid, state in body["state"]:
                opt.state[self.params[pid]] = child(state)
            ref = body["ref"]
            self.steps[ref] = 0
            opt.register_step_post_hook(lambda *_, ref=ref: self.steps.__setitem__(ref, self.steps[ref] + 1))
            self.optimizers[ref] = opt
            return opt
        raise ValueError(f"unknown tag {tag}")

    def _module(self, body, child):
        import torch

        cls = self._import(body["class"], modules_ok=True)
        module = cls.__new__(cls)
        torch.nn.Module.__init__(module)
        module.__dict__.update(child(body["attrs"]))
        module.training = bool(body["training"])
        for name, spec in body["params"].items():
            if spec is None or "shared" in spec:  # a parameter tied to one rebuilt earlier
                module._parameters[name] = None if spec is None else self.params[spec["shared"]]
                continue
            p = torch.nn.Parameter(child(spec["value"]), requires_grad=bool(spec["requires_grad"]))
            if spec.get("grad") is not None:
                p.grad = child(spec["grad"])
                self.grads_before[spec["id"]] = p.grad  # the object, not its id: a freed id is reused
            module._parameters[name] = p
            self.params[spec["id"]] = p
        for name, value in body["buffers"].items():
            module._buffers[name] = None if value is None else child(value)
        for name, spec in body["children"].items():
            module._modules[name] = child(spec)
        self.modules[body["ref"]] = module
        return module

    # ------------------------------------------------------------------------- state after a call

    def state(self) -> dict:
        import torch

        def param_ids(module):
            return {id(p): pid for pid, p in self.params.items()}

        ids = param_ids(None)
        modules = {}
        for ref, module in self.modules.items():
            params = {}
            for name, p in module._parameters.items():
                pid = ids.get(id(p))
                if p is None or pid is None:
                    continue
                params[name] = {"value": p, "grad": p.grad,
                                "grad_same": p.grad is not None and p.grad is self.grads_before.get(pid)}
            modules[str(ref)] = {"training": module.training, "params": params,
                                 "buffers": {k: v for k, v in module._buffers.items()},
                                 "attrs": {k: v for k, v in module.__dict__.items() if not k.startswith("_")
                                           and k != "training"}}
        optims = {}
        for ref, opt in self.optimizers.items():
            state = [[ids[id(p)], s] for p, s in opt.state.items() if id(p) in ids]
            groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
            optims[str(ref)] = {"state": state, "groups": groups, "steps": self.steps[ref]}
        tensors = {str(ref): {"value": t, "grad": t.grad} for ref, t in self.tensors.items()}
        return {"modules": modules, "optims": optims, "tensors": tensors, "grad_enabled": torch.is_grad_enabled()}

    def leaves(self) -> list[tuple[str, object]]:
        found = [(f"p{pid}", p) for pid, p in sorted(self.params.items()) if p.requires_grad]
        return found + [(f"t{ref}", t) for ref, t in sorted(self.tensors.items()) if t.requires_grad]


# ----------------------------------------------------------------------------- serving requests


class Server:
    def __init__(self, namespace: dict, sandbox_modules: tuple[str, ...]):
        self.ns = namespace
        self.sandbox_modules = sandbox_modules
        self.graphs: dict[int, tuple[object, Rebuilder]] = {}

    def encode(self, value, rebuilder=None):
        import torch

        def extra(v):
            if isinstance(v, torch.Tensor):
                graph = None
                if v.requires_grad and v.grad_fn is not None and rebuilder is not None:
                    graph = len(self.graphs) + 1
                    self.graphs[graph] = (v, rebuilder)
                return {"$gtensor": {"tensor": wire.encode_tensor(v), "requires_grad": bool(v.requires_grad),
                                     "graph": graph}}
            if type(v).__name__ == "Figure" and type(v).__module__.startswith("matplotlib"):
                return {"$figure": figure_data.extract(v)}
            return None

        return wire.encode(value, extra)

    def describe(self, names) -> dict:
        out = {}
        for name in names:
            if name not in self.ns:
                out[name] = {"kind": "missing"}
            elif callable(self.ns[name]):
                out[name] = {"kind": "callable", "type": type(self.ns[name]).__name__}
            else:
                out[name] = {"kind": "value", "value": self.encode(self.ns[name])}
        return out

    def _args(self, request, rebuilder):
        decode = lambda v: wire.decode(v, rebuilder.tag)  # noqa: E731
        try:
            return decode(request.get("args", [])), decode(request.get("kwargs", {}))
        except Exception as exc:  # the grader's recipe did not rebuild: not the student's mistake
            raise _SetupError(f"{type(exc).__name__}: {exc}") from None

    def call(self, request) -> dict:
        rebuilder = Rebuilder(self.sandbox_modules)
        args, kwargs = self._args(request, rebuilder)  # a _SetupError goes to serve(), not to the student
        fn = self.ns.get(request["name"])
        try:
            result = fn(*args, **kwargs)
            reply = {"ok": self.encode(result, rebuilder)}
        except BaseException as exc:  # the student's exception is data for the check
            reply = {"raised": _exception(exc)}
        reply["state"] = self.encode(rebuilder.state())
        return reply

    def measure(self, request) -> dict:
        rebuilder = Rebuilder(self.sandbox_modules)
        args, kwargs = self._args(request, rebuilder)
        try:
            procedure = rebuilder._import(request["procedure"], modules_ok=False)
        except Exception as exc:
            raise _SetupError(f"{type(exc).__name__}: {exc}") from None
        try:
            reply = {"ok": self.encode(procedure(self.ns.get(request["name"]), *args, **kwargs))}
        except BaseException as exc:
            reply = {"raised": _exception(exc)}
        reply["state"] = self.encode(rebuilder.state())  # procedures run the student's code on the arguments too
        return reply

    def backward(self, request) -> dict:
        import torch

        output, rebuilder = self.graphs[request["graph"]]
        grad = wire.decode(request["grad"])
        names, leaves = zip(*rebuilder.leaves()) if rebuilder.leaves() else ((), ())
        try:
            grads = torch.autograd.grad(output, leaves, grad, allow_unused=True, retain_graph=True) if leaves else ()
            reply = {"ok": self.encode(dict(zip(names, grads)))}
        except BaseException as exc:
            reply = {"raised": _exception(exc)}
        reply["state"] = self.encode(rebuilder.state())
        return reply

    def serve(self) -> None:
        handlers = {"describe": lambda r: {"ok": self.describe(r["names"])}, "call": self.call,
                    "measure": self.measure, "backward": self.backward}
        while True:
            try:
                request = wire.receive(REQUESTS, limit=1 << 30)
            except EOFError:
                return
            if request.get("op") == "bye":
                return
            try:
                reply = handlers[request["op"]](request)
            except BaseException as exc:
                reply = {"raised": _exception(exc)}
            body = json.dumps(reply, allow_nan=False)
            if len(body) > _MAX_REPLY:
                reply = {"raised": {"types": ["ValueError"], "message":
                                    f"the value is too large to send to the grader ({len(body):,} bytes)"}}
            wire.send(REPLIES, reply)


class _SetupError(Exception):
    pass


def _exception(exc: BaseException) -> dict:
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable message>"
    types = [c.__name__ for c in type(exc).__mro__][:20]
    return {"types": ["GraderSetupError"] if isinstance(exc, _SetupError) else types, "message": message[:1000]}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    if job.get("copy_from"):  # the submission's files, read-only at /submission, into the writable workdir
        import shutil

        for entry in os.scandir(job["copy_from"]):
            copy = shutil.copytree if entry.is_dir() else shutil.copy
            copy(entry.path, os.path.join(os.getcwd(), entry.name))
    sys.path.insert(0, os.getcwd())
    sys.path.append(job["checks_path"])  # the checks' sandbox-visible modules (fixtures, probe)
    _install_otter_stand_in()
    namespace, failed = run_notebook(job["cells"])
    import gc

    gc.collect()
    gc.freeze()  # memory procedures collect garbage before each reading: keep those collections cheap
    wire.send(REPLIES, {"ready": True, "failed_cells": failed})
    Server(namespace, tuple(job["sandbox_modules"])).serve()
    os._exit(0)


if __name__ == "__main__":
    main()
