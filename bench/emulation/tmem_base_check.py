"""A kernel that runs one CTA per SM and uses tensor memory from column 0 without reading tcgen05.alloc's result
(tests/blackwell/tmem_base_zero.cu), under --emulate-blackwell's runtime on a Hopper GPU: every CTA must read
back its own values with no emulation error, as on a B200, which hands out the lowest free columns.

    python3 bench/emulation/tmem_base_check.py [CTAS]     (default: 8 per SM)

Prints one JSON line: CTAs, CTAs whose 128 lanes read their own value, the emulation's error and warnings.
Exit 1 unless every CTA is right and no error was recorded.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "tmem_base_zero.cu")).read()
    module = load_inline("emulated_tmem_base_zero", cpp_sources="void run(torch::Tensor out);", cuda_sources=source,
                         functions=["run"], extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    ctas = int(sys.argv[1]) if len(sys.argv) > 1 else 8 * torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.zeros(ctas, dtype=torch.int32, device="cuda")
    err, error = io.StringIO(), ""
    with contextlib.redirect_stderr(err):
        module.run(out)
        torch.cuda.synchronize()
        try:
            runtime.raise_on_error()
        except runtime.EmulationError as e:
            error = str(e)
    right = int((out == 128).sum())
    print(json.dumps({"ctas": ctas, "right": right, "error": error, "warning": err.getvalue().strip()}))
    return 0 if right == ctas and not error else 1


if __name__ == "__main__":
    sys.exit(main())
