"""Nested data with tensors, as JSON plus shared memory: how inputs reach the worker and outputs come back.

A tree (tuples, lists, dicts with string keys, numbers, strings, None, tensors) becomes JSON in which each
tensor names a storage, its dtype, shape, stride and offset. Storages travel outside the JSON, in one sealed
memfd per message (shared memory; its descriptor rides on the channel):
- CPU: the receiver maps it, so a later write by the sender is visible to it (late-write detection) but the
  sender cannot shrink it under the receiver (the shrink seal is checked before mapping).
- CUDA: the bytes are staged through it and the receiver copies them into memory of its own on its GPU.
  CUDA IPC would avoid the copies but works only between processes of one uid and one PID namespace
  (measured on an H100: "mapping of buffer object failed" for a jailed worker), which the jail forbids.
- "input": an output that lives in one of the storages the parent sent (the pre-filled c, or a view of an
  input): the parent rebuilds it on its own copy of that storage, with the worker's bytes where the storage
  is on the GPU.

`Decoder` is the parent's strict reader: every field is type-checked and every range bounds-checked, so a
hostile worker can send wrong data but never code, never an out-of-range view. Used by arena/worker/client.py and
arena/worker/server.py. Nothing here ever unpickles.
"""
from __future__ import annotations

import fcntl
import mmap
import os

import torch

MAX_DIMS = 8
MAX_NODES = 100_000
MAX_BYTES = 64 << 30           # all storages of one message
TRIM_ABOVE = 1 << 20           # an own storage larger than this travels as the span of its tensors when smaller
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class WireError(ValueError):
    """What arrived does not describe valid data; `str()` is one line."""


# ---- encoding --------------------------------------------------------------------------------------------

def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise WireError(f"unknown dtype {str(name)[:40]!r}")
    return dtype


def _bytes_of(storage: torch.UntypedStorage, device) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, 0, (storage.nbytes(),), (1,))


