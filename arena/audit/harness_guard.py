"""The worker's tripwire (docs/integrity.md), used by arena/worker/server.py (the untrusted side) before it imports
the submission: a `HarnessGuard` that notices monkey-patched timers and harness functions (identities, code
objects, defaults, module globals, and dispatch modes left active), and the wall-clock calls that also measure
the drain of work left on other streams. Module level imports only the standard library.
"""
from __future__ import annotations

import sys
import time


class IntegrityViolation(RuntimeError):
    """The submission tampered with the harness; `str()` is one clear line."""


# ---- the worker's tripwire against monkey-patching -------------------------------------------------------

GUARDED = (
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic", "time.sleep",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda._sleep", "torch.cuda.current_stream", "torch.cuda.Stream",
    "torch.Tensor", "torch.Tensor.zero_", "torch.Tensor.clone", "torch.Tensor.untyped_storage",
    "torch.Tensor.__torch_function__", "torch.Tensor.__torch_dispatch__", "torch.empty", "torch.frombuffer",
    "torch.as_tensor",
    "arena.clock.timing.time_calls_gpu", "arena.clock.timing.time_calls_wall", "arena.clock.timing.time_together_gpu",
    "arena.clock.timing.time_together_wall", "arena.clock.timing.busy_spin",
    "arena.clock.timing.l2_flush_buffer", "arena.clock.timing.clear_l2_cache",
    "arena.worker.session.Session", "arena.worker.session.Session.run", "arena.worker.session.Session.time",
    "arena.worker.session.Session.wall", "arena.worker.session.Session.profile", "arena.worker.session.Session._sync",
    "arena.worker.session.Session._synced_call", "arena.worker.session.require_plain",
    "arena.worker.session.foreign_threads", "arena.worker.server.Session", "arena.worker.server._first_line",
    "arena.worker.server.foreign_threads", "arena.worker.server.serve",
    "arena.audit.harness_guard.time_calls_drain", "arena.audit.harness_guard.sync_latency_ns", "arena.audit.harness_guard.find_violations",
    "arena.worker.channel.send", "arena.worker.channel.receive", "arena.worker.channel._read_exactly", "arena.worker.channel.json",
    "arena.worker.tensorwire.Encoder", "arena.worker.tensorwire.Decoder", "arena.worker.tensorwire.encode",
    "arena.worker.tensorwire._write_memfd",
    "json.dumps", "json.loads", "socket.socket", "socket.socket.sendmsg", "socket.socket.recvmsg",
)

# Modules whose every global, function code object and defaults are compared after every request.
DEEP_MODULES = ("arena.clock.timing", "arena.worker.server", "arena.worker.session", "arena.audit.harness_guard",
                "arena.worker.channel", "arena.worker.tensorwire", "arena.worker.messages", "arena.clock.masking", "json", "json.encoder", "json.decoder", "time")


def _resolve(path: str):
    """(found, object) for a dotted path: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        try:
            for name in parts[cut:]:
                obj = _raw_attr(obj, name)
        except AttributeError:
            return False, None
        return True, obj
    return False, None


def _raw_attr(obj, name):
    """A class attribute as stored (no descriptor binding), else a plain getattr."""
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
    return getattr(obj, name)


class HarnessGuard:
    """Remembers the timer and harness functions before the submission is imported, and names any that
    were replaced since. The harness checks after import, after every call and after every request."""

    def __init__(self, paths=GUARDED):
        self.modules = {name: sys.modules.get(name) for name in
                        ("time", "torch", "torch.cuda", "arena.clock.timing", "arena.worker.server",
                         "arena.worker.session", "arena.audit.harness_guard", "multiprocessing.connection")}
        self.saved = {}
        self.links = []         # (dotted path, container, attribute name, object): every step of every path
        for path in paths:
            found, obj = _resolve(path)
            if found:
                self.saved[path] = obj
                self.links += _links(path)

        self._find = find_violations        # captured now: patching the module later changes nothing here
        self._deep = deep_state
        self.deep = self._deep()

    def violations(self, deep: bool = False) -> list[str]:
        changed = self._find(self)
        if deep:
            changed += [name for name in _differences(self.deep, self._deep()) if name not in changed]
        return changed

    def check(self, when: str, deep: bool = False):
        changed = self.violations(deep)
        if changed:
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            raise IntegrityViolation(f"the submission replaced harness functions {when}: {shown} "
                                     f"(monkey-patching timers or the harness is not allowed)")


def _links(path: str) -> list:
    """The chain from the module to the object, one (path, container, name, object) per attribute step."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        links, container = [], module
        for i, name in enumerate(parts[cut:], cut + 1):
            obj = _raw_attr(container, name)
            links.append((".".join(parts[:i]), container, name, obj))
            container = obj
        return links
    return []


