"""Look-alike of the many public nvfp4_gemm submissions built on torch._scaled_mm (written here, not copied):
imports `to_blocked` from the task's reference, loops over L, writes into c. Runs where NVFP4 _scaled_mm exists
(sm_100+) and, through the worker's exact emulation, on a CPU or a Hopper GPU."""
import torch

from reference import to_blocked
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    for l in range(c.shape[2]):
        c[:, :, l] = torch._scaled_mm(a[:, :, l], b[:, :, l].transpose(0, 1), to_blocked(sfa[:, :, l]),
                                      to_blocked(sfb[:, :, l]), bias=None, out_dtype=torch.float16)
    return c
