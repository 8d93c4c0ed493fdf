"""Nested data with tensors, as JSON plus shared memory: how inputs reach the worker and outputs come back.

A tree (tuples, lists, dicts with string keys, numbers, strings, None, tensors) becomes JSON in which each
tensor names a storage, its dtype, shape, stride and offset. Storages travel outside the JSON:
- CPU: one sealed memfd per message (shared memory; its descriptor rides on the channel). The receiver maps
  it, so a later write by the sender is visible to it (late-write detection) but the sender cannot shrink it
  under the receiver (the shrink seal is checked before mapping).
- CUDA: a CUDA IPC handle of the allocation plus a byte range. The receiver opens the handle itself with
  the driver API and checks the range against the size of what it opened.
- "input": an output that lives in one of the storages the parent sent (the pre-filled c, or a view of an
  input): the parent rebuilds it on its own copy of that storage.

`Decoder` is the parent's strict reader: every field is type-checked and every range bounds-checked, so a
hostile worker can send wrong data but never code, never an out-of-range view. Used by arena/runner.py and
arena/worker.py. Nothing here ever unpickles.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os

import torch

MAX_DIMS = 8
MAX_NODES = 100_000
MAX_BYTES = 64 << 30           # all storages of one message
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class WireError(ValueError):
    """What arrived does not describe valid data; `str()` is one line."""


# ---- CUDA IPC through the driver API (no torch IPC internals, no reference-counting files) ----------------

class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class CudaIpc:
    """Export an allocation as a CUDA IPC handle, or open one; the opener learns the allocation's size."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcHandle, ctypes.c_uint]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), ctypes.c_uint64]
        self.lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                     ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        self.opened: dict[bytes, tuple[int, int]] = {}      # handle -> (base pointer, size), opened once

    def _call(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise WireError(f"{name} failed with CUDA driver error {code}")

    def range_of(self, pointer: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer))
        return base.value, size.value

    def export(self, pointer: int) -> tuple[bytes, int, int]:
        """(handle, byte offset of `pointer` in its allocation, allocation size)."""
        base, size = self.range_of(pointer)
        handle = _IpcHandle()
        self._call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(base))
        return ctypes.string_at(ctypes.addressof(handle), 64), pointer - base, size   # .reserved stops at a NUL

    def open(self, handle: bytes) -> tuple[int, int]:
        if handle not in self.opened:
            pointer = ctypes.c_uint64()
            self._call("cuIpcOpenMemHandle_v2", ctypes.byref(pointer), _IpcHandle.from_buffer_copy(handle), 1)
            self.opened[handle] = self.range_of(pointer.value)
        return self.opened[handle]


class _CudaBytes:
    """`nbytes` of device memory at `pointer`, as torch.as_tensor sees it (zero copy)."""

    def __init__(self, pointer: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3, "strides": None}


_ipc: list[CudaIpc] = []


