"""The messages between the parent (arena/runner.py) and the worker (arena/worker.py), in one place both sides
import. On the wire each is a JSON object (arena/channel.py) with tensors as shared-memory descriptors
(arena/tensorwire.py); a message from the worker is hostile data and is checked where it is parsed.

    worker -> parent   {"isolation": TEXT}                         first word, before any submission code
    parent -> worker   Hello                                       what to import, on which device
    parent -> worker   Request("probe") (isolated GPU workers)     CUDA and tensor sharing work both ways
    worker -> parent   {"ready": true, "pid", "notices"} or {"error", "traceback"}
    parent -> worker   Request(op, args, data | calls)             one per request, until the socket closes
    worker -> parent   a reply: outputs as "data", REPLY_NUMBER_LISTS, "threads", "notices", or "error"
"""
from __future__ import annotations

from dataclasses import dataclass, field

OPS = ("run", "time", "wall", "profile")          # what a request may ask once the submission is imported
REPLY_NUMBER_LISTS = ("times_ns", "wall_ns", "drain_ns")


@dataclass
class Hello:
    submission: str         # the submission file's absolute path
    task_folder: str        # its task.py / reference.py / utils.py win over files beside the submission
    device: str             # "cuda" or "cpu"
    probe: bool             # an isolated GPU worker: a probe request comes first
    emulate_blackwell: bool = False     # build sm_100a and run tcgen05 in software (arena/blackwell)

    def to_message(self) -> dict:
        return {"submission": self.submission, "task_folder": self.task_folder, "device": self.device,
                "probe": self.probe, "emulate_blackwell": self.emulate_blackwell}

    @classmethod
    def from_message(cls, message: dict) -> Hello:
        return cls(str(message["submission"]), str(message["task_folder"]), str(message["device"]),
                   bool(message.get("probe")), bool(message.get("emulate_blackwell")))


@dataclass
class Request:
    op: str                                     # "probe" or one of OPS
    args: dict = field(default_factory=dict)    # keyword arguments of the worker's Session method
    calls: int | None = None                    # an empty-call request: how many calls (it sends no inputs)

    def to_message(self, data: dict) -> dict:
        """The wire form; `data` is the tensorwire body of the inputs (empty for an empty-call request)."""
        message = {"op": self.op, "args": self.args, "data": data}
        if self.calls is not None:
            message["n"] = self.calls
        return message

    @classmethod
    def from_message(cls, message: dict) -> Request:
        calls = message.get("n")
        return cls(str(message["op"]), dict(message.get("args") or {}), None if calls is None else int(calls))
