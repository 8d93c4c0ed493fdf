"""What the worker does with the submission, one request at a time (arena/worker/server.py runs the loop):
import it under the harness guard, call `custom_kernel` untimed or timed, stage and collect masked windows,
profile. Every result must be plain tensors (`require_plain`)."""
from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path


class NotPlain(TypeError):
    """custom_kernel returned something that is not plain data (a tensor subclass, a custom object)."""



def require_plain(value, torch_tensor_type, depth: int = 0):
    """Outputs must be exactly torch.Tensor, numbers, strings and plain containers: a subclass could run code
    (its own serialization, __torch_function__) after the timer stopped."""
    kind = type(value)
    if kind is torch_tensor_type or value is None or kind in (bool, int, float, str):
        return
    if kind in (list, tuple) and depth < 8:
        for item in value:
            require_plain(item, torch_tensor_type, depth + 1)
        return
    if kind is dict and depth < 8:
        for key, item in value.items():
            require_plain(key, torch_tensor_type, depth + 1)
            require_plain(item, torch_tensor_type, depth + 1)
        return
    raise NotPlain(f"custom_kernel returned a {kind.__module__}.{kind.__qualname__}, not a plain torch.Tensor "
                   f"(subclasses and custom objects are not accepted as results)")


class Session:
    def __init__(self, submission: str, task_folder: str, device: str, checked_call=None, work_counts=None):
        import torch
        from arena.taskdef.definition import add_task_paths
        self.torch = torch
        self.device = device
        # --emulate-blackwell: runs a call, then raises what the emulated kernels did wrong
        self.checked_call = checked_call or (lambda call: call())
        # --emulate-blackwell: what the emulated kernels issued in a call (arena/blackwell/runtime.take_counts)
        self.work_counts = work_counts
        # The task's own task.py/reference.py/utils.py win over any of the same name beside the submission.
        sys.path.insert(0, str(Path(submission).resolve().parent))
        add_task_paths(Path(task_folder))
        # The last outputs sent stay allocated: the parent maps their memory and watches it for late writes,
        # so reusing it for other work would look like one. It watches the newest 64.
        self.keep_alive = collections.deque(maxlen=64)
        self.decoded_storages: list = []        # the storages of the request being served (set by serve)
        self.staged = self.staged_storages = self.collected = self.keystream = None
        self.staged_pointers: dict = {}
        self.scratch: list = []
        import threading
        from arena.audit import harness_guard  # noqa: F401
        from arena.clock import masking, timing  # noqa: F401
        from arena.compile import build_folder
        # before the import builds anything: a build lock a killed evaluation left would stall it in silence
        self.stale_build_locks = build_folder.claim(os.environ.get("TORCH_EXTENSIONS_DIR"))
        self.guard = harness_guard.HarnessGuard()      # before the submission can touch anything
        self.threads_before = foreign_threads(threading)
        kernel = self._import(submission)
        self.guard.check("while being imported", deep=True)
        check, plain, tensor_type = self.guard.check, require_plain, torch.Tensor

        def settle():
            check("inside custom_kernel")

        def guarded(data):
            out = kernel(data)
            settle()
            plain(out, tensor_type)         # inside the timed window: nothing of the submission runs later
            return out

        def unguarded(data):                # back to back calls: settle() runs once, after the last one
            out = kernel(data)
            plain(out, tensor_type)
            return out
        self.custom_kernel = guarded
        self.back_to_back = unguarded
        self.settle = settle
        self.empty_call = lambda data: settle()     # what a call costs doing nothing

    def _import(self, submission: str):
        import importlib.util
        spec = importlib.util.spec_from_file_location("submission", submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        kernel = getattr(module, "custom_kernel", None)
        if not callable(kernel):
            raise ImportError(f"{submission} defines no function custom_kernel(data)")
        return kernel

    def _sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def run(self, inputs: list) -> dict:
        """Untimed calls (tests, the correctness call): their outputs."""
        outputs, counts = [], []
        for data in inputs:
            self._sync()
            if self.work_counts:
                self.work_counts()          # what an earlier call left behind is not this call's
            outputs.append(self.checked_call(lambda: self._synced_call(data)))
            if self.work_counts:
                counts.append(self.work_counts())
        self._launch_check()
        return {"outputs": outputs, "work_counts": counts} if self.work_counts else {"outputs": outputs}

    def _synced_call(self, data):
        out = self.custom_kernel(data)
        self._sync()
        return out

    def _launch_check(self):
        """A launch that failed without raising (a raw <<<>>> of a kernel built for another GPU leaves
        "no kernel image" in CUDA's last-error state and the output untouched) surfaces here, named, instead
        of as a wrong result: torch checks the last error after launching its own kernel."""
        if self.device == "cuda":
            self.torch.ones(1, device="cuda").add_(1)
            self.torch.cuda.synchronize()

    def time(self, inputs: list, empty: bool = False, together: bool = False, spin: int = 0, prepare=None,
             finish=None) -> dict:
        """Timed calls only (never mixed with untimed ones: work could be deferred to those). With `empty`,
        the same loop around a call that does nothing (the clean worker's window). With `together`, the
        competition's method: all inputs back to back in one window, one sample. `spin`: the size of the
        matrix product the GPU works on ahead of each window while the host enqueues it, set by the parent
        (arena/clock/parent_clock.py). `prepare()` and `finish(outputs)`: enqueued ahead of the first call and
        behind the last (arena/clock/timing.py). The reply's `host_ns`: the host's time enqueuing it all."""
        from arena.clock import timing
        hooks = {"prepare": prepare, "finish": finish}
        if together:
            # The guard costs ~9 us of host time: after each call it would land in every call of a host-bound
            # submission, which the competition's harness does not charge. Once after the last call, still
            # inside the window, it runs before the harness touches anything a call could have replaced.
            fn = (lambda data: None) if empty else self.back_to_back
            if self.device == "cuda":
                outputs, times, host = timing.time_together_gpu(fn, inputs, spin, self.settle, **hooks)
            else:
                outputs, times = timing.time_together_wall(fn, inputs, self._sync, self.settle, **hooks)
                host = times[0] * len(inputs)
        else:
            fn = self.empty_call if empty else self.custom_kernel
            if self.device == "cuda":
                outputs, times, host = timing.time_calls_gpu(fn, inputs, spin, **hooks)
            else:
                outputs, times = timing.time_calls_wall(fn, inputs, self._sync, **hooks)
                host = sum(times)
        return {"outputs": [] if empty else outputs, "times_ns": times, "host_ns": host}

    def stage(self, inputs: list, digest_like: list | None = None, spin: int = 0) -> dict:
        """Keep a timed window's inputs, still masked (arena/clock/masking.py): nothing can be computed from them
        until `go` brings the key. `digest_like`: the clean worker's scratch, laid out as the submission's
        outputs and digested in their place. `spin`: the size of the window's work ahead, prepared here with
        the kernels the window launches, so the window's host time is its own."""
        from arena.clock import masking, timing
        if digest_like:
            self.scratch = masking.scratch_like(digest_like, self.device)
        masking.warm_up(self.device)
        if self.device == "cuda":
            timing.prepare_spin(int(spin))
        self.staged, self.staged_storages = inputs, list(self.decoded_storages)
        self.staged_pointers = {s.data_ptr(): i for i, s in enumerate(self.staged_storages) if s.nbytes()}
        self.keystream = masking.Keystream(self.staged_storages)
        self.collected = None
        return {"staged": len(inputs)}

    def go(self, inputs: list, key: int = 0, together: bool = False, spin: int = 0, empty: bool = False) -> dict:
        """The timed window on the staged inputs: unmask them with `key`, time the calls, and answer with the
        times and the digest of the outputs (they stay here until `collect`). The parent's clock runs from
        sending the key to reading this answer."""
        from arena.clock import masking
        from arena.taskdef.nested import tensors_in
        if self.staged is None:
            raise RuntimeError("no staged inputs for this timed window")
        sums = []

        def unmask():
            self.keystream.apply(int(key), unmask=True)

        def digest(outputs):
            tensors = self.scratch if empty else \
                [t for _, t in tensors_in(outputs) if isinstance(t, self.torch.Tensor)]
            sums.append(masking.digest_enqueue(tensors))

        t0 = time.perf_counter_ns()
        reply = self.time(self.staged, empty=empty, together=together, spin=int(spin), prepare=unmask,
                          finish=digest)
        t1 = time.perf_counter_ns()
        outputs = reply.pop("outputs")
        reply["digest"] = [int(s) for s in sums[0]]
        # Where the window's time went on this worker's host (the whole timed loop with its synchronizations,
        # reading the digest): shown in the JSON to explain a gap between the two clocks, never used to rank.
        reply["phases_ns"] = [t1 - t0, time.perf_counter_ns() - t1]
        self.collected = outputs
        return reply

    def collect(self, inputs: list) -> dict:
        """The outputs of the last window, for the parent to check against the digest and the reference."""
        outputs, self.collected = self.collected, None
        if outputs is None:
            raise RuntimeError("no timed window to collect")
        # A window's inputs serve one window (the clean worker, which is never collected, reuses its own).
        # Released here, not when the window closes: freeing gigabytes takes the host a while, and inside the
        # window that time would land on the parent's clock for the submission's worker alone.
        self.staged = self.keystream = None
        return {"outputs": outputs}

    def wall(self, inputs: list) -> dict:
        """Sync-to-sync wall-clock calls that also measure the drain (side-stream check)."""
        from arena.audit import harness_guard
        outputs, wall, drain = harness_guard.time_calls_drain(self.custom_kernel, inputs, self._sync)
        return {"outputs": outputs, "wall_ns": wall, "drain_ns": drain,
                "sync_ns": harness_guard.sync_latency_ns(self._sync)}

    def profile(self, inputs: list) -> dict:
        import torch
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device == "cuda" else [])
        self.run(inputs)                                  # warm-up outside the trace
        with profile(activities=activities) as prof:
            with torch.autograd.profiler.record_function("custom_kernel"), _nvtx_range("custom_kernel"):
                out = self.custom_kernel(inputs[0])
                self._sync()
        def device(event, name):          # torch renamed cuda_* to device_*
            return float(getattr(event, f"{name.replace('X', 'device')}", getattr(event, name.replace("X", "cuda"), 0.0)))
        rows = [[e.key, int(e.count), float(e.self_cpu_time_total), float(e.cpu_time_total),
                 device(e, "self_X_time_total"), device(e, "X_time_total")] for e in prof.key_averages()]
        rows.sort(key=lambda r: r[4] if self.device == "cuda" else r[2], reverse=True)
        return {"outputs": [out], "rows": rows[:20]}        # the evaluator lays out the table (profile_table.py)


class _nvtx_range:
    """NVTX range so `ncu --nvtx --nvtx-include custom_kernel/` selects the submission's kernels."""
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        import torch
        if torch.cuda.is_available():
            torch.cuda.nvtx.range_push(self.name)

    def __exit__(self, *exc):
        import torch
        if torch.cuda.is_available():
            torch.cuda.nvtx.range_pop()


def foreign_threads(threading) -> int:
    """Live Python threads besides the main one."""
    return sum(1 for t in threading.enumerate() if t is not threading.main_thread())

