"""The trusted side of the process boundary: starts, feeds, times out and replaces the worker.

The worker is a fresh `python -m arena.worker.server` process (never a multiprocessing child: those inherit the
parent's authkey and argv), started under its own user by arena/isolation/jail.py, talking over one socket of JSON
and shared memory (arena/worker/channel.py, arena/worker/tensorwire.py). Every reply is parsed as hostile data.
"""
from __future__ import annotations

import math
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

import torch

from arena.clock import masking
from arena.worker import channel, tensorwire
from arena.isolation import jail, parent_guard, processes, worker_text
from arena.taskdef.memory import oom_kills
from arena.taskdef.nested import copy_storages, tensors_in
from arena.report.profile_table import ProfileError, build_table
from arena.submission_file import SubmissionFile
from arena.worker.messages import REPLY_NUMBER_LISTS, Hello, Request
from arena.worker.spawn import Spawned, spawn_worker


WORKER_TEXT_FRAME = "| "


def frame_worker_text(text: str) -> str:
    """Every line of text the worker produced, behind the frame that marks it as the submission's."""
    return "\n".join(WORKER_TEXT_FRAME + line for line in text.split("\n")) if text else ""


class WorkerFailure(RuntimeError):
    """The submission raised, crashed, hung or broke the CUDA context; `str()` is one clear line."""

    def __init__(self, message: str, replace: bool = False, traceback: str = "", hang: bool = False):
        super().__init__(worker_text.clean_text(message, 600).replace("\n", " "))
        self.replace = replace          # the worker is gone or poisoned: start a new one
        # The worker's words (its traceback and what it printed), each line framed so that no line of it can
        # read as one of the evaluator's own in a report.
        self.traceback = frame_worker_text(worker_text.clean_text(traceback, 4000))
        self.hang = hang                # no answer within the time limit


_ARENA = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The harness's own frames: this package (wherever the worker sees it mounted) and importlib's.
HARNESS_MODULES = tuple(sorted("/arena/" + os.path.relpath(os.path.join(folder, name), _ARENA)
                               for folder, _, names in os.walk(_ARENA) for name in names if name.endswith(".py")))


def submission_traceback(text: str) -> str:
    """A traceback from the worker without the harness's own frames (arena/, importlib): what the
    submission's author can act on. Text that is not a traceback comes back as it is."""
    lines, kept, skipping = str(text).split("\n"), [], False    # only newlines: a \r stays inside its line
    for line in lines:
        stripped = line.lstrip()
        if line.startswith("  File ") or (stripped.startswith("File \"") and line.startswith(" ")):
            where = stripped[len('File "'):].split('"', 1)[0]
            skipping = where.startswith("<frozen ") or where.endswith(HARNESS_MODULES)
            if skipping:
                continue
        elif skipping and line.startswith("    "):
            continue
        else:
            skipping = False
        kept.append(line)
    if kept and kept[0].startswith("Traceback") and (len(kept) < 2 or not kept[1].startswith("  File ")):
        kept = kept[1:]                 # nothing of the submission's own left under the header
    return "\n".join(kept)


@dataclass
class Reply:
    """One answered request."""
    outputs: list                       # what the submission returned, as the parent sees it (live memory)
    sent: list                          # the inputs exactly as the worker got them (the parent's view of them)
    fields: dict                        # the reply's other fields (times_ns, wall_ns, drain_ns, threads, ...)
    elapsed_ns: float                   # the parent's own clock: request sent to reply received
    output_text: str = ""               # what the worker printed meanwhile (cleaned, capped)


@dataclass
class Window:
    """One timed window, as the parent saw it."""
    times_ns: list                      # what the worker reported: one sample (competition) or one per call
    elapsed_ns: float                   # the parent's own clock: key sent to times and digest received
    outputs: list                       # the collected outputs (empty for a clean worker's window)
    sent: list                          # the parent's view of the staged inputs
    fields: dict                        # the go reply's other fields (threads, digest, host_ns, phases_ns)
    output_text: str = ""               # what the worker printed meanwhile
    staging_ns: float = 0.0             # the parent's clock: staging and collecting, outside the window


MAX_REPORTED_NS = 3600e9                # no honest time of one call or window is longer than an hour


