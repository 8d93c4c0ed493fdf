"""The untrusted side: started by arena/worker/client.py in its jail (arena/isolation/jail.py), imports the submission and
calls `custom_kernel`.

It talks to the parent over one Unix socket (arena/worker/channel.py: JSON plus shared-memory descriptors, never a
pickle); its argv and environment hold no seed and no secret. It receives inputs the parent generated and
sends back outputs and times; the parent checks every output and re-checks every time against its own clock.
"""
from __future__ import annotations

import os
import socket
import traceback

from arena.worker.session import NotPlain, Session, foreign_threads

CHANNEL_FD_ENV = "ARENA_CHANNEL_FD"


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _explained(error: BaseException, capability: tuple | None, submission: str = "", blackwell=None) -> str:
    """The plain cause when the error is a load_inline build that failed (named as `eval.py compile` names it,
    arena/compile/diagnosis.py) or only means "this machine cannot run it" (arena/blackwell/missing.py), else the error's
    own first line; the raw text stays in the traceback. `capability`: the GPU's, None on the CPU.
    `submission`: its path, while it is being imported (a build inside custom_kernel is named all the same).
    `blackwell`: arena.blackwell.runtime under --emulate-blackwell, which says what it cannot judge."""
    verdict = blackwell.cannot_judge(error) if blackwell is not None else None
    if verdict:
        return verdict
    if type(error).__name__ in ("EmulationError", "EmulationBuildError"):   # --emulate-blackwell's own words
        return str(error).strip().splitlines()[0]
    cause = None
    try:
        from arena.blackwell import missing
        from arena.compile import load_inline_failure
        from arena.compile.diagnosis import CUTLASS_MISSING
        from arena.report.results import CANNOT_JUDGE_HERE
        cause = load_inline_failure(error, submission)
        if cause and cause.endswith(CUTLASS_MISSING):   # the runners have CUTLASS: this machine lacks it, not the file
            cause = f"{CANNOT_JUDGE_HERE}: {cause}"
        cause = cause or missing.explain_import_error(error, capability)
    except Exception:
        pass
    return cause or _first_line(error)


def _cuda_broken() -> bool:
    import torch
    if not torch.cuda.is_available():
        return False
    try:
        torch.cuda.synchronize()
        return False
    except Exception:
        return True



def _probe(sock, device: str, request, fds) -> bool:
    """Before any submission code: CUDA works and tensors cross both ways. Answers data + 1."""
    from arena.worker import channel, tensorwire
    try:
        decoder = tensorwire.Decoder(device)
        data = decoder.decode(request["data"], fds)
        answer = data[0] + 1
        if device == "cuda":
            import torch
            torch.cuda.synchronize()
        body, out_fds = tensorwire.encode([answer])
        channel.send(sock, {"data": body}, out_fds)
        _close(out_fds)
        return True
    except BaseException as error:
        channel.send(sock, {"error": _first_line(error)})
        return False


def _work_counts(blackwell, emulation):
    """What the emulated kernels of one call issued, and its torch._scaled_mm calls (NVFP4, emulated here)."""
    seen = {"scaled_mm": 0}

    def take() -> dict:
        counts = blackwell.take_counts()
        calls = emulation.calls if emulation is not None else 0
        counts["scaled_mm_calls"], seen["scaled_mm"] = calls - seen["scaled_mm"], calls
        return counts
    return take


def _notices(emulation, blackwell=None) -> list[str]:
    """Announced once the submission's calls were emulated (an import-time call counts too)."""
    notices = [blackwell.ANNOUNCEMENT] if blackwell is not None else []
    return notices + ([emulation.ANNOUNCEMENT] if emulation is not None and emulation.calls else [])


def _install_blackwell(capability) -> object:
    """--emulate-blackwell in this worker: the runtime module, installed (arena/blackwell/runtime.py)."""
    if capability is None or capability[0] != 9:
        raise RuntimeError("--emulate-blackwell needs a Hopper GPU (sm_90a); this worker has "
                           + ("no GPU" if capability is None else f"sm_{capability[0]}{capability[1]}"))
    import torch
    from arena.blackwell import runtime
    runtime.install(torch)
    return runtime


def _close(fds):
    for fd in fds:
        os.close(fd)


