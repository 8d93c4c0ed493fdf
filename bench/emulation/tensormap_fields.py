"""Where the driver puts each field of a tiled CUtensorMap (the 128-byte TMA descriptor, whose format is not
documented): encodes maps that differ from a base map in one argument and prints which 32-bit words change.

Needs a GPU machine's driver (libcuda). `python3 bench/emulation/tensormap_fields.py` prints, per argument
value, the changed words as `word: base -> new`, then one JSON line with every map's words (for offline study).
The emulation uses the result to turn a packed-FP4 map that a CuTe DSL kernel encodes itself into the same
bytes as UINT8 (arena/blackwell/tcgen05_library.cu, __nvfp4emu_tma_map).
"""
from __future__ import annotations

import ctypes
import json

import torch

cuda = ctypes.CDLL("libcuda.so.1")
u64, u32 = ctypes.c_uint64, ctypes.c_uint32


def encode(dtype=0, dims=(4096, 512), strides=(4096,), box=(128, 64), estrides=(1, 1), swizzle=3, l2=0, oob=0,
           address=None, interleave=0) -> tuple[int, list[int]]:
    rank = len(dims)
    out = (ctypes.c_uint32 * 32)()
    result = cuda.cuTensorMapEncodeTiled(
        ctypes.byref(out), ctypes.c_int(dtype), u32(rank), ctypes.c_void_p(address),
        (u64 * rank)(*dims), (u64 * max(rank - 1, 1))(*strides), (u32 * rank)(*box), (u32 * rank)(*estrides),
        ctypes.c_int(interleave), ctypes.c_int(swizzle), ctypes.c_int(l2), ctypes.c_int(oob))
    return result, list(out)


def main() -> None:
    cuda.cuInit(0)
    buffer = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    base_address = (buffer.data_ptr() + 4095) & ~4095
    base_args = dict(address=base_address)
    code, base = encode(**base_args)
    print("base", code, " ".join(f"{w:08x}" for w in base))
    variants = {
        "dtype": [dict(dtype=t, box=(32, 64)) for t in range(16)],
        "dim0": [dict(dims=(d, 512)) for d in (4095, 4097, 8192, 256, 1 << 20)],
        "dim1": [dict(dims=(4096, d)) for d in (511, 513, 1024, 1)],
        "stride1": [dict(strides=(s,)) for s in (4112, 8192, 1 << 20)],
        "box0": [dict(box=(b, 64)) for b in (16, 32, 64, 112)],
        "box1": [dict(box=(128, b)) for b in (1, 2, 63, 128, 256)],
        "swizzle": [dict(swizzle=s, box=(16 if s == 0 else 128, 64)) for s in (0, 1, 2)],
        "address": [dict(address=base_address + d) for d in (16, 256, 4096, 1 << 20)],
        "estride0": [dict(estrides=(2, 1))],
        "l2": [dict(l2=v) for v in (1, 2, 3)],
        "oob": [dict(oob=1)],
        "rank3": [dict(dims=(4096, 512, 4), strides=(4096, 4096 * 512), box=(128, 64, 1), estrides=(1, 1, 1)),
                  dict(dims=(4096, 512, 7), strides=(4096, 4096 * 512), box=(128, 64, 1), estrides=(1, 1, 1))],
        # rank 5, one box extent at a time beyond the first two: where box2-box4 live (a CuTe DSL map leaves
        # word 16 at 0, so the emulation sums a box's bytes from these fields)
        "rank5": [dict(dims=(256, 16, 16, 16, 16), strides=(256, 4096, 65536, 1 << 20), box=box, estrides=(1,) * 5)
                  for box in ((32, 4, 1, 1, 1), (32, 4, 3, 1, 1), (32, 4, 1, 5, 1), (32, 4, 1, 1, 7), (32, 4, 2, 3, 4),
                              (32, 4, 16, 16, 16))],
    }
    dump = {"base": base}
    for name, changes in variants.items():
        for change in changes:
            args = {**base_args, **change}
            code, words = encode(**args)
            label = f"{name} {change}"
            dump[label] = [code] + words
            if code != 0:
                print(f"{label}: error {code}")
                continue
            diff = [f"w{i}: {b:08x} -> {w:08x}" for i, (b, w) in enumerate(zip(base, words)) if b != w]
            fields = " ".join(f"w{i}={words[i]:08x}" for i in (2, 13, 14, 15, 16))
            print(f"{label}: " + ("; ".join(diff) or "no change") + f" | {fields}")
    print(json.dumps(dump))


if __name__ == "__main__":
    main()
