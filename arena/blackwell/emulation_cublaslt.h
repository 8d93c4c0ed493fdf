// Force-included (after emulation_host.h) into a CUDA source built under --emulate-blackwell that names cuBLASLt
// (arena/blackwell/shims.py decides). cuBLASLt runs its block-scaled FP4 matmul (A and B of CUDA_R_4F_E2M1 with
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 scales) only on a Blackwell GPU: on a Hopper GPU the heuristic finds no
// algorithm and the matmul returns CUBLAS_STATUS_NOT_SUPPORTED. Here the source's calls reach wrappers (the macros at
// the end) that pass everything else to cuBLASLt and run such a matmul in a plain CUDA kernel of their own:
//   D = alpha * op(A) op(B) + beta * C, each element of A and B times its 16-element block's UE4M3 scale, sums in
//   float, D and C of CUDA_R_16F, CUDA_R_16BF or CUDA_R_32F.
// Layouts as cuBLASLt reads them: a matrix of `rows` x `cols` with leading dimension `ld`, column-major unless
// CUBLASLT_MATRIX_LAYOUT_ORDER says CUBLASLT_ORDER_ROW; two FP4 elements a byte, the first in the low nibble;
// op(X) = X or its transpose (CUBLASLT_MATMUL_DESC_TRANSA/B). The scales of op(A) (M x K/16) and of op(B)^T (N x
// K/16) in the 128x4-tiled layout that torch._scaled_mm passes (reference.py's to_blocked): the scale of outer
// row r and block c at ((r / 128) * ceil(K / 64) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
// What the wrappers do not model (a batch, an epilogue, a bias, scale modes other than VEC16_UE4M3 on FP4, alpha and
// beta on the device) returns CUBLAS_STATUS_NOT_SUPPORTED and prints one line naming it.
#pragma once
#include <cublasLt.h>
#include <stdio.h>
#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "emulation_fp4_dot.h"

#define NVFP4EMU_LT_SLOTS 64

struct __nvfp4emu_lt_layout_t {
  const void* handle;
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int row_order, batch;
};
struct __nvfp4emu_lt_desc_t {
  const void* handle;
  int trans_a, trans_b, scale_mode_a, scale_mode_b, device_pointers;
  const void *scale_a, *scale_b;
  const char* unmodeled;      // the first attribute set that the FP4 path does not model
};
static __nvfp4emu_lt_layout_t __nvfp4emu_lt_layouts[NVFP4EMU_LT_SLOTS];
static __nvfp4emu_lt_desc_t __nvfp4emu_lt_descs[NVFP4EMU_LT_SLOTS];

template <typename T>
static T* __nvfp4emu_lt_find(T* table, const void* handle) {
  for (int i = 0; i < NVFP4EMU_LT_SLOTS; ++i)
    if (table[i].handle == handle) return &table[i];
  return 0;
}
// A fresh record for a handle cuBLASLt just created (a freed handle's record at the same address is dropped).
template <typename T>
static T* __nvfp4emu_lt_fresh(T* table, const void* handle) {
  T* slot = __nvfp4emu_lt_find(table, handle);
  if (!slot) slot = __nvfp4emu_lt_find(table, (const void*)0);
  if (!slot) slot = &table[(uintptr_t)handle / 64 % NVFP4EMU_LT_SLOTS];   // full: reuse one
  *slot = T();
  slot->handle = handle;
  return slot;
}
static __nvfp4emu_lt_layout_t* __nvfp4emu_lt_layout(cublasLtMatrixLayout_t l) {
  return __nvfp4emu_lt_find(__nvfp4emu_lt_layouts, (const void*)l);
}
static __nvfp4emu_lt_desc_t* __nvfp4emu_lt_desc(cublasLtMatmulDesc_t d) {
  return __nvfp4emu_lt_find(__nvfp4emu_lt_descs, (const void*)d);
}

static cublasStatus_t __nvfp4emu_lt_layout_create(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows,
                                                  uint64_t cols, int64_t ld) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(l, type, rows, cols, ld);
  if (s == CUBLAS_STATUS_SUCCESS) {
    __nvfp4emu_lt_layout_t* r = __nvfp4emu_lt_fresh(__nvfp4emu_lt_layouts, (const void*)*l);
    r->type = type; r->rows = rows; r->cols = cols; r->ld = ld; r->batch = 1;
  }
  return s;
}

static cublasStatus_t __nvfp4emu_lt_layout_set(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                               const void* buf, size_t size) {
  __nvfp4emu_lt_layout_t* r = __nvfp4emu_lt_layout(l);
  if (r && attr == CUBLASLT_MATRIX_LAYOUT_ORDER && size >= sizeof(int32_t))
    r->row_order = *(const int32_t*)buf == (int32_t)CUBLASLT_ORDER_ROW;
  if (r && attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size >= sizeof(int32_t)) r->batch = *(const int32_t*)buf;
  return cublasLtMatrixLayoutSetAttribute(l, attr, buf, size);
}

