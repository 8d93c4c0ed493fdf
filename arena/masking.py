"""Timed inputs the worker cannot use before its window opens, and a digest proving its outputs existed when
the window closed. Both sides of a timed window use it: arena/runner.py (parent) and arena/worker.py.

The parent stages a window's inputs in the worker XOR-ed with a keystream drawn from a secret 63-bit key
(torch's own generator on the storage's device: Philox on a GPU, Mersenne Twister on the CPU, so the parent and
the worker draw the same bytes). Only the request that opens the window carries the key, so nothing the
submission does before that request, with or without the harness, can compute a result: the parent's clock,
started when it sends the key, covers all the work on the real inputs (docs/integrity.md).

The digest is the sum of every output's bits, read as 32-bit words (bytes where a tensor's size is not a
multiple of 4), in 64-bit integers: exact in any order, one read of each output, and impossible to give
without the outputs themselves. The worker sends it when the window closes; the parent recomputes it on the
outputs it collects afterwards.
"""
from __future__ import annotations

import torch

KEY_BITS = 63
MAX_DIGESTS = 4096          # tensors in one window's outputs that the parent accepts a digest for


def _byte_view(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage, 0, (storage.nbytes(),), (1,))


def xor_keystream_(storages: list[torch.UntypedStorage], key: int) -> None:
    """XOR every storage, in order, with the keystream of `key` (in place; applying it twice restores the
    bytes). One generator per device, seeded with the key: storage i gets the bytes that follow storage i-1's
    on its device, so no two storages share keystream bytes."""
    generators: dict[str, torch.Generator] = {}
    for storage in storages:
        size = storage.nbytes()
        if not size:
            continue
        device = storage.device
        generator = generators.get(str(device))
        if generator is None:
            generator = generators[str(device)] = torch.Generator(device=device)
            generator.manual_seed(key)
        data = _byte_view(storage)
        body = size // 8 * 8
        if body:
            stream = torch.empty(body // 8, dtype=torch.int64, device=device).random_(-2**63, None,
                                                                                   generator=generator)
            data[:body].view(torch.int64).bitwise_xor_(stream)
        if size > body:
            tail = torch.empty(size - body, dtype=torch.int64, device=device).random_(0, 256, generator=generator)
            data[body:].bitwise_xor_(tail.to(torch.uint8))


def digest(tensors: list[torch.Tensor]) -> list[int]:
    """One integer per tensor: the sum of its bits as 32-bit words (or bytes), in int64."""
    sums = []
    for t in tensors:
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
        words = flat.view(torch.int32) if flat.numel() % 4 == 0 else flat
        sums.append(words.sum(dtype=torch.int64))
    return [int(s) for s in sums]       # one synchronization, after every sum is enqueued


def scratch_for(sizes: list[int], device: str) -> list[torch.Tensor]:
    """Buffers of the given byte sizes, for a window that computes nothing but must digest as much."""
    return [torch.zeros(int(n), dtype=torch.uint8, device=device) for n in sizes]