def _numbers(value, what: str, limit: int = 100_000) -> list[float]:
    """A list of finite, non-negative numbers below an hour (times in ns); anything else is a malformed reply."""
    if not isinstance(value, list) or len(value) > limit or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise WorkerFailure(f"the submission's reply is malformed ({what} is not a list of numbers)", replace=True)
    numbers = [float(x) for x in value]
    if not all(math.isfinite(x) and 0 <= x <= MAX_REPORTED_NS for x in numbers):
        raise WorkerFailure(f"the submission's reply is malformed ({what} holds a negative, infinite or "
                            f"impossibly large time)", replace=True)
    return numbers


def _digest(value) -> list[int]:
    if not isinstance(value, list) or len(value) > masking.MAX_DIGESTS or not all(
            isinstance(x, int) and not isinstance(x, bool) and -2**63 <= x < 2**63 for x in value):
        raise WorkerFailure("the submission's reply is malformed (the outputs' digest is not a list of 64-bit "
                            "integers)", replace=True)
    return list(value)


@dataclass
class Worker:
    """One worker process holding the imported submission."""
    submission: SubmissionFile
    task_folder: str
    device: str
    import_timeout: float
    sandboxed: bool = True
    process: subprocess.Popen | None = None
    sock: socket.socket | None = None
    isolation: jail.Isolation | None = None
    traps: list = field(default_factory=list)
    notices: list = field(default_factory=list)     # one-line announcements from the worker (emulation, ...)
    hardening: str = "not started"
    probe_failed: str = ""
    emulate_blackwell: bool = False     # the worker builds sm_100a and runs tcgen05 in software
    spawned: Spawned | None = None      # a process started early (arena/worker/spawn.py), taken by the first start()
    oom_before: int | None = None       # the cgroup's out-of-memory kills when this worker started
    staged: list | None = None          # the parent's view of the inputs staged for the next timed window
    staged_spin: int = 0                # the work ahead those inputs were staged with

    def start(self):
        self.oom_before = oom_kills()
        spawned, self.spawned = self.spawned, None
        spawned = spawned or spawn_worker(self.submission, self.sandboxed, [self.task_folder], self.probe_failed)
        self.process, self.sock, self.isolation, self.traps = (spawned.process, spawned.sock, spawned.isolation,
                                                               spawned.traps)
        # The worker's first word, sent before any submission code runs: it started (in its jail).
        self._receive(self.import_timeout, "starting the worker")
        probe = self.device == "cuda" and self.isolation.home is not None and not self.isolation.weak
        parent_guard.worker_started()       # from the hello on, the submission's code may run
        channel.send(self.sock, Hello(self.submission.path, self.task_folder, self.device, probe,
                                           self.emulate_blackwell).to_message())
        if probe and not self._probe():
            return
        reply, _ = self._receive(self.import_timeout, "importing the submission")
        if "error" in reply:
            text = self.output_text()
            self.stop()
            raise WorkerFailure(reply["error"], replace=True,
                                traceback="\n".join(x for x in (submission_traceback(reply.get("traceback", "")), text)
                                                     if x))
        self._note(reply)
        self.hardening = self.isolation.state

    def _probe(self) -> bool:
        """An isolated worker must still run CUDA and share tensors both ways; if it cannot, start one that
        runs as we do instead (and say so). False when it did that."""
        sent = torch.arange(64, device="cuda", dtype=torch.float32)
        try:
            reply = self._exchange(Request("probe"), [sent], self.import_timeout, "checking CUDA in the worker")
            back = reply.outputs[0] if reply.outputs else None
            if isinstance(back, torch.Tensor) and torch.equal(back.cpu(), sent.cpu() + 1):
                return True
            problem = "wrong values"
        except WorkerFailure as failure:
            problem = str(failure)
        self.stop()
        self.probe_failed = problem
        self.start()
        return False

    def output_text(self) -> str:
        return "\n".join(t for t in (trap.take() for trap in self.traps) if t.strip())

    def _receive(self, timeout: float, doing: str) -> tuple[dict, list[int]]:
        try:
            message, fds = channel.receive(self.sock, max(timeout, 0.001))
        except (socket.timeout, TimeoutError):
            self.stop()
            raise WorkerFailure(f"timed out after {timeout:g} s while {doing} (hang or deadlock?)",
                                replace=True, hang=True) from None
        except (EOFError, OSError, ConnectionError):
            code = self._exit_code()
            self.stop()
            oom = code == -signal.SIGKILL and self.oom_before is not None and (oom_kills() or 0) > self.oom_before
            raise WorkerFailure(f"the submission's process died while {doing} ({describe_exit(code, oom)})",
                                replace=True, traceback=self.output_text()) from None
        except channel.ChannelError as error:
            self.stop()
            raise WorkerFailure(f"the submission's reply could not be read: {error}", replace=True) from None
        if not isinstance(message, dict):
            channel._close_all(fds)
            self.stop()
            raise WorkerFailure("the submission's reply is malformed (not an object)", replace=True)
        return message, fds

    def _exit_code(self):
        """The worker's exit status as Popen gives it (negative: killed by that signal). bubblewrap ends with
        128 + N when the jailed worker was killed by signal N: read as that signal."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        jailed = self.isolation is not None and self.isolation.home is not None
        return -(code - 128) if jailed and code is not None and 128 < code < 128 + 65 else code

    def _send_inputs(self, inputs: list, mask_key: int | None = None) -> tuple[dict, list[int], list]:
        """Encode the inputs for the worker; (body, descriptors, the parent's view of what was sent). With
        `mask_key`, the bytes travel with its keystream added (arena/clock/masking.py): a timed window's staging."""
        if self.device == "cuda":
            sent = copy_storages(inputs)          # ours: outputs written into a sent storage are rebuilt here
            if mask_key is not None:
                masking.Keystream(tensorwire.distinct_storages(sent)).apply(mask_key, unmask=False)
            body, fds = tensorwire.encode(sent)   # staged through shared memory (tensorwire: no CUDA IPC)
            return body, fds, sent
        body, fds = tensorwire.encode(inputs)          # CPU: the copy is the shared-memory file itself
        mine = tensorwire.Decoder("cpu").decode(body, [os.dup(fd) for fd in fds])
        if mask_key is not None:                       # masked in the shared file; the worker unmasks it there
            masking.Keystream(tensorwire.distinct_storages(mine)).apply(mask_key, unmask=False)
        return body, fds, mine

    def _exchange(self, request: Request, inputs: list, timeout: float, doing: str,
                  mask_key: int | None = None, sent: list | None = None) -> Reply:
        """One request and its checked reply. `sent`: for a request without inputs whose reply may name
        storages the parent sent earlier (a window's collect: the staged inputs)."""
        body, fds, mine = self._send_inputs(inputs, mask_key) if inputs else ({}, [], sent or [])
        try:
            started = time.perf_counter_ns()
            channel.send(self.sock, request.to_message(body), fds)
        except (BrokenPipeError, OSError, channel.ChannelError):
            self.stop()
            raise WorkerFailure("the submission's process is gone", replace=True) from None
        finally:
            for fd in fds:
                os.close(fd)
        reply, reply_fds = self._receive(timeout, doing)
        elapsed = float(time.perf_counter_ns() - started)
        return self._parse(reply, reply_fds, mine, elapsed)

    def _note(self, reply: dict):
        """Keep the worker's one-line announcements (deduplicated, cleaned, at most 4) across its replies
        and across replacement workers."""
        for notice in reply.get("notices", []) if isinstance(reply.get("notices"), list) else []:
            line = worker_text.clean_text(notice, 200) if isinstance(notice, str) else ""
            if line and line not in self.notices and len(self.notices) < 4:
                self.notices.append(line)

    def _parse(self, reply: dict, fds: list[int], sent: list, elapsed: float) -> Reply:
        text = self.output_text()
        self._note(reply)
        if "error" in reply:
            channel._close_all(fds)
            broken = bool(reply.get("cuda_broken")) or bool(reply.get("poisoned"))
            if broken:
                self.stop()
            suffix = " (the CUDA context is broken; a new worker takes the next case)" \
                if reply.get("cuda_broken") else ""
            trace = "\n".join(x for x in (submission_traceback(reply.get("traceback", "")), text) if x)
            raise WorkerFailure(str(reply["error"]) + suffix, replace=broken, traceback=trace)
        outputs = []
        if "data" in reply:
            try:
                sent_storages = tensorwire.distinct_storages(sent)
                limit = reply_bytes_limit(sum(s.nbytes() for s in sent_storages))
                outputs = tensorwire.Decoder(self.device, sent_storages, max_bytes=limit).decode(reply["data"], fds)
            except tensorwire.WireError as error:
                self.stop()
                raise WorkerFailure(f"the submission's reply could not be read: {error}", replace=True) from None
            if not isinstance(outputs, list):
                raise WorkerFailure("the submission's reply is malformed (outputs are not a list)", replace=True)
        else:
            channel._close_all(fds)
        fields = {}
        for key in REPLY_NUMBER_LISTS:
            if key in reply:
                fields[key] = _numbers(reply[key], key)
        for key in ("sync_ns", "threads", "host_ns"):
            if isinstance(reply.get(key), (int, float)) and not isinstance(reply.get(key), bool):
                number = float(reply[key])
                if not (math.isfinite(number) and 0 <= number <= MAX_REPORTED_NS):
                    raise WorkerFailure(f"the submission's reply is malformed ({key} is out of range)",
                                        replace=True)
                fields[key] = number
        if isinstance(reply.get("work_counts"), list):     # checked where used (arena/predict/b200.WorkCounts)
            fields["work_counts"] = reply["work_counts"]
        if "digest" in reply:
            fields["digest"] = _digest(reply["digest"])
        if "rows" in reply:
            try:
                fields["table"] = build_table(reply["rows"])
            except ProfileError as error:
                raise WorkerFailure(f"the submission's reply is malformed ({error})", replace=True) from None
        return Reply(outputs=outputs, sent=sent, fields=fields, elapsed_ns=elapsed, output_text=text)

    def request(self, op: str, inputs: list, timeout: float, **args) -> Reply:
        """Send `inputs` (the parent's originals: the worker gets copies) for `op`; the checked reply."""
        if self.process is None:
            self.start()
        return self._exchange(Request(op, args), inputs, timeout, f"running custom_kernel ({op})")

    def time_window(self, inputs: list, timeout: float, *, together: bool, spin: int, empty: bool = False,
                    digest_like: list | None = None, restage: bool = True) -> Window:
        """One timed window in three requests: stage the inputs masked, send the key ("go": the parent's clock
        runs from sending it to reading the times and the outputs' digest), collect the outputs and check
        them against the digest. `empty`: the clean worker's window (the same loop around a call that does
        nothing, digesting scratch tensors laid out as `digest_like` says); it may keep its staged inputs
        (`restage=False`) since it computes nothing from them."""
        if self.process is None:
            self.start()
        key = secrets.randbits(masking.KEY_BITS)
        started = time.perf_counter_ns()
        if restage or self.staged is None or spin != self.staged_spin:
            staged = self._exchange(Request("stage", {"digest_like": digest_like or [], "spin": int(spin)}),
                                    inputs, timeout, "staging the timed inputs", mask_key=key)
            self.staged, self.staged_spin = staged.sent, spin
        args = {"key": key, "together": together, "spin": int(spin), "empty": empty}
        went = self._exchange(Request("go", args), [], timeout,
                              "timing an empty call" if empty else "running custom_kernel (timed)")
        digest = went.fields.get("digest", [])
        if empty:
            return Window(went.fields.get("times_ns", []), went.elapsed_ns, [], self.staged, went.fields,
                          went.output_text, time.perf_counter_ns() - started - went.elapsed_ns)
        sent, self.staged = self.staged, None
        collected = self._exchange(Request("collect"), [], timeout, "collecting the timed outputs",
                                   sent=sent)
        tensors = [t for _, t in tensors_in(collected.outputs) if isinstance(t, torch.Tensor)]
        if digest != masking.digest(tensors):
            raise WorkerFailure("the outputs collected after the timed window are not the ones it computed "
                                "(their digest differs from the one sent when the window closed)", replace=True)
        return Window(went.fields.get("times_ns", []), went.elapsed_ns, collected.outputs, sent, went.fields,
                      "\n".join(t for t in (went.output_text, collected.output_text) if t),
                      time.perf_counter_ns() - started - went.elapsed_ns)

    def stop(self):
        self.staged = None
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.process is not None:
            try:
                self.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self.process.pid, signal.SIGKILL)     # its own session: grandchildren too
            except (ProcessLookupError, PermissionError):
                pass
            processes.end_started()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            else:
                if self.isolation is not None:
                    self.isolation.tidy_home()      # the jail is gone: only its build cache stays
            self.process = None


REPLY_BYTES_FACTOR = 2          # a reply's new tensors may hold twice the bytes sent (every task's outputs fit
REPLY_BYTES_EXTRA = 16 << 20    # in its inputs), plus this much (small cases, odd result layouts)


def reply_bytes_limit(sent_bytes: int) -> int:
    """The most bytes of new tensors the parent maps or copies from one reply."""
    return REPLY_BYTES_FACTOR * sent_bytes + REPLY_BYTES_EXTRA


def describe_exit(code, out_of_memory: bool = False) -> str:
    if out_of_memory:
        return "killed by the kernel's out-of-memory killer (SIGKILL): the case needs more memory than is free"
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