static cublasStatus_t __nvfp4emu_lt_desc_create(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                                cudaDataType scale_type) {
  cublasStatus_t s = cublasLtMatmulDescCreate(d, compute, scale_type);
  if (s == CUBLAS_STATUS_SUCCESS) {
    __nvfp4emu_lt_desc_t* r = __nvfp4emu_lt_fresh(__nvfp4emu_lt_descs, (const void*)*d);
    if (compute != CUBLAS_COMPUTE_32F || scale_type != CUDA_R_32F) r->unmodeled = "a compute or scale type other than 32F";
  }
  return s;
}

static cublasStatus_t __nvfp4emu_lt_desc_set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                             const void* buf, size_t size) {
  cublasStatus_t s = cublasLtMatmulDescSetAttribute(d, attr, buf, size);
  __nvfp4emu_lt_desc_t* r = __nvfp4emu_lt_desc(d);
  if (!r) return s;
  const int32_t value = size >= sizeof(int32_t) ? *(const int32_t*)buf : 0;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: r->trans_a = value != (int32_t)CUBLAS_OP_N; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: r->trans_b = value != (int32_t)CUBLAS_OP_N; break;
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: r->scale_mode_a = value; return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: r->scale_mode_b = value; return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: r->scale_a = *(const void* const*)buf; return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: r->scale_b = *(const void* const*)buf; return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: r->device_pointers = value != (int32_t)CUBLASLT_POINTER_MODE_HOST; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      if (value != (int32_t)CUBLASLT_EPILOGUE_DEFAULT && !r->unmodeled) r->unmodeled = "an epilogue";
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (*(const void* const*)buf && !r->unmodeled) r->unmodeled = "a bias";
      break;
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
      if (*(const void* const*)buf && !r->unmodeled) r->unmodeled = "a C or D scale, or an amax of D";
      break;
    default: break;      // fast accumulation, SM counts and the like change no value
  }
  return s;
}

static bool __nvfp4emu_lt_is_fp4(cublasLtMatrixLayout_t l) {
  const __nvfp4emu_lt_layout_t* r = __nvfp4emu_lt_layout(l);
  return r && r->type == CUDA_R_4F_E2M1;
}

static cublasStatus_t __nvfp4emu_lt_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t* results, int* count) {
  if (!__nvfp4emu_lt_is_fp4(a) && !__nvfp4emu_lt_is_fp4(b))
    return cublasLtMatmulAlgoGetHeuristic(h, d, a, b, c, dl, pref, requested, results, count);
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  memset(&results[0], 0, sizeof(results[0]));      // the emulation's one algorithm: no workspace
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static __device__ __forceinline__ void __nvfp4emu_lt_store(void* d, cudaDataType type, int64_t i, float v) {
  if (type == CUDA_R_16F) ((__half*)d)[i] = __float2half_rn(v);
  else if (type == CUDA_R_16BF) ((__nv_bfloat16*)d)[i] = __float2bfloat16_rn(v);
  else ((float*)d)[i] = v;
}
static __device__ __forceinline__ float __nvfp4emu_lt_load(const void* c, cudaDataType type, int64_t i) {
  if (type == CUDA_R_16F) return __half2float(((const __half*)c)[i]);
  if (type == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16*)c)[i]);
  return ((const float*)c)[i];
}

// One thread per element of D (m, n).
static __global__ void __nvfp4emu_lt_fp4_gemm(__nvfp4emu_lt_matrix a, __nvfp4emu_lt_matrix b, const uint8_t* scale_a,
                                              const uint8_t* scale_b, int64_t m_count, int64_t n_count, int64_t k_count,
                                              float alpha, float beta, const void* c, cudaDataType c_type, int64_t ldc,
                                              int c_rows, void* d, cudaDataType d_type, int64_t ldd, int d_rows) {
  const int64_t m = blockIdx.y * (int64_t)blockDim.y + threadIdx.y, n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m >= m_count || n >= n_count) return;
  float out = alpha * __nvfp4emu_lt_dot(a, b, scale_a, scale_b, m, n, k_count);
  if (beta != 0.0f) out += beta * __nvfp4emu_lt_load(c, c_type, c_rows ? m * ldc + n : m + n * ldc);
  __nvfp4emu_lt_store(d, d_type, d_rows ? m * ldd + n : m + n * ldd, out);
}