def serve(sock: socket.socket, warnings: list[str] = ()):
    """Worker loop: a first word, the hello, then one reply per request; errors become {"error": one line}.
    `warnings` (the worker's own, such as cores it could not lock) go out with the ready message."""
    import threading

    from arena.audit import harness_guard
    from arena.worker import channel, tensorwire
    from arena.worker.messages import OPS, Hello, Request
    channel.send(sock, {"started": True})
    import torch            # while the parent imports its own (arena/worker/spawn.py): the hello comes after both
    message, _ = channel.receive(sock)
    hello = Hello.from_message(message)
    device = hello.device
    capability = None       # the GPU's (major, minor): for the emulation and for naming errors
    if device == "cuda":
        capability = tuple(torch.cuda.get_device_capability())
    emulation = None        # torch._scaled_mm with NVFP4 off Blackwell: emulated exactly
    try:
        from arena.nvfp4 import scaled_mm_emulation
        if scaled_mm_emulation.install(capability):
            emulation = scaled_mm_emulation
    except ImportError:
        pass
    if hello.probe:
        request, fds = channel.receive(sock)
        if not _probe(sock, device, request, fds):
            return
    blackwell = None
    try:
        if hello.emulate_blackwell:
            blackwell = _install_blackwell(capability)
            blackwell.note_submission(hello.submission)
            capability = blackwell.CAPABILITY     # errors are named for the GPU the submission sees (never
                                                  # "needs a Blackwell GPU": the emulation is one)
        session = Session(hello.submission, hello.task_folder, device,
                          checked_call=blackwell.checked_call if blackwell else None,
                          work_counts=_work_counts(blackwell, emulation) if blackwell else None)
    except harness_guard.IntegrityViolation as error:
        channel.send(sock, {"error": str(error)})
        return
    except BaseException as error:        # SyntaxError, ImportError, a failing load_inline, ...
        explained = _explained(error, capability, hello.submission, blackwell)
        channel.send(sock, {"error": f"cannot import submission: {explained}",
                            "traceback": traceback.format_exc(limit=-3), "cuda_broken": _cuda_broken()})
        return
    removed = [f"removed {path}: a killed build's lock" for path in session.stale_build_locks]
    channel.send(sock, {"ready": True, "pid": os.getpid(),
                        "notices": list(warnings) + removed + _notices(emulation, blackwell)})
    ops = {op: getattr(session, op) for op in OPS}       # run, stage, go, collect, wall, profile
    failed_builds = None     # a build that failed in one call is named again in the next ones (made at a first error)
    while True:
        try:
            request, fds = channel.receive(sock)
        except (EOFError, OSError, channel.ChannelError):
            return
        if request is None or not isinstance(request, dict):
            return
        decoder = tensorwire.Decoder(device, cpu_too=True)      # inputs: what the task generated, as it is
        try:
            asked = Request.from_message(request)
            inputs = decoder.decode(request["data"], fds) if request.get("data") else []
            session.decoded_storages = decoder.storages
            session.guard.check("between calls")
            reply = ops[asked.op](inputs, **asked.args)
            # The deep check walks every global of the harness's modules (about a millisecond): after a timed
            # window it waits for the collect request, the very next one, so the parent's clock leaves it out.
            session.guard.check("during the request", deep=asked.op != "go")
            session.keep_alive.extend(reply.get("outputs", []))
            reply["threads"] = foreign_threads(threading) - session.threads_before
        except harness_guard.IntegrityViolation as error:
            reply = {"error": str(error), "poisoned": True}
        except NotPlain as error:
            reply = {"error": str(error)}
        except BaseException as error:
            if failed_builds is None:    # arena.compile only once a call failed: it stays off the worker's start
                from arena.compile.diagnosis import BuildFailures
                failed_builds = BuildFailures()
            explained = failed_builds.cause_of(error) or _explained(error, capability, blackwell=blackwell)
            failed_builds.remember(explained)
            reply = {"error": explained,
                     "traceback": traceback.format_exc(limit=-3), "cuda_broken": _cuda_broken()}
        out_fds = []
        if "outputs" in reply:
            try:
                sent = session.staged_pointers if asked.op == "collect" else \
                    {p: i for i, p in enumerate(decoder.storage_pointers)}
                encoder = tensorwire.Encoder(inputs=sent)
                reply["data"], out_fds = encoder.finish(encoder.tree(reply.pop("outputs")))
            except Exception as error:    # an output that cannot be shared (odd device, closed storage, ...)
                reply = {"error": f"the output could not be sent to the evaluator: {_first_line(error)}"}
        reply["notices"] = _notices(emulation, blackwell)
        try:
            channel.send(sock, reply, out_fds)
        finally:
            _close(out_fds)


def main():
    from arena.isolation import jail
    unlocked = jail.start_worker()     # before torch, before the submission
    fd = int(os.environ.pop(CHANNEL_FD_ENV))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
    serve(sock, [unlocked] if unlocked else [])


if __name__ == "__main__":
    main()
