"""The trusted side of the process boundary: starts, feeds, times out and replaces the worker."""
from __future__ import annotations

import multiprocessing
import os
import signal

from arena import integrity
from arena import worker as worker_module


class WorkerFailure(RuntimeError):
    """The submission raised, crashed, hung or broke the CUDA context; `str()` is one clear line."""

    def __init__(self, message: str, replace: bool = False, traceback: str = ""):
        super().__init__(message)
        self.replace = replace          # the worker is gone or poisoned: start a new one
        self.traceback = traceback


class Worker:
    """One spawned worker process holding the imported submission."""

    def __init__(self, submission: str, task_folder: str, device: str, import_timeout: float):
        self.args = (submission, task_folder, device)
        self.import_timeout = import_timeout
        self.process = None
        self.conn = None
        # Drop the worker's capabilities (arena/integrity.py) unless told not to, or profiled by ncu.
        self.harden = os.environ.get(integrity.NO_HARDEN_ENV) != "1" and not os.environ.get("POPCORN_NCU")
        self.hardening = "not started"
        blockers = integrity.harden_blockers(submission) if self.harden else []
        if blockers:        # a root worker without capabilities could not use these: keep them, and say so
            self.harden = False
            self.hardening_note = f"off: a worker without capabilities could not use {', '.join(blockers)}"

    def start(self):
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        self.process = context.Process(target=worker_module.main, args=(child_end, *self.args),
                                       kwargs={"harden": self.harden}, daemon=True)
        self.process.start()
        child_end.close()
        self.conn = parent_end
        if self.harden and self.args[2] == "cuda" and not self._probe_ipc():
            return
        reply = self._receive(self.import_timeout, "importing the submission")
        if "error" in reply:
            self.stop()
            raise WorkerFailure(reply["error"], replace=True, traceback=reply.get("traceback", ""))
        self.hardening = getattr(self, "hardening_note", None) or reply.get("hardening", "off")

    def _probe_ipc(self) -> bool:
        """Before the submission is imported, a hardened worker must still run CUDA and share tensors both
        ways; if it cannot, start an unhardened one instead (and say so). False when it did that."""
        import torch
        sent = torch.arange(64, device="cuda", dtype=torch.float32)
        try:
            self.conn.send({"op": "probe", "data": sent})
            reply = self._receive(self.import_timeout, "checking CUDA in the hardened worker")
            back = reply.get("outputs", [None])[0]
            if back is not None and torch.equal(back.cpu(), sent.cpu() + 1):
                return True
            problem = reply.get("error", "wrong values")
        except (WorkerFailure, OSError) as failure:
            problem = str(failure)
        self.stop()
        self.harden = False
        self.start()
        self.hardening = f"off: CUDA failed in a worker without capabilities ({problem})"
        return False

    def _receive(self, timeout: float, doing: str) -> dict:
        try:
            ready = self.conn.poll(timeout)
        except (EOFError, OSError):
            ready = True
        if not ready:
            self.stop()
            raise WorkerFailure(f"timed out after {timeout:g} s while {doing} (hang or deadlock?)", replace=True)
        try:
            return integrity.safe_loads(self.conn.recv_bytes())      # never a plain unpickle (exec via __reduce__)
        except integrity.ForbiddenReply as error:
            self.stop()
            raise WorkerFailure(str(error), replace=True) from None
        except (EOFError, OSError, ConnectionError):
            code = self._exit_code()
            self.stop()
            raise WorkerFailure(f"the submission's process died while {doing} ({describe_exit(code)})",
                                replace=True) from None
        except Exception as error:            # a malformed reply: the worker cannot be trusted any more
            self.stop()
            raise WorkerFailure(f"the submission's reply could not be read: {type(error).__name__}: "
                                f"{str(error).splitlines()[0] if str(error) else ''}", replace=True) from None

    def _exit_code(self):
        self.process.join(timeout=5)
        return self.process.exitcode

    def request(self, op: str, timeout: float, **args) -> dict:
        if self.process is None:
            self.start()
        try:
            self.conn.send({"op": op, **args})
        except (BrokenPipeError, OSError):
            self.stop()
            raise WorkerFailure("the submission's process is gone", replace=True) from None
        reply = self._receive(timeout, f"running custom_kernel ({op})")
        if "outputs" in reply:
            reply["outputs"] = worker_module.resolve_input_aliases(reply["outputs"], args)
        if "error" in reply:
            broken = reply.get("cuda_broken", False) or reply.get("poisoned", False)
            if broken:
                self.stop()
            suffix = " (the CUDA context is broken; a new worker takes the next case)" \
                if reply.get("cuda_broken") else ""
            raise WorkerFailure(reply["error"] + suffix, replace=broken, traceback=reply.get("traceback", ""))
        return reply

    def stop(self):
        if self.conn is not None:
            try:
                self.conn.send(None)
            except Exception:
                pass
            self.conn.close()
            self.conn = None
        if self.process is not None:
            self.process.join(timeout=2)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(timeout=5)
            if self.process.pid and self.process.pid != os.getpgrp():
                integrity.kill_process_group(self.process.pid)   # whatever the submission left running
            self.process = None


def describe_exit(code) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
