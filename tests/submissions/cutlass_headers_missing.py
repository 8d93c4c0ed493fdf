"""A look-alike CUTLASS submission: a load_inline source that includes CUTLASS headers. Where nvidia-cutlass is
not installed, its build fails; `test` names the missing headers and the install command, as `compile` does."""
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>

__global__ void gemv_kernel(const float* a, const float* x, float* y, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.f;
    for (int k = 0; k < n; ++k) sum += a[row * n + k] * x[k];
    y[row] = sum;
}

torch::Tensor gemv(torch::Tensor a, torch::Tensor x) {
    auto y = torch::empty({a.size(0)}, a.options());
    gemv_kernel<<<a.size(0) / 128, 128>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(),
                                          a.size(1));
    return y;
}
"""

CPP_SRC = "torch::Tensor gemv(torch::Tensor a, torch::Tensor x);"

module = load_inline(name="gemv_cuda", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["gemv"],
                     extra_cuda_cflags=["-O3"], verbose=False)


def custom_kernel(data):
    a, b, sfa, sfb, sfa_permuted, sfb_permuted, c = data
    return c