class Encoder:
    """Turns one tree into (JSON, descriptors to attach). `inputs` maps the data_ptr of each storage the
    receiver sent us to its index, so outputs living there are sent as references. A storage of its own
    travels whole, unless its tensors span a small part of it (a result that is a view into a large split-K
    workspace): then only the bytes from the first to the last they reach travel, and their offsets move."""

    def __init__(self, inputs: dict[int, int] | None = None):
        self.inputs = inputs or {}
        self.storages: list[dict] = []
        self.index: dict[tuple, int] = {}
        self.staged: list[torch.Tensor] = []        # the bytes (uint8) that go into the shared buffer
        self.spans: dict[int, list] = {}            # own storage index -> [first byte, end byte, tensor entries]

    def tree(self, value):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, (list, tuple)):
            return {"list" if isinstance(value, list) else "tuple": [self.tree(v) for v in value]}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise WireError("dict keys must be strings")
            return {"dict": {k: self.tree(v) for k, v in value.items()}}
        raise WireError(f"a {type(value).__name__} cannot be sent (tensors, numbers, strings and containers only)")

    def _tensor(self, t: torch.Tensor) -> dict:
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        if key not in self.index:
            self.index[key] = len(self.storages)
            self.storages.append(self._storage(t, storage))
        entry = {"storage": self.index[key], "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                 "stride": list(t.stride()), "offset": t.storage_offset()}
        span = self.spans.get(self.index[key])
        if span is not None:
            span[2].append(entry)
            if t.numel():
                size = t.element_size()
                first = t.storage_offset() * size
                end = first + (sum((n - 1) * d for n, d in zip(t.shape, t.stride())) + 1) * size
                span[0], span[1] = min(span[0], first), max(span[1], end)
        return {"tensor": entry}

    def _stage(self, storage: torch.UntypedStorage, device: str) -> dict:
        self.staged.append(_bytes_of(storage, storage.device))
        return {"buffer": len(self.staged) - 1, "nbytes": storage.nbytes(), "device": device}

    def _storage(self, t: torch.Tensor, storage: torch.UntypedStorage) -> dict:
        if t.device.type not in ("cpu", "cuda"):
            raise WireError(f"tensors on {t.device.type} cannot be sent")
        if storage.data_ptr() in self.inputs and storage.nbytes():
            entry = {"input": self.inputs[storage.data_ptr()]}
            if t.device.type == "cuda":          # the receiver's copy is its own memory: it needs our bytes
                entry.update(self._stage(storage, "cuda"))
            return entry
        if t.device.type == "cuda" and not storage.nbytes():
            return {"empty": t.device.index or 0}
        self.spans[len(self.storages)] = [storage.nbytes(), 0, []]
        return self._stage(storage, t.device.type)

    def _trim(self):
        """Send only the spanned bytes of an own storage that its tensors reach a small part of."""
        for index, (first, end, tensors) in self.spans.items():
            entry = self.storages[index]
            first = first // 64 * 64            # keeps every tensor's byte offset a multiple of its element size
            end = max(end, first)
            if entry["nbytes"] <= TRIM_ABOVE or end - first > entry["nbytes"] // 2:
                continue
            whole = self.staged[entry["buffer"]]
            self.staged[entry["buffer"]] = whole[first:end]
            entry["nbytes"] = end - first
            for tensor in tensors:
                if tensor["shape"] and 0 in tensor["shape"]:
                    tensor["offset"] = 0
                else:
                    tensor["offset"] -= first // dtype_from_name(tensor["dtype"]).itemsize

    def finish(self, tree) -> tuple[dict, list[int]]:
        """The message body and the descriptors to attach (the caller closes them after sending)."""
        fds = []
        self._trim()
        if self.staged:
            fd, layout = _write_memfd(self.staged)
            fds.append(fd)
            for entry in self.storages:
                if "buffer" in entry:
                    entry["start"] = layout[entry["buffer"]]
                    entry["buffer"] = 0
        return {"tree": tree, "storages": self.storages}, fds


def encode(value, inputs: dict[int, int] | None = None) -> tuple[dict, list[int]]:
    encoder = Encoder(inputs)
    return encoder.finish(encoder.tree(value))


def _write_memfd(staged: list[torch.Tensor]) -> tuple[int, list[int]]:
    """One sealed shared-memory file holding every staged run of bytes (64-byte aligned; CUDA ones copied
    from the GPU); (fd, start of each)."""
    layout, size = [], 0
    for s in staged:
        layout.append(size)
        size += (s.numel() + 63) // 64 * 64
    fd = os.memfd_create("arena-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, max(size, 64))
    if size:
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mapped:
            target = torch.frombuffer(mapped, dtype=torch.uint8)
            for s, start in zip(staged, layout):
                target[start:start + s.numel()].copy_(s)
            del target
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd, layout


# ---- decoding --------------------------------------------------------------------------------------------

def _int(value, what: str, low: int = 0, high: int = 1 << 62) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise WireError(f"{what} must be an integer in [{low}, {high}], got {str(value)[:40]}")
    return value


class Decoder:
    """Rebuilds a tree sent by the other side. `inputs[i]` is the i-th storage this side sent in the
    request being answered (for "input" references); `device` is the only device the data may live on, besides
    the CPU where `cpu_too` (the inputs of a GPU run: group gemm keeps its reference scales on the CPU)."""

    def __init__(self, device: str, inputs: list[torch.UntypedStorage] | None = None, cpu_too: bool = False,
                 max_bytes: int = MAX_BYTES):
        self.device = device
        self.max_bytes = max_bytes              # all new storages together (the parent bounds replies by it)
        self.inputs = inputs or []
        self.cpu_too = cpu_too
        self.nodes = 0
        self.storage_pointers: list[int] = []      # data_ptr of each decoded storage, by index (-1: empty)
        self.storages: list[torch.UntypedStorage] = []     # the decoded storages, in the sender's order

    def decode(self, body, fds: list[int]):
        if not isinstance(body, dict) or set(body) != {"tree", "storages"} or not isinstance(body["storages"], list):
            raise WireError("a data message must hold exactly 'tree' and 'storages'")
        if len(body["storages"]) > MAX_NODES:
            raise WireError("the data holds too many storages")
        # Sizes are checked before anything is mapped or copied: a sparse file announcing gigabytes costs
        # nothing to send and would cost the receiver that much memory.
        announced = sum(_int(e.get("nbytes", 0), "a storage size", 0, MAX_BYTES) for e in body["storages"]
                        if isinstance(e, dict) and "buffer" in e and "input" not in e)
        if announced > self.max_bytes:
            raise WireError(f"the data announces {announced} bytes, more than the {self.max_bytes} this reply "
                            f"may hold")
        maps = [self._map(fd) for fd in fds]
        total, storages = 0, []
        for i, entry in enumerate(body["storages"]):
            storage, nbytes = self._storage(entry, maps)
            total += nbytes
            if total > self.max_bytes + sum(s.nbytes() for s in self.inputs):
                raise WireError(f"the data is larger than {self.max_bytes} bytes")
            storages.append(storage)
        self.storage_pointers = [s.data_ptr() if s.nbytes() else -1 for s in storages]
        self.storages = storages
        return self._tree(body["tree"], storages, 0)

    def _map(self, fd: int):
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            if seals & SEALS != SEALS or seals & (fcntl.F_SEAL_WRITE | getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0)):
                raise WireError("a shared-memory buffer arrived without its shrink/grow seals")
            size = os.fstat(fd).st_size
            return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) if size else None
        except OSError as error:
            raise WireError(f"a shared-memory buffer could not be mapped: {error.strerror}") from None
        finally:
            os.close(fd)

    def _storage(self, entry, maps) -> tuple[torch.UntypedStorage, int]:
        if not isinstance(entry, dict):
            raise WireError("a storage entry must be an object")
        kind = set(entry) & {"buffer", "input", "empty"}
        if not kind or kind - {"input", "buffer"} and len(kind) != 1:
            raise WireError("a storage entry must be one of buffer, input (with or without a buffer), empty")
        if "empty" in entry:
            return torch.empty(0, dtype=torch.uint8, device=self.device).untyped_storage(), 0
        if "input" in entry:
            index = _int(entry["input"], "an input reference", 0, len(self.inputs) - 1)
            target = self.inputs[index]
            if "buffer" in entry:        # a GPU storage we sent, with the bytes the other side holds now
                if target.device.type != "cuda" or entry.get("device") != "cuda":
                    raise WireError("only a GPU input reference carries bytes")
                content = self._bytes(entry, maps)
                if content.numel() != target.nbytes():
                    raise WireError("an input reference carries a different number of bytes than the input")
                torch.empty(0, dtype=torch.uint8, device=target.device).set_(
                    target, 0, (target.nbytes(),), (1,)).copy_(content)
                return target, target.nbytes()
            return target, 0
        device = entry.get("device")
        if device not in ("cpu", "cuda"):
            raise WireError("a storage's device must be cpu or cuda")
        content = self._bytes(entry, maps)
        if device == "cpu":
            if self.device != "cpu" and not self.cpu_too:
                raise WireError("a CPU tensor arrived where the device is " + self.device)
            return content.untyped_storage(), content.numel()
        if self.device != "cuda":
            raise WireError(f"a CUDA tensor arrived, the evaluation runs on {self.device}")
        on_gpu = torch.empty(content.numel(), dtype=torch.uint8, device="cuda")
        on_gpu.copy_(content)
        return on_gpu.untyped_storage(), content.numel()

    def _bytes(self, entry: dict, maps) -> torch.Tensor:
        """The entry's bytes in the shared buffer, bounds-checked (a view of the mapping, no copy)."""
        nbytes = _int(entry.get("nbytes"), "a storage size", 0, MAX_BYTES)
        start = _int(entry.get("start"), "a storage start")
        mapped = maps[_int(entry["buffer"], "a buffer index", 0, len(maps) - 1)] if maps else None
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        if mapped is None or start + nbytes > len(mapped):
            raise WireError("a storage reaches past the end of its shared-memory buffer")
        return torch.frombuffer(mapped, dtype=torch.uint8, count=nbytes, offset=start)

    def _tree(self, node, storages, depth: int):
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > 32:
            raise WireError("the data is nested too deeply or holds too many items")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if not isinstance(node, dict) or len(node) != 1:
            raise WireError("malformed data node")
        (kind, value), = node.items()
        if kind in ("list", "tuple") and isinstance(value, list):
            items = [self._tree(v, storages, depth + 1) for v in value]
            return items if kind == "list" else tuple(items)
        if kind == "dict" and isinstance(value, dict):
            return {k: self._tree(v, storages, depth + 1) for k, v in value.items()}
        if kind == "tensor" and isinstance(value, dict):
            return self._tensor(value, storages)
        raise WireError(f"malformed data node {str(kind)[:20]!r}")

    def _tensor(self, spec: dict, storages) -> torch.Tensor:
        if set(spec) != {"storage", "dtype", "shape", "stride", "offset"}:
            raise WireError("a tensor must hold exactly storage, dtype, shape, stride, offset")
        storage = storages[_int(spec["storage"], "a storage index", 0, len(storages) - 1)]
        dtype = dtype_from_name(spec["dtype"])
        shape, stride = spec["shape"], spec["stride"]
        if not isinstance(shape, list) or not isinstance(stride, list) or len(shape) != len(stride) \
                or len(shape) > MAX_DIMS:
            raise WireError("a tensor's shape and stride must be lists of equal length (at most 8)")
        shape = [_int(s, "a tensor size") for s in shape]
        stride = [_int(s, "a tensor stride") for s in stride]
        offset = _int(spec["offset"], "a tensor offset")
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if all(shape):
            reach = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1
            if reach * itemsize > storage.nbytes():
                raise WireError(f"a tensor reaches past the end of its storage ({reach * itemsize} > "
                                f"{storage.nbytes()} bytes)")
            # More elements than its storage holds (stride 0, overlapping strides): copying it would make the
            # evaluator allocate what the sender never did (a 2 GiB tensor over 2 bytes).
            elements = 1
            for n in shape:
                elements *= n
            if elements * itemsize > storage.nbytes():
                raise WireError(f"a tensor of {elements} elements over a storage of {storage.nbytes()} bytes: "
                                f"its elements overlap in memory (stride 0 or overlapping strides)")
        device = storage.device
        return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)


def distinct_storages(tree) -> list[torch.UntypedStorage]:
    """The distinct storages of `tree`, in the order an Encoder numbers them (what "input" references name)."""
    seen, order = set(), []

    def visit(value):
        if isinstance(value, torch.Tensor):
            key = value.untyped_storage().data_ptr()
            if key not in seen:
                seen.add(key)
                order.append(value.untyped_storage())
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
    visit(tree)
    return order
