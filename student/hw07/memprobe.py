"""Measure the memory your tensors occupy, on a CUDA GPU or on the CPU.

    with MemoryProbe(track=(model, optimizer)) as probe:
        loss = loss_fn(model(x), y)
        print(probe.live_bytes())   # tensors alive now
        loss.backward()
    print(probe.peak_bytes())       # the most that was alive at once

Both devices report the same quantity: bytes of tensor storage created inside
the ``with`` block that are still alive, plus the tensors you registered with
``track`` (parameters, gradients, optimizer state that existed before).
Each storage counts once, however many views share it.

- On CUDA the figures come from the allocator (``torch.cuda.memory_allocated``
  and ``max_memory_allocated``), which rounds each block up to 512 bytes and
  also counts library workspaces; expect slightly larger numbers than on CPU.
- On the CPU a tracker watches every PyTorch operator: it adds each new output
  storage and subtracts it when the storage is freed. Its figures are exact
  and the same on every run of the same program. It does not see memory that
  a kernel uses internally, or tensors made outside PyTorch operators
  (``torch.from_numpy``, ``torch.load``) unless you ``track`` them.

Compare figures measured by the same probe on the same machine.
"""
import gc
import threading
import weakref
from collections.abc import Iterable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["MemoryProbe"]
_LIFT_FRESH = torch.ops.aten.lift_fresh.default


def _tensors(objs):
    """Yield the tensors held by tensors, modules, optimizers and collections."""
    for obj in objs:
        if isinstance(obj, torch.Tensor):
            yield obj
            if obj.is_leaf and obj.grad is not None:
                yield obj.grad
        elif isinstance(obj, torch.nn.Module):
            yield from _tensors(obj.parameters())
            yield from obj.buffers()
        elif isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                yield from _tensors(state.values())
        elif isinstance(obj, Mapping):
            yield from _tensors(obj.values())
        elif isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
            yield from _tensors(obj)
        elif obj is not None:
            raise TypeError(f"MemoryProbe cannot track {type(obj).__name__}")


def _storage(t):
    """The tensor's storage, or None for tensors without one (sparse, meta)."""
    if t.device.type == "meta" or t.layout != torch.strided:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def _flat(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple, dict)):
        for y in x.values() if isinstance(x, dict) else x:
            _flat(y, out)
    return out


class _Tracker(TorchDispatchMode):
    """Counts the storages created by PyTorch operators on one device type."""

    def __init__(self, probe):
        super().__init__()
        self.probe = probe

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {s._cdata for t in _flat((args, kwargs), [])
                  if (s := _storage(t)) is not None}
        probe = self.probe
        for t in _flat(out, []):
            s = _storage(t)
            if s is None:
                continue
            # An output sharing an input's storage is a view, an in-place
            # result or an out= argument: new only if it grew. lift_fresh is
            # how torch.tensor(...) hands over storage made outside the mode.
            if (s._cdata in inputs and s._cdata not in probe._sizes
                    and func is not _LIFT_FRESH):
                continue
            probe._add(t)
        return out


class MemoryProbe:
    """Live and peak bytes of tensor storage inside a ``with`` block.

    ``device``: None picks ``'cuda'`` when available, else ``'cpu'``.
    ``track``: tensors, modules (parameters, buffers, gradients), optimizers
    (their state) or collections of these that exist before the block;
    ``probe.track(...)`` adds more later. Gradients and optimizer state
    created inside the block are counted without tracking.
    ``backend`` is ``'cuda-allocator'`` or ``'cpu-tracker'``.
    """

    _cpu_active = threading.local()

    def __init__(self, device=None, track=()):
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(
                    f"MemoryProbe(device={str(device)!r}): CUDA is not available "
                    "on this machine; use device='cpu' (or device=None).")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self.backend = "cuda-allocator"
        elif self.device.type == "cpu":
            self.backend = "cpu-tracker"
        else:
            raise ValueError(f"MemoryProbe supports 'cpu' and 'cuda', not {device!r}")
        self._pending = list(track) if isinstance(track, (list, tuple)) else [track]
        self._lock = threading.RLock()
        self._inside = False
        self._final = None

    def _add(self, t):
        """Count t's storage if it is new on this device (or grew in place)."""
        s = _storage(t) if t.device == self.device else None
        if s is None:
            return
        key, n = s._cdata, s.nbytes()
        with self._lock:
            old = self._sizes.get(key)
            self._sizes[key] = n
            if old is None:
                weakref.finalize(s, self._free, key).atexit = False
            grow = n - (old or 0)
            if self.backend == "cuda-allocator":
                self._tracked += grow  # only tracked tensors get here on CUDA
            else:
                self._live += grow
                self._peak = max(self._peak, self._live)

    def _free(self, key):
        with self._lock:
            n = self._sizes.pop(key, 0)
            if self.backend == "cpu-tracker":
                self._live -= n  # on CUDA the allocator sees the free

    def track(self, *objs):
        """Count these tensors, made before the block (see the class docstring).

        On CUDA a tensor made inside the block is counted already: tracking it
        would count it twice.
        """
        if not self._inside:
            self._pending.extend(objs)
            return
        for t in _tensors(objs):
            self._add(t)

    def __enter__(self):
        if self._final is not None or self._inside:
            raise RuntimeError("a MemoryProbe serves one `with` block; make a new one")
        if self.backend == "cpu-tracker" and getattr(self._cpu_active, "on", False):
            raise RuntimeError("MemoryProbe on the CPU cannot be nested in another one")
        pending, self._pending = list(_tensors(self._pending)), []  # TypeError now
        gc.collect()
        self._sizes, self._live, self._peak, self._tracked = {}, 0, 0, 0
        if self.backend == "cuda-allocator":
            torch.cuda.synchronize(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self._inside = True
        self.track(*pending)
        del pending
        if self.backend == "cpu-tracker":
            self._cpu_active.on = True
            self._mode = _Tracker(self)
            self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self._final = (self.live_bytes(), self.peak_bytes())
        finally:
            if self.backend == "cpu-tracker":
                self._mode.__exit__(*exc)
                self._cpu_active.on = False
            self._inside = False
        return False

    def live_bytes(self) -> int:
        """Bytes alive now (after a garbage collection). After the block: at its end."""
        if self._final is not None:
            return self._final[0]
        self._check()
        gc.collect()
        if self.backend == "cpu-tracker":
            return self._live
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory_allocated(self.device) - self._base + self._tracked

    def peak_bytes(self) -> int:
        """Most bytes alive at once since entry or the last ``reset_peak()``."""
        if self._final is not None:
            return self._final[1]
        self._check()
        if self.backend == "cpu-tracker":
            return self._peak
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device) - self._base + self._tracked

    def reset_peak(self) -> None:
        """Start a new peak from the bytes alive now."""
        self._check()
        live = self.live_bytes()
        if self.backend == "cpu-tracker":
            self._peak = live
        else:
            torch.cuda.reset_peak_memory_stats(self.device)

    def _check(self):
        if not self._inside:
            raise RuntimeError("use the probe inside its `with MemoryProbe(...)` block")
