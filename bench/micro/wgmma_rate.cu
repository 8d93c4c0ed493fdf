// How fast can the Hopper kernel's instruction mix run the tensor cores, with no loads at all? Two consumer
// warpgroups per CTA (one CTA per SM, every SM) issue wgmma.m64nNk16 f16 -> f32 over a fixed shared-memory
// operand, in groups of 4 with wait_group 1 between register buffers, as kernels/sm90 does. Variants:
//   RS / SS:   A fragment from registers (the shipped kernel) or from shared memory
//   N, MB:     n128 with MB m64 blocks per warpgroup (MB = 2: the 256-row tile) or n256 with one block
//   decode:    each group's fragments decoded from fp4 words read from shared memory first (the consumer's
//              bit placement + scale multiply), so the issue cost of the decode sits between the wgmmas
// Prints TFLOP/s (median of 7, CUDA events). Build and run on the device:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a wgmma_rate.cu -o w && ./w
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <vector>

__device__ __forceinline__ uint32_t su(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

#define ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define R64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, " \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

__device__ __forceinline__ void mma128_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " R64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void mma128_ss(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56)
               : "l"(a), "l"(b));
}
// n256: two 64-register halves of one accumulator, passed as one 128-register operand list
#define R128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, " \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, " \
  "%85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, " \
  "%105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
  "%123, %124, %125, %126, %127}"
__device__ __forceinline__ void mma256_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " R128 ", {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
               : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
                 ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void mma256_ss(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " R128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
                 ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
               : "l"(a), "l"(b));
}

// the consumer's decode: fp4 pair (nibbles I, I+4 of w) -> fp16x2 * scale
template <int I>
__device__ __forceinline__ uint32_t dec(uint32_t w, uint32_t s2) {
  uint32_t mag = (I * 4 <= 9 ? (w << (9 - 4 * I)) : (w >> (4 * I - 9))) & 0x0E000E00u;
  uint32_t r = mag | ((w << (12 - 4 * I)) & 0x80008000u);
  __half2 h = __hmul2(*reinterpret_cast<__half2*>(&r), *reinterpret_cast<__half2*>(&s2));
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}

constexpr int THREADS = 256;    // two consumer warpgroups
constexpr int OPERAND_BYTES = 65536;   // B operand: up to 256 rows x 128 k fp16 (two 128B-swizzled atoms)