_MISSING = object()


def _function_state(fn) -> tuple:
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__,
            tuple(id(c.cell_contents) if _cell_full(c) else None for c in (fn.__closure__ or ())))


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def deep_state() -> dict:
    """name -> identity/code state of every global of the DEEP_MODULES, every function there and every
    method of the classes defined there; plus how many torch function/dispatch modes are active."""
    import types
    state = {}
    for module_name in DEEP_MODULES:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            key = f"{module_name}.{name}"
            state[key] = id(value)
            if isinstance(value, types.FunctionType):
                state[key + ".__code__"] = _function_state(value)
            elif isinstance(value, type) and value.__module__ == module_name:
                for attr, member in list(vars(value).items()):
                    state[f"{key}.{attr}"] = id(member)
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if isinstance(member, types.FunctionType):
                        state[f"{key}.{attr}.__code__"] = _function_state(member)
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    if torch_c is not None:
        for counter in ("_len_torch_function_stack", "_len_torch_dispatch_stack"):
            if hasattr(torch_c, counter):
                state[f"active torch mode ({counter})"] = getattr(torch_c, counter)()
    return state


def _differences(before: dict, now: dict) -> list[str]:
    return [key for key in set(before) | set(now) if before.get(key, _MISSING) != now.get(key, _MISSING)]


def find_violations(guard: HarnessGuard) -> list[str]:
    """Dotted names of guarded modules and functions that are no longer the objects first seen
    (about 5 us: one dictionary look-up per step, so it can run after every call)."""
    changed = [name for name, module in guard.modules.items()
               if module is not None and sys.modules.get(name) is not module]
    for path, container, name, obj in guard.links:
        if isinstance(container, type):
            try:
                now = _raw_attr(container, name)
            except AttributeError:
                now = _MISSING
        else:
            now = getattr(container, "__dict__", {}).get(name, _MISSING)
        if now is not obj and path not in changed:
            changed.append(path)
    return changed


def time_calls_drain(fn, inputs: list, sync, clock=time.perf_counter_ns) -> tuple[list, list[float], list[float]]:
    """Sync-to-sync wall-clock calls that also measure the drain: how long the GPU kept working after
    `fn` returned. Honest work on the timed stream drains in about its event time; work hidden on another
    stream or thread makes the drain far longer than the event time. Returns outputs, wall ns, drain ns."""
    outputs, wall, drain = [], [], []
    for x in inputs:
        sync()
        t0 = clock()
        outputs.append(fn(x))
        t1 = clock()
        sync()
        t2 = clock()
        wall.append(float(t2 - t0))
        drain.append(float(t2 - t1))
    return outputs, wall, drain


def sync_latency_ns(sync, repeats: int = 5, clock=time.perf_counter_ns) -> float:
    """Median cost of a synchronize on an idle device: the drain of a call that leaves no work behind."""
    samples = []
    for _ in range(repeats):
        sync()
        t0 = clock()
        sync()
        samples.append(float(clock() - t0))
    samples.sort()
    return samples[len(samples) // 2]