// FP4 matmuls run here since the last take: the B200 time model predicts such a call from cuBLASLt's public B200
// times, never from this kernel's time on the Hopper GPU (arena/predict/b200.py). Weak: one counter for every
// source of the module that includes this header.
extern "C" __attribute__((weak, visibility("default"))) unsigned int __nvfp4emu_lt_fp4_calls = 0;
extern "C" __attribute__((weak, visibility("default"))) unsigned int __nvfp4emu_take_lt_fp4_calls() {
  const unsigned int calls = __nvfp4emu_lt_fp4_calls;
  __nvfp4emu_lt_fp4_calls = 0;
  return calls;
}

static cublasStatus_t __nvfp4emu_lt_unmodeled(const char* what) {
  fprintf(stderr, "emulate-blackwell: cuBLASLt's block-scaled FP4 matmul with %s is not emulated\n", what);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

static cublasStatus_t __nvfp4emu_lt_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha,
                                           const void* a, cublasLtMatrixLayout_t al, const void* b,
                                           cublasLtMatrixLayout_t bl, const void* beta, const void* c,
                                           cublasLtMatrixLayout_t cl, void* d, cublasLtMatrixLayout_t dl,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_size,
                                           cudaStream_t stream) {
  if (!__nvfp4emu_lt_is_fp4(al) && !__nvfp4emu_lt_is_fp4(bl))
    return cublasLtMatmul(h, desc, alpha, a, al, b, bl, beta, c, cl, d, dl, algo, workspace, workspace_size, stream);
  const __nvfp4emu_lt_desc_t* r = __nvfp4emu_lt_desc(desc);
  const __nvfp4emu_lt_layout_t *A = __nvfp4emu_lt_layout(al), *B = __nvfp4emu_lt_layout(bl),
                               *C = __nvfp4emu_lt_layout(cl), *D = __nvfp4emu_lt_layout(dl);
  if (!r || !A || !B || !C || !D) return __nvfp4emu_lt_unmodeled("a descriptor created outside this source");
  if (r->unmodeled) return __nvfp4emu_lt_unmodeled(r->unmodeled);
  if (A->type != CUDA_R_4F_E2M1 || B->type != CUDA_R_4F_E2M1) return __nvfp4emu_lt_unmodeled("FP4 on one side only");
  if (r->scale_mode_a != (int)CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 ||
      r->scale_mode_b != (int)CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 || !r->scale_a || !r->scale_b)
    return __nvfp4emu_lt_unmodeled("scales other than VEC16_UE4M3 on A and B");
  if (A->batch != 1 || B->batch != 1 || C->batch != 1 || D->batch != 1) return __nvfp4emu_lt_unmodeled("a batch");
  if (r->device_pointers) return __nvfp4emu_lt_unmodeled("alpha and beta on the device");
  const __nvfp4emu_lt_layout_t* outputs[2] = {C, D};
  for (const __nvfp4emu_lt_layout_t* x : outputs)
    if (x->type != CUDA_R_16F && x->type != CUDA_R_16BF && x->type != CUDA_R_32F)
      return __nvfp4emu_lt_unmodeled("C or D of a type other than 16F, 16BF or 32F");
  const int64_t m_count = r->trans_a ? A->cols : A->rows, k_count = r->trans_a ? A->rows : A->cols;
  const int64_t n_count = r->trans_b ? B->rows : B->cols, k_b = r->trans_b ? B->cols : B->rows;
  if (k_b != k_count || (int64_t)D->rows != m_count || (int64_t)D->cols != n_count || k_count % 16)
    return CUBLAS_STATUS_INVALID_VALUE;
  const __nvfp4emu_lt_matrix ma = {(const uint8_t*)a, A->ld, A->row_order, r->trans_a};
  const __nvfp4emu_lt_matrix mb = {(const uint8_t*)b, B->ld, B->row_order, r->trans_b};
  const dim3 threads(32, 8), blocks((unsigned)((n_count + 31) / 32), (unsigned)((m_count + 7) / 8));
  __nvfp4emu_lt_fp4_calls++;
  __nvfp4emu_lt_fp4_gemm<<<blocks, threads, 0, stream>>>(
      ma, mb, (const uint8_t*)r->scale_a, (const uint8_t*)r->scale_b, m_count, n_count, k_count, *(const float*)alpha,
      *(const float*)beta, c, C->type, C->ld, C->row_order, d, D->type, D->ld, D->row_order);
  return cudaGetLastError() == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

#define cublasLtMatrixLayoutCreate __nvfp4emu_lt_layout_create
#define cublasLtMatrixLayoutSetAttribute __nvfp4emu_lt_layout_set
#define cublasLtMatmulDescCreate __nvfp4emu_lt_desc_create
#define cublasLtMatmulDescSetAttribute __nvfp4emu_lt_desc_set
#define cublasLtMatmulAlgoGetHeuristic __nvfp4emu_lt_heuristic
#define cublasLtMatmul __nvfp4emu_lt_matmul