// One warpgroup's loop: `iters` k-blocks of 16 k16 steps per m64 block (128 k, as a stage of the kernel).
template <int N, int MB, bool RS, bool DECODE>
__global__ void __launch_bounds__(THREADS, 1) rate_kernel(int iters, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (su(smem_raw) & 1023)) & 1023);
  for (int i = threadIdx.x; i < OPERAND_BYTES / 4 + 4096; i += THREADS)
    ((uint32_t*)smem)[i] = 0x3C003C00u ^ (i * 0x9E3779B9u & 0x03FF03FFu);   // fp16 values near 1
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint32_t base = su(smem);
  const uint64_t bdesc = sw128_desc(base);
  const uint64_t adesc = sw128_desc(base + 32768);   // SS: an A tile over the same bytes (values do not matter)
  const int lane = threadIdx.x & 31;
  constexpr int ACC = N / 2;
  float acc[MB][ACC];
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < ACC; ++i) asm volatile("mov.b32 %0, 0;" : "=f"(acc[b][i]));   // (with a plain 0.f, ptxas
                                                                                  // serialized the MB 1 and n256 wgmmas: C7514)
  uint32_t frag[2][4][4];
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int r = 0; r < 4; ++r) frag[u][k][r] = 0x3C003C00u ^ (threadIdx.x * 131 + u * 7 + k * 3 + r);
  const uint32_t words = base + OPERAND_BYTES + 64 * lane;   // fp4 words the decode reads
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int b = 0; b < MB; ++b) {
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {   // two groups of 4 k16 steps per scale column pair, as the kernel
        wait<1>();   // the group that last read frag[gi] is done
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)   // (re)written after the wait, as the kernel's fragments are
          asm volatile("" : "+r"(frag[gi][kk][0]), "+r"(frag[gi][kk][1]), "+r"(frag[gi][kk][2]), "+r"(frag[gi][kk][3]) :: "memory");
        if (DECODE) {
          uint32_t w[4];   // rows g and g + 8, words q and q + 1 of the stage (kk 0-1 and 2-3)
#pragma unroll
          for (int i = 0; i < 4; ++i) w[i] = lds32(words + 4 * ((it + gi + i) & 15));
          const uint32_t s2 = lds32(words + 4 * ((it + gi + 4) & 15)) | 0x3C003C00u;   // a scale pair
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            const uint32_t w0 = w[(kk >> 1) * 2], w1 = w[(kk >> 1) * 2 + 1];
            if ((kk & 1) == 0) {
              frag[gi][kk][0] = dec<0>(w0, s2); frag[gi][kk][1] = dec<0>(w1, s2);
              frag[gi][kk][2] = dec<1>(w0, s2); frag[gi][kk][3] = dec<1>(w1, s2);
            } else {
              frag[gi][kk][0] = dec<2>(w0, s2); frag[gi][kk][1] = dec<2>(w1, s2);
              frag[gi][kk][2] = dec<3>(w0, s2); frag[gi][kk][3] = dec<3>(w1, s2);
            }
          }
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)   // every fragment of the group complete before the fence
          asm volatile("" :: "r"(frag[gi][kk][0]), "r"(frag[gi][kk][1]), "r"(frag[gi][kk][2]), "r"(frag[gi][kk][3]) : "memory");
        fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const uint64_t bd = bdesc + (uint64_t)(((gi * 16384) + kk * 32) >> 4);
          if constexpr (N == 128) {
            if constexpr (RS) mma128_rs(acc[b], frag[gi][kk], bd);
            else mma128_ss(acc[b], adesc + (uint64_t)((kk * 32) >> 4), bd);
          } else {
            if constexpr (RS) mma256_rs(acc[b], frag[gi][kk], bd);
            else mma256_ss(acc[b], adesc + (uint64_t)((kk * 32) >> 4), bd);
          }
        }
        commit();
      }
    }
  }
  wait<0>();
  float s = 0.f;
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < ACC; ++i) s += acc[b][i];
  if (s == 12345.f) sink[threadIdx.x] = s;   // keeps the accumulators live
}

template <int N, int MB, bool RS, bool DECODE>
void run(const char* name, int sms, float* sink) {
  auto k = rate_kernel<N, MB, RS, DECODE>;
  const int smem = OPERAND_BYTES + 16384 + 1024;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int iters = 4000;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int rep = 0; rep < 8; ++rep) {
    cudaEventRecord(e0);
    k<<<sms, THREADS, smem>>>(iters, sink);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    if (rep) ms.push_back(t);   // the first is a warm-up
  }
  cudaError_t err = cudaGetLastError();
  std::sort(ms.begin(), ms.end());
  const double flop = 2.0 * sms * 2 /*warpgroups*/ * (double)iters * MB * 8 /*k16 steps*/ * 64 * N * 16;
  printf("%-34s %8.1f TFLOP/s  (%.3f ms)%s\n", name, flop / (ms[ms.size() / 2] * 1e-3) / 1e12, ms[ms.size() / 2],
         err == cudaSuccess ? "" : cudaGetErrorString(err));
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int sms = prop.multiProcessorCount;
  float* sink;
  cudaMalloc(&sink, THREADS * sizeof(float));
  printf("%s, %d SMs; 2 warpgroups x wgmma groups of 4, wait_group 1\n", prop.name, sms);
  run<128, 2, true, false>("RS m64n128k16, MB 2", sms, sink);
  run<128, 2, true, true>("RS m64n128k16, MB 2, + decode", sms, sink);
  run<128, 1, true, false>("RS m64n128k16, MB 1", sms, sink);
  run<128, 1, true, true>("RS m64n128k16, MB 1, + decode", sms, sink);
  run<128, 2, false, false>("SS m64n128k16, MB 2", sms, sink);
  run<256, 1, true, false>("RS m64n256k16", sms, sink);
  run<256, 1, true, true>("RS m64n256k16, + decode", sms, sink);
  run<256, 1, false, false>("SS m64n256k16", sms, sink);
  return 0;
}
