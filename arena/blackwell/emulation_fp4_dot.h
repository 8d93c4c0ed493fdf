// The arithmetic of cuBLASLt's block-scaled FP4 matmul as emulation_cublaslt.h runs it, apart from cuBLASLt so that
// a host build checks it (tests/test_blackwell_emulation.py, against torch on the CPU): one element of
// op(A) op(B), each FP4 element times its 16-element block's UE4M3 scale, in float.
#pragma once
#include <math.h>
#include <stdint.h>
#ifndef __CUDACC__
#define __host__
#define __device__
#endif

struct __nvfp4emu_lt_matrix {        // one stored FP4 operand: two elements a byte, the first in the low nibble
  const uint8_t* data;
  int64_t ld;
  int row_order, trans;              // CUBLASLT_ORDER_ROW (else column-major); op(X) = X^T
};

__host__ __device__ inline float __nvfp4emu_lt_e2m1(uint32_t code) {
  const float magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8u) ? -magnitude[code & 7u] : magnitude[code & 7u];
}

__host__ __device__ inline float __nvfp4emu_lt_ue4m3(uint32_t bits) {
  const uint32_t e = (bits >> 3) & 15u, m = bits & 7u;
  if (e == 15u && m == 7u) return NAN;
  return e ? ldexpf(1.0f + m / 8.0f, (int)e - 7) : ldexpf(m / 8.0f, -6);
}

// Element (outer, k) of the operand whose outer dimension (M of op(A), N of op(B)) is the stored matrix's rows
// when `outer_is_rows`, else its columns.
__host__ __device__ inline float __nvfp4emu_lt_fp4_at(const __nvfp4emu_lt_matrix& x, int64_t outer, int64_t k,
                                                      bool outer_is_rows) {
  const int64_t r = outer_is_rows ? outer : k, c = outer_is_rows ? k : outer;
  const int64_t i = x.row_order ? r * x.ld + c : r + c * x.ld;
  return __nvfp4emu_lt_e2m1((x.data[i >> 1] >> ((i & 1) * 4)) & 15u);
}

// The scale of outer row `row`, K block `block`, in the 128x4-tiled layout (reference.py's to_blocked).
__host__ __device__ inline float __nvfp4emu_lt_scale(const uint8_t* scales, int64_t row, int64_t block, int64_t k) {
  const int64_t col_blocks = (k + 63) / 64;
  return __nvfp4emu_lt_ue4m3(scales[((row / 128) * col_blocks + block / 4) * 512 + (row % 32) * 16 +
                                    ((row % 128) / 32) * 4 + block % 4]);
}

// (op(A) op(B))[m, n]: op(A) is M x K, its outer row m is a row of A unless A is transposed; op(B) is K x N, its
// outer n a row of B when B is transposed (op(B) = B^T).
__host__ __device__ inline float __nvfp4emu_lt_dot(const __nvfp4emu_lt_matrix& a, const __nvfp4emu_lt_matrix& b,
                                                   const uint8_t* scale_a, const uint8_t* scale_b, int64_t m,
                                                   int64_t n, int64_t k_count) {
  float acc = 0.0f;
  for (int64_t block = 0; block < k_count / 16; ++block) {
    float sum = 0.0f;
    for (int64_t k = block * 16; k < block * 16 + 16; ++k)
      sum += __nvfp4emu_lt_fp4_at(a, m, k, !a.trans) * __nvfp4emu_lt_fp4_at(b, n, k, b.trans);
    acc += sum * __nvfp4emu_lt_scale(scale_a, m, block, k_count) * __nvfp4emu_lt_scale(scale_b, n, block, k_count);
  }
  return acc;
}
