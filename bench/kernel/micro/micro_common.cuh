// Shared by the bench/kernel/micro programs (each still builds alone: nvcc finds this header beside its source).
// Device: shared-memory addresses and loads, mbarrier waits, cluster barriers, wgmma (m64n128k16 and
// m64n256k16, f16 in, f32 accumulators) and the Hopper kernel's fp4 pair decode. Host: the driver's
// cuTensorMapEncodeTiled and a median-of-runs timer.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

// ---- shared memory and barriers ----------------------------------------------------------------------------
__device__ __forceinline__ uint32_t su(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint32_t lds8(uint32_t a) {
  unsigned short v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=h"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds16(uint32_t a) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t a, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
__device__ __forceinline__ uint32_t word(const uint4& v, int q) { return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w; }
// wait until the phase with parity `ph` of the mbarrier at shared address `bar` has completed
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t ph) {
  asm volatile("{\n.reg .pred P;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@P bra D;\nbra W;\nD:\n}\n"
               :: "r"(bar), "r"(ph) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- wgmma ----------------------------------------------------------------------------------------------
// K-major operand with the 128-byte swizzle (8 rows x 128 B per 1024-byte group)
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

#define MICRO_ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
  "+f"(d[i + 6]), "+f"(d[i + 7])
#define MICRO_R64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, " \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MICRO_R128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, " \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, " \
  "%85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, " \
  "%105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
  "%123, %124, %125, %126, %127}"
#define MICRO_ACC64 MICRO_ACC8(0), MICRO_ACC8(8), MICRO_ACC8(16), MICRO_ACC8(24), MICRO_ACC8(32), MICRO_ACC8(40), \
  MICRO_ACC8(48), MICRO_ACC8(56)
#define MICRO_ACC128 MICRO_ACC64, MICRO_ACC8(64), MICRO_ACC8(72), MICRO_ACC8(80), MICRO_ACC8(88), MICRO_ACC8(96), \
  MICRO_ACC8(104), MICRO_ACC8(112), MICRO_ACC8(120)

// RS: A fragment from registers; SS: A from shared memory (descriptor a); B always by descriptor
__device__ __forceinline__ void mma128_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MICRO_R64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : MICRO_ACC64 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void mma128_ss(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MICRO_R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : MICRO_ACC64 : "l"(a), "l"(b));
}
__device__ __forceinline__ void mma256_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " MICRO_R128 ", {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
               : MICRO_ACC128 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void mma256_ss(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " MICRO_R128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : MICRO_ACC128 : "l"(a), "l"(b));
}

// ---- the Hopper kernel's decode: fp4 pair (nibbles I, I+4 of w) -> fp16x2 (value * 2^-14) * s2 -------------
template <int I>
__device__ __forceinline__ uint32_t dec(uint32_t w, uint32_t s2) {
  uint32_t mag = (I * 4 <= 9 ? (w << (9 - 4 * I)) : (w >> (4 * I - 9))) & 0x0E000E00u;
  uint32_t r = mag | ((w << (12 - 4 * I)) & 0x80008000u);
  __half2 h = __hmul2(*reinterpret_cast<__half2*>(&r), *reinterpret_cast<__half2*>(&s2));
  return *reinterpret_cast<uint32_t*>(&h);
}

// e4m3 scale byte -> (s, s) fp16x2 (no power-of-two factor: the micros only time the decode)
__device__ __forceinline__ uint32_t scale_pair(uint32_t byte) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(byte | (byte << 8)), __NV_E4M3);
  return *reinterpret_cast<uint32_t*>(&h);
}

// ---- a cheaper exact decode: fp4 nibbles -> e4m3 bytes (value * 2^-6) -> F2FP.F16.E4M3 -> times s2 ----------
// e2m1 `s e e m` placed as e4m3 `s 0 0 e e m 0 0` is a * 2^-6 exactly (code 1 = 0.5 becomes the e4m3 subnormal
// 2^-7). Per 32-bit word (8 nibbles): S = signs; the odd nibbles' bytes are (w >> 2) under 0x1C1C1C1C with
// the signs already at bit 7; the even nibbles' bytes are (w << 2) under the same mask with S << 4. One LOP3
// merges each (the other input is zero outside the sign bits), then one hardware conversion per fp16 pair.
// Pairs: p[0] = nibbles (0, 2), p[1] = (4, 6), p[2] = (1, 3), p[3] = (5, 7).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t bytes, int hi) {
  uint32_t r;
  if (hi) asm("{.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(r) : "r"(bytes));
  else asm("{.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(r) : "r"(bytes));
  return r;
}
__device__ __forceinline__ uint32_t lop3_sel(uint32_t a, uint32_t b) {   // (a & 0x1C1C1C1C) | (b & ~0x1C1C1C1C)
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, 0x1C1C1C1C, 0xE4;" : "=r"(r) : "r"(a), "r"(b));   // c ? a : b  (0xF0&0xAA | 0xCC&~0xAA)
  return r;
}
__device__ __forceinline__ void dec4_e4m3(uint32_t w, uint32_t s2, uint32_t (&p)[4]) {
  const uint32_t sg = w & 0x88888888u;
  const uint32_t odd = lop3_sel(w >> 2, sg), even = lop3_sel(w << 2, sg << 4);
  const uint32_t h[4] = {e4m3x2_to_f16x2(even, 0), e4m3x2_to_f16x2(even, 1), e4m3x2_to_f16x2(odd, 0),
                         e4m3x2_to_f16x2(odd, 1)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 x = __hmul2(*reinterpret_cast<const __half2*>(&h[i]), *reinterpret_cast<const __half2*>(&s2));
    p[i] = *reinterpret_cast<uint32_t*>(&x);
  }
}

// ---- host ------------------------------------------------------------------------------------------------
typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda)
inline EncodeTiled encode_tiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
  return (EncodeTiled)fn;
}
// a launch configuration with a thread-block cluster of `cluster` CTAs along x (holds its attribute: not copied)
struct ClusterLaunch {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg;
  ClusterLaunch(int grid, int threads, int smem, int cluster) : attr{}, cfg{} {
    cfg.gridDim = dim3(grid, 1, 1);
    cfg.blockDim = dim3(threads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};
// `runs` timed calls of launch() (CUDA events), each after before(run); the first is a warm-up. Median in µs.
template <typename Before, typename Launch>
float median_us(int runs, Before before, Launch launch) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int rep = 0; rep < runs; ++rep) {
    before(rep);
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (rep) ts.push_back(ms * 1000.f);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}
template <typename Launch>
float median_us(int runs, Launch launch) {
  return median_us(runs, [](int) {}, launch);
}
// one line of a rate table: `flop` done in `us` microseconds, and the launch error if there was one
inline void print_tflops(const char* name, int width, double flop, float us) {
  const cudaError_t err = cudaGetLastError();
  printf("%-*s %8.1f TFLOP/s  (%.3f ms)%s\n", width, name, flop / (us * 1e-6) / 1e12, us * 1e-3,
         err == cudaSuccess ? "" : cudaGetErrorString(err));
}