def cuda_ipc() -> CudaIpc:
    """The driver-API helper, with this process's primary context current (the runtime makes it so)."""
    if not _ipc:
        torch.cuda.synchronize()
        _ipc.append(CudaIpc())
    return _ipc[0]


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
    receiver sent us to its index, so outputs living there are sent as references, not copies."""

    def __init__(self, inputs: dict[int, int] | None = None, cuda_pool=None):
        self.inputs = inputs or {}
        self.storages: list[dict] = []
        self.index: dict[tuple, int] = {}
        self.cpu: list[torch.UntypedStorage] = []
        self.cuda_pool = cuda_pool       # context manager: allocate copies sent over IPC in a private pool
        self.keep: list = []             # CUDA copies that must live while the receiver may read them

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
        return {"tensor": {"storage": self.index[key], "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                           "stride": list(t.stride()), "offset": t.storage_offset()}}

    def _storage(self, t: torch.Tensor, storage: torch.UntypedStorage) -> dict:
        if storage.data_ptr() in self.inputs and storage.nbytes():
            return {"input": self.inputs[storage.data_ptr()]}
        if t.device.type == "cpu":
            self.cpu.append(storage)
            return {"cpu": len(self.cpu) - 1, "nbytes": storage.nbytes()}
        if t.device.type == "cuda":
            if not storage.nbytes():
                return {"empty": t.device.index or 0}
            handle, start, _ = cuda_ipc().export(storage.data_ptr())
            return {"cuda": t.device.index or 0, "handle": handle.hex(), "start": start, "nbytes": storage.nbytes()}
        raise WireError(f"tensors on {t.device.type} cannot be sent")

    def finish(self, tree) -> tuple[dict, list[int]]:
        """The message body and the descriptors to attach (the caller closes them after sending)."""
        fds = []
        if self.cpu:
            fd, layout = _write_memfd(self.cpu)
            fds.append(fd)
            cpu = [s for s in self.storages if "cpu" in s]
            for entry in cpu:
                entry["start"] = layout[entry["cpu"]]
                entry["cpu"] = 0
        return {"tree": tree, "storages": self.storages}, fds


def encode(value, inputs: dict[int, int] | None = None) -> tuple[dict, list[int]]:
    encoder = Encoder(inputs)
    return encoder.finish(encoder.tree(value))


def _write_memfd(storages: list[torch.UntypedStorage]) -> tuple[int, list[int]]:
    """One sealed shared-memory file holding every CPU storage (64-byte aligned); (fd, start of each)."""
    layout, size = [], 0
    for s in storages:
        layout.append(size)
        size += (s.nbytes() + 63) // 64 * 64
    fd = os.memfd_create("arena-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, max(size, 64))
    if size:
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mapped:
            target = torch.frombuffer(mapped, dtype=torch.uint8)
            for s, start in zip(storages, layout):
                target[start:start + s.nbytes()].copy_(_bytes_of(s, "cpu"))
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

    def __init__(self, device: str, inputs: list[torch.UntypedStorage] | None = None, cpu_too: bool = False):
        self.device = device
        self.inputs = inputs or []
        self.cpu_too = cpu_too
        self.nodes = 0
        self.storage_pointers: list[int] = []      # data_ptr of each decoded storage, by index (-1: empty)

    def decode(self, body, fds: list[int]):
        if not isinstance(body, dict) or set(body) != {"tree", "storages"} or not isinstance(body["storages"], list):
            raise WireError("a data message must hold exactly 'tree' and 'storages'")
        maps = [self._map(fd) for fd in fds]
        total, storages = 0, []
        for i, entry in enumerate(body["storages"]):
            storage, nbytes = self._storage(entry, maps)
            total += nbytes
            if total > MAX_BYTES:
                raise WireError(f"the data is larger than {MAX_BYTES} bytes")
            storages.append(storage)
        self.storage_pointers = [s.data_ptr() if s.nbytes() else -1 for s in storages]
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
        kind = set(entry) & {"cpu", "cuda", "input", "empty"}
        if len(kind) != 1:
            raise WireError("a storage entry must be exactly one of cpu, cuda, input, empty")
        if "input" in entry:
            index = _int(entry["input"], "an input reference", 0, len(self.inputs) - 1)
            return self.inputs[index], 0
        if "empty" in entry:
            return torch.empty(0, dtype=torch.uint8, device=self.device).untyped_storage(), 0
        nbytes = _int(entry.get("nbytes"), "a storage size", 0, MAX_BYTES)
        start = _int(entry.get("start"), "a storage start")
        if "cpu" in entry:
            if self.device != "cpu" and not self.cpu_too:
                raise WireError("a CPU tensor arrived where the device is " + self.device)
            mapped = maps[_int(entry["cpu"], "a buffer index", 0, len(maps) - 1)] if maps else None
            if nbytes == 0:
                return torch.empty(0, dtype=torch.uint8).untyped_storage(), 0
            if mapped is None or start + nbytes > len(mapped):
                raise WireError("a CPU storage reaches past the end of its shared-memory buffer")
            return torch.frombuffer(mapped, dtype=torch.uint8, count=nbytes, offset=start).untyped_storage(), nbytes
        device = _int(entry["cuda"], "a CUDA device index", 0, 64)
        if self.device != "cuda" or device != (torch.cuda.current_device()):
            raise WireError(f"a tensor arrived on cuda:{device}, the evaluation runs on {self.device}")
        handle = entry.get("handle")
        if not isinstance(handle, str) or len(handle) != 128:
            raise WireError("a CUDA IPC handle must be 64 bytes of hex")
        try:
            raw = bytes.fromhex(handle)
        except ValueError:
            raise WireError("a CUDA IPC handle must be 64 bytes of hex") from None
        base, size = cuda_ipc().open(raw)
        if start + nbytes > size:
            raise WireError(f"a CUDA storage reaches past its allocation ({start}+{nbytes} > {size} bytes)")
        memory = torch.as_tensor(_CudaBytes(base + start, nbytes), device=f"cuda:{device}")
        return memory.untyped_storage(), nbytes

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
