// The prologue of the pre-decoded-A design (docs/hopper_kernel.md, "Designs measured and dropped"): A (fp4, K-major,
// one e4m3 scale per 16 values) decoded once per call into fp16 a * s * 2^-7 (exact, as the kernel's decode),
// written K-major for TMA. Timing only (row-major scales here, not the blocked layout: the same bytes).
// Each thread turns 16 bytes of fp4 (32 values, two scales) into 64 bytes of fp16. Cold L2 (a 128 MB memset
// before every run, as the benchmarks do) and warm; median of 15, CUDA events.
// Build and run on the device: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a decode_prologue.cu -o d && ./d
#include <cuda_fp8.h>
#include <stdio.h>

#include "micro_common.cuh"   // dec<I>: the kernel's pair decode

__device__ __forceinline__ uint32_t scale2(uint32_t byte) {   // (s * 2^7, s * 2^7)
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(byte | (byte << 8)), __NV_E4M3);
  __half2 s = *reinterpret_cast<__half2*>(&h);
  s = __hmul2(s, __floats2half2_rn(128.f, 128.f));
  return *reinterpret_cast<uint32_t*>(&s);
}

__global__ void __launch_bounds__(256) decode_kernel(const uint4* __restrict__ a, const uint16_t* __restrict__ sf,
                                                     uint4* __restrict__ out, long long chunks) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < chunks; i += (long long)gridDim.x * 256) {
    const uint4 v = __ldcs(a + i);               // 32 values: 16 per scale
    const uint32_t s = __ldcs(sf + i);
    const uint32_t s0 = scale2(s & 0xFF), s1 = scale2(s >> 8);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[16];
#pragma unroll
    for (int q = 0; q < 4; ++q) {                // word q: values 8q..8q+7, pairs (n, n+4) in the kernel's order
      const uint32_t s2 = q < 2 ? s0 : s1;
      o[4 * q] = dec<0>(w[q], s2); o[4 * q + 1] = dec<1>(w[q], s2);
      o[4 * q + 2] = dec<2>(w[q], s2); o[4 * q + 3] = dec<3>(w[q], s2);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) out[4 * i + j] = make_uint4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
  }
}

// the e4m3-path decode (the kernel's), one word per thread: a warp writes 512
// contiguous bytes per store instruction (the version above writes 16 of every 64 per instruction)
__global__ void __launch_bounds__(256) decode_words_kernel(const uint32_t* __restrict__ a, const uint8_t* __restrict__ sf,
                                                           uint4* __restrict__ out, long long words) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < words; i += (long long)gridDim.x * 256) {
    const uint32_t w = __ldcs(a + i);
    const uint32_t s = __ldcs(sf + i / 2);
    uint32_t p[4];
    dec4_e4m3(w, scale2(s) /* (the factor differs: timing only) */, p);
    __stcs(out + i, make_uint4(p[0], p[1], p[2], p[3]));
  }
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  void* flush;
  cudaMalloc(&flush, 128 << 20);
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int rows : {1024, 2304, 4096}) {
    const long long K = 7168, vals = rows * K, chunks = vals / 32;
    void *a, *sf, *out;
    cudaMalloc(&a, vals / 2);
    cudaMemset(a, 0x5A, vals / 2);
    cudaMalloc(&sf, vals / 16);
    cudaMemset(sf, 0x38, vals / 16);
    cudaMalloc(&out, vals * 2);
    for (int words : {0, 1})
    for (int cold : {1, 0}) {
      const float us = median_us(16, [&](int rep) { if (cold) cudaMemsetAsync(flush, rep, 128 << 20); }, [&] {
        if (words) decode_words_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint32_t*)a, (const uint8_t*)sf,
                                                                               (uint4*)out, vals / 8);
        else decode_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint4*)a, (const uint16_t*)sf, (uint4*)out, chunks);
      });
      cudaError_t err = cudaGetLastError();
      printf("%-28s A %5d x %lld: %s L2 %7.1f us (%.0f MB read, %.0f MB written, %.2f TB/s) %s\n",
             words ? "e4m3, a word per thread:" : "bit decode, 16 B per thread:", rows, K, cold ? "cold" : "warm", us,
             (vals / 2 + vals / 16) / 1e6, vals * 2 / 1e6,
             (vals / 2 + vals / 16 + vals * 2) / (us * 1e-6) / 1e12, err == cudaSuccess ? "" : cudaGetErrorString(err));
    }
    cudaFree(a); cudaFree(sf); cudaFree(out);
  }
  return 0;
}
