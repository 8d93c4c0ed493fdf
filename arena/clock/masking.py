"""Timed inputs the worker cannot use before its window opens, and a digest proving its outputs existed when
the window closed. Both sides of a timed window use it: arena/worker/client.py (parent) and arena/worker/server.py.

The parent stages a window's inputs in the worker with a keystream added to every 8-byte word (modulo 2**64),
drawn from a secret 63-bit key by torch's own generator on the storage's device (Philox on a GPU, Mersenne
Twister on the CPU, so the parent and the worker draw the same words; a storage's last 0-7 bytes past its
whole words travel unmasked). Only the request that opens the window carries the key, so nothing the
submission does before that request, with or without the harness, can compute a result: the parent's clock,
started when it sends the key, covers all the work on the real inputs (docs/integrity.md).

The digest is the sum of every output's bits, read as 32-bit words, in 64-bit integers: exact in any order,
one read of each output, and impossible to give without the outputs themselves. The worker sends it when the window closes; the parent recomputes it on the
outputs it collects afterwards.
"""
from __future__ import annotations

import torch

KEY_BITS = 63
MAX_DIGESTS = 16            # integers in one digest (one per device the outputs live on)


def _word_view(storage: torch.UntypedStorage) -> torch.Tensor:
    """The storage's whole 8-byte words as int64 (a tail of up to 7 bytes stays as it is)."""
    words = storage.nbytes() // 8
    return torch.empty(0, dtype=torch.int64, device=storage.device).set_(storage, 0, (words,), (1,))


class Keystream:
    """The storages of one window with everything unmasking them needs, prepared when they are staged, so that
    the window itself pays for two operations per device: drawing the keystream and one multi-tensor
    subtraction (a Python loop over every storage cost milliseconds of host time, and its jitter)."""

    def __init__(self, storages: list[torch.UntypedStorage]):
        groups: dict[str, list[torch.Tensor]] = {}
        for storage in storages:
            if storage.nbytes() >= 8:
                groups.setdefault(str(storage.device), []).append(_word_view(storage))
        self.groups = []
        for device, views in groups.items():
            stream = torch.empty(sum(v.numel() for v in views), dtype=torch.int64, device=device)
            slices, at = [], 0
            for view in views:
                slices.append(stream[at:at + view.numel()])
                at += view.numel()
            if stream.device.type == "cpu":
                # Fault every page in now, for writing (the staged inputs are a fresh mapping of shared memory,
                # the keystream fresh memory), so the window pays for arithmetic, not for the kernel's page
                # faults, as the clean worker's reused buffers do not.
                stream.zero_()
                torch._foreach_add_(views, 0)
            self.groups.append((device, views, stream, slices))

    def apply(self, key: int, unmask: bool):
        """Add (mask) or subtract (unmask) the keystream of `key`, modulo 2**64, in place."""
        for device, views, stream, slices in self.groups:
            generator = torch.Generator(device=device)
            generator.manual_seed(key)
            stream.random_(-2**63, None, generator=generator)
            (torch._foreach_sub_ if unmask else torch._foreach_add_)(views, slices)


def warm_up(device: str):
    """Run unmasking and the digest once on a few bytes of `device`: the first launch of a kernel loads it
    (lazily, in CUDA), which inside a window would be host time charged to it."""
    scratch = torch.zeros(64, dtype=torch.uint8, device=device)
    Keystream([scratch.untyped_storage()]).apply(1, unmask=True)
    digest([scratch, scratch[:3]])


def digest(tensors: list[torch.Tensor]) -> list[int]:
    """One integer per device: the sum, in int64, of the 32-bit words of every tensor's bytes laid end to end
    (padded to a whole word). Two operations per device whatever the number of tensors."""
    return [int(s) for s in digest_enqueue(tensors)]


def digest_enqueue(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """digest's sums as 0-dimensional tensors, enqueued and not yet read (reading one waits for the GPU)."""
    by_device: dict[str, list[torch.Tensor]] = {}
    for t in tensors:
        # contiguous first: a strided 1-D view (gemv's column of a wider buffer) has no byte view of its own
        by_device.setdefault(str(t.device), []).append(t.detach().contiguous().reshape(-1).view(torch.uint8))
    sums = []
    for device, parts in sorted(by_device.items()):
        flat = torch.cat(parts + [torch.zeros((-sum(p.numel() for p in parts)) % 4, dtype=torch.uint8,
                                              device=device)])
        sums.append(flat.view(torch.int32).sum(dtype=torch.int64))
    return sums


def scratch_like(layouts: list, device: str) -> list[torch.Tensor]:
    """Tensors laid out as another worker's outputs ([dtype name, shape, stride] each), for a window that
    computes nothing but must digest as much, the same way (a strided output costs its digest a copy)."""
    tensors = []
    for dtype_name, shape, stride in layouts:
        dtype = getattr(torch, str(dtype_name), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {str(dtype_name)[:40]!r}")
        tensors.append(torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device=device).zero_())
    return tensors


def layout_of(t: torch.Tensor) -> list:
    """What scratch_like needs to lay out a tensor as `t` is."""
    return [str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride())]
