"""The messages between the parent (arena/worker/client.py) and the worker (arena/worker/server.py), in one place both sides
import. On the wire each is a JSON object (arena/worker/channel.py) with tensors as shared-memory descriptors
(arena/worker/tensorwire.py); a message from the worker is hostile data and is checked where it is parsed.

    worker -> parent   {"isolation": TEXT}                         first word, before any submission code
    parent -> worker   Hello                                       what to import, on which device
    parent -> worker   Request("probe") (isolated GPU workers)     CUDA and tensor sharing work both ways
    worker -> parent   {"ready": true, "pid", "notices"} or {"error", "traceback"}
    parent -> worker   Request(op, args, data)                     one per request, until the socket closes
    worker -> parent   a reply: outputs as "data", REPLY_NUMBER_LISTS, "digest", "threads", "notices", or "error"

A timed window is three requests: "stage" (the inputs, masked: arena/clock/masking.py), "go" (the key; the reply
holds the times and the outputs' digest, and the parent's clock runs from sending it to reading the reply),
"collect" (the outputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field

OPS = ("run", "stage", "go", "collect", "wall", "profile")    # what a request may ask once the submission is imported
REPLY_NUMBER_LISTS = ("times_ns", "wall_ns", "drain_ns", "phases_ns")


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

    def to_message(self, data: dict) -> dict:
        """The wire form; `data` is the tensorwire body of the inputs (empty for a request without inputs)."""
        return {"op": self.op, "args": self.args, "data": data}

    @classmethod
    def from_message(cls, message: dict) -> Request:
        return cls(str(message["op"]), dict(message.get("args") or {}))
