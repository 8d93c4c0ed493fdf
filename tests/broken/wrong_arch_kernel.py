"""A CUDA kernel built for Blackwell only (sm_100a) and launched with <<<>>> without checking the launch:
on any other GPU it never runs, c keeps its pre-filled values and the launch error waits in CUDA's
last-error state. (GPU only: it needs nvcc and a GPU that is not sm_100.)"""
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void fill_kernel(at::Half* c, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) c[i] = at::Half(1.0f);
}
void fill(torch::Tensor c) {
  fill_kernel<<<(c.numel() + 255) / 256, 256>>>(c.data_ptr<at::Half>(), c.numel());   // error not checked
}
"""
_module = None


def custom_kernel(data):
    global _module
    if _module is None:
        _module = load_inline(name="wrong_arch_fill", cpp_sources=["void fill(torch::Tensor c);"],
                              cuda_sources=[CUDA], functions=["fill"],
                              extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
    c = data[-1]
    _module.fill(c)
    return c
