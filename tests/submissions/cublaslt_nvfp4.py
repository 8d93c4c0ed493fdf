"""Look-alike of public nvfp4_gemm submissions that call cuBLASLt's block-scaled FP4 matmul from a load_inline CUDA
source (written here, not copied). cuBLASLt runs it only on a Blackwell GPU; under --emulate-blackwell the wrappers
of arena/blackwell/emulation_cublaslt.h run it on a Hopper GPU. This one takes cuBLAS's column-major "TN" form:
c^T (N x M, column-major) = op(b) op(a) with b transposed, so A' = b (scales sfb_permuted) and B' = a (scales
sfa_permuted), one matmul per batch."""
import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <stdexcept>

static void ok(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLASLt ") + what + ": " +
                                                                  std::to_string((int)status));
}

// c[:, :, l] = a[:, :, l] @ b[:, :, l]^T, with a (M, K/2, L) and b (N, K/2, L) packed FP4, c (M, N, L) fp16.
void fp4_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa_permuted, torch::Tensor sfb_permuted,
              torch::Tensor c) {
  static cublasLtHandle_t handle = nullptr;
  if (!handle) ok(cublasLtCreate(&handle), "create");
  const int64_t m = a.size(0), k = a.size(1) * 2, n = b.size(0), batches = c.size(2);
  const int64_t sfa_batch = sfa_permuted.numel() / batches, sfb_batch = sfb_permuted.numel() / batches;
  for (int64_t l = 0; l < batches; ++l) {
    cublasLtMatmulDesc_t op;
    ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)), "transa");
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof(plain)), "transb");
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)), "a mode");
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)), "b mode");
    // the layouts' batch lies outermost in the permuted scale tensors (L last, contiguous per batch)
    const void* scale_a = (const uint8_t*)sfb_permuted.data_ptr() + l * sfb_batch;
    const void* scale_b = (const uint8_t*)sfa_permuted.data_ptr() + l * sfa_batch;
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof(scale_a)), "a sp");
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof(scale_b)), "b sp");
    // a and b are K-contiguous with a row stride of K/2 * L bytes: column-major K x rows, ld = K * L elements
    cublasLtMatrixLayout_t la, lb, ld;
    ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_4F_E2M1, k, n, b.stride(0) * 2), "A");
    ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_4F_E2M1, k, m, a.stride(0) * 2), "B");
    ok(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, n, m, c.stride(0)), "D");
    cublasLtMatmulPreference_t preference;
    ok(cublasLtMatmulPreferenceCreate(&preference), "preference");
    cublasLtMatmulHeuristicResult_t found = {};
    int count = 0;
    ok(cublasLtMatmulAlgoGetHeuristic(handle, op, la, lb, ld, ld, preference, 1, &found, &count), "heuristic");
    if (count == 0) throw std::runtime_error("cuBLASLt: no algorithm");
    const float alpha = 1.0f, beta = 0.0f;
    const uint8_t* pa = (const uint8_t*)a.data_ptr() + l * a.stride(2);
    const uint8_t* pb = (const uint8_t*)b.data_ptr() + l * b.stride(2);
    __half* pc = (__half*)c.data_ptr() + l * c.stride(2);
    ok(cublasLtMatmul(handle, op, &alpha, pb, la, pa, lb, &beta, pc, ld, pc, ld, &found.algo, nullptr, 0, 0), "matmul");
    cublasLtMatmulPreferenceDestroy(preference);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
  }
}
"""

module = load_inline("cublaslt_nvfp4_lookalike", cpp_sources="void fp4_gemm(torch::Tensor a, torch::Tensor b, "
                     "torch::Tensor sfa_permuted, torch::Tensor sfb_permuted, torch::Tensor c);",
                     cuda_sources=CUDA_SOURCE, functions=["fp4_gemm"],     # cuBLASLt: torch has it loaded
                     extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])


def custom_kernel(data: input_t) -> output_t:
    a, b, _, _, sfa_permuted, sfb_permuted, c = data
    module.fp4_gemm(a.view(torch.uint8), b.view(torch.uint8), sfa_permuted, sfb_permuted, c)
    return c
