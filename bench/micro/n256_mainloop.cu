// The main loop of a large-M design the shipped kernel cannot express (docs/hopper_kernel.md, issue 16 fourth
// sitting), timed before building it: A already decoded to fp16 (as a per-call prologue would leave it, in L2),
// loaded by TMA and multicast over a cluster pair; B as fp4 + scales per CTA; no transform warps; 384 threads:
// a producer warpgroup and two consumer warpgroups that decode their 64 B rows into fragments and issue
// m64n256k16 (256 A rows per CTA). Timing only: synthetic data, accumulators written to a scratch buffer, no
// scales applied, no split-K. Each cluster computes TILES pairs of 128 B rows x 256 A rows over K = 7168 of a
// 2304 x 4608 x 7168 problem; prints TFLOP/s (median of 9, CUDA events; the shipped kernel does 587 on this
// shape, cuBLAS bf16 on pre-dequantized operands about 700).
// Build and run on the device: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a n256_mainloop.cu -o n && ./n
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <vector>

constexpr int M = 2304, N = 4608, K = 7168, BK = 128, NK = K / BK;
constexpr int A_ROWS = 256, B_ROWS = 128;               // per CTA: wgmma N = 256 A rows, 2 x m64 B rows
constexpr int A_STAGE = A_ROWS * BK * 2;                 // 64 KB fp16, two 32 KB boxes (64 k each)
constexpr int B_STAGE = B_ROWS * BK / 2;                 // 8 KB fp4
constexpr int SF_STAGE = 1024;                           // 128 rows x 8 scale bytes
constexpr int STAGE = A_STAGE + B_STAGE + SF_STAGE;      // 74752
constexpr int STAGES = 3, THREADS = 384, CL = 2;

__device__ __forceinline__ uint32_t su(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait(uint32_t bar, uint32_t ph) {
  asm volatile("{\n.reg .pred P;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@P bra D;\nbra W;\nD:\n}\n"
               :: "r"(bar), "r"(ph) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t lds16(uint32_t a) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
template <int I>
__device__ __forceinline__ uint32_t dec(uint32_t w, uint32_t s2) {
  uint32_t mag = (I * 4 <= 9 ? (w << (9 - 4 * I)) : (w >> (4 * I - 9))) & 0x0E000E00u;
  uint32_t r = mag | ((w << (12 - 4 * I)) & 0x80008000u);
  __half2 h = __hmul2(*reinterpret_cast<__half2*>(&r), *reinterpret_cast<__half2*>(&s2));
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int q) { return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w; }
__device__ __forceinline__ uint32_t scale2(uint32_t byte) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(byte | (byte << 8)), __NV_E4M3);
  return *reinterpret_cast<uint32_t*>(&h);
}

#define ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
__device__ __forceinline__ void mma256_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, "
               "%11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, "
               "%31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, "
               "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, "
               "%71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, "
               "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, "
               "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "
               "%126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
               : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
                 ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int W>
__device__ __forceinline__ void wgwait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(W) : "memory"); }
// arrive on barrier `bar` of CTA `cta` of the cluster where pred holds, without a branch (a branch between a
// wgmma and its wait makes ptxas serialize the wgmmas, C7513)
__device__ __forceinline__ void arrive_in_if(uint32_t bar, uint32_t cta, bool pred) {
  asm volatile("mapa.shared::cluster.u32 %0, %0, %1;" : "+r"(bar) : "r"(cta));
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cluster.b64 _, [%0];\n}\n"
               :: "r"(bar), "r"((uint32_t)pred) : "memory");
}

__global__ void __launch_bounds__(THREADS, 1) mainloop(const __grid_constant__ CUtensorMap map_a, const uint8_t* b,
                                                       const uint8_t* sfb, float4* out, int tiles) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* base = smem_raw + ((1024 - (su(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = su(base), full0 = sbase + STAGES * STAGE, empty0 = full0 + 8 * STAGES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(full0 + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(empty0 + 8 * s), "r"(8 * CL));   // every consumer warp of both CTAs
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();
  const int cluster = blockIdx.x / CL;
  const int total = tiles * NK;
  if (warp < 4) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (warp == 0 && lane == 0) {
      for (int j = 0; j < total; ++j) {
        const int s = j % STAGES, tile = j / NK, kb = j % NK;
        const int pair = cluster + 66 * tile, mt = pair % (M / A_ROWS), np = pair / (M / A_ROWS) % (N / B_ROWS / 2);
        wait(empty0 + 8 * s, ((j / STAGES) & 1) ^ 1);
        const uint32_t full = full0 + 8 * s, st = sbase + s * STAGE;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(full), "r"(STAGE));
        // this CTA's 64-k half of the A tile, into both CTAs
        const uint16_t mask = 3;
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                     " [%0], [%1, {%3, %4}], [%2], %5;"
                     :: "r"(st + rank * (A_STAGE / 2)), "l"((uint64_t)&map_a), "r"(full), "r"(kb * BK + 64 * (int)rank),
                        "r"(mt * A_ROWS), "h"(mask) : "memory");
        // its own 128 B rows (fp4, plain row-major [N][K/2]: 1-D copies of 64 bytes per row would be slow, so
        // the micro copies the stage's 8 KB as one block of a [N/128][NK][8 KB] image; timing only)
        const int nt = 2 * np + (int)rank;
        const uint8_t* src = b + ((size_t)nt * NK + kb) * B_STAGE;
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(st + A_STAGE), "l"(src), "r"(B_STAGE), "r"(full) : "memory");
        const uint8_t* ssrc = sfb + ((size_t)nt * NK + kb) * SF_STAGE;
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(st + A_STAGE + B_STAGE), "l"(ssrc), "r"(SF_STAGE), "r"(full) : "memory");
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = warp / 4 - 1, wq = warp % 4, g = lane >> 2, t = lane & 3;
    const int rb = 64 * cw + 16 * wq + g;   // B row (rows rb, rb + 8 of the warpgroup's m64 block)
    float acc[128];
    uint32_t frag[2][4][4];
    int pending = -1;   // stage whose wgmmas may still run
    for (int tile = 0; tile < tiles; ++tile) {
#pragma unroll
      for (int i = 0; i < 128; ++i) asm volatile("mov.b32 %0, 0;" : "=f"(acc[i]));
      for (int kb = 0; kb < NK; ++kb) {
        const int j = tile * NK + kb, s = j % STAGES;
        wait(full0 + 8 * s, (j / STAGES) & 1);
        const uint32_t st = sbase + s * STAGE;
        uint4 x[2];
        uint32_t sb[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          x[h] = lds128(st + A_STAGE + (rb + 8 * h) * 64 + t * 16);
          sb[h] = lds16(st + A_STAGE + B_STAGE + (rb + 8 * h) * 8 + 2 * t);
        }
#pragma unroll
        for (int gi = 0; gi < 2; ++gi) {   // 64-k half gi: 4 k16 steps, one 32 KB box of A
          wgwait<1>();
          if (gi == 1) {   // every group of the previous stage is done: free it in both CTAs
            __syncwarp();
            arrive_in_if(empty0 + 8 * (pending < 0 ? 0 : pending), lane & 1, lane < CL && pending >= 0);
          }
          const uint32_t a0 = scale2((sb[0] >> (8 * gi)) & 0xFF), a1 = scale2((sb[1] >> (8 * gi)) & 0xFF);
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            const int q = 2 * gi + (kk >> 1);
            const uint32_t w0 = word(x[0], q), w1 = word(x[1], q);
            if ((kk & 1) == 0) {
              frag[gi][kk][0] = dec<0>(w0, a0); frag[gi][kk][1] = dec<0>(w1, a1);
              frag[gi][kk][2] = dec<1>(w0, a0); frag[gi][kk][3] = dec<1>(w1, a1);
            } else {
              frag[gi][kk][0] = dec<2>(w0, a0); frag[gi][kk][1] = dec<2>(w1, a1);
              frag[gi][kk][2] = dec<3>(w0, a0); frag[gi][kk][3] = dec<3>(w1, a1);
            }
          }
          fence();
          const uint64_t desc = sw128_desc(__shfl_sync(0xffffffffu, st + gi * (A_STAGE / 2), 0));
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) mma256_rs(acc, frag[gi][kk], desc + (uint64_t)(kk * 2));
          commit();
        }
        pending = s;
      }
      wgwait<0>();
      __syncwarp();
      arrive_in_if(empty0 + 8 * pending, lane & 1, lane < CL);
      pending = -1;
      float4* o = out + ((size_t)blockIdx.x * 256 + (threadIdx.x - 128)) * 32;   // scratch: keeps the accumulators
#pragma unroll
      for (int i = 0; i < 32; ++i) o[i] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
    }
  }
  cluster_sync();   // no CTA leaves while its peer may still write into it or arrive on its barriers
}

typedef CUresult (*Enc)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                        const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

int main() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
  Enc enc = (Enc)fn;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int sms = prop.multiProcessorCount / CL * CL;
  void *a, *b, *sfb, *out;
  cudaMalloc(&a, (size_t)M * K * 2);
  cudaMemset(a, 0x11, (size_t)M * K * 2);          // fp16 0x1111: small normal values
  cudaMalloc(&b, (size_t)N * K / 2);
  cudaMemset(b, 0x35, (size_t)N * K / 2);
  cudaMalloc(&sfb, (size_t)N * K / 16);
  cudaMemset(sfb, 0x38, (size_t)N * K / 16);       // e4m3 1.0
  cudaMalloc(&out, (size_t)sms * 256 * 32 * 16);
  CUtensorMap map;
  cuuint64_t dims[2] = {K, M}, str[1] = {(cuuint64_t)K * 2};
  cuuint32_t box[2] = {64, A_ROWS}, es[2] = {1, 1};
  if (enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, a, dims, str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    printf("encode failed\n");
    return 1;
  }
  const int smem = STAGES * STAGE + 1024 + 16 * STAGES;
  cudaFuncSetAttribute(mainloop, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("%s, %d SMs; clusters of %d, %d threads, %d stages of %d B\n", prop.name, prop.multiProcessorCount, CL,
         THREADS, STAGES, STAGE);
  for (int tiles : {2, 3}) {   // 66 clusters x tiles pairs of the 162 the problem has (2.45 per cluster)
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(sms, 1, 1);
    cfg.blockDim = dim3(THREADS, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = CL; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int rep = 0; rep < 10; ++rep) {
      cudaEventRecord(e0);
      cudaLaunchKernelEx(&cfg, mainloop, map, (const uint8_t*)b, (const uint8_t*)sfb, (float4*)out, tiles);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      if (rep) ts.push_back(ms * 1000.f);
    }
    cudaError_t err = cudaGetLastError();
    std::sort(ts.begin(), ts.end());
    const float us = ts[ts.size() / 2];
    const double flop = 2.0 * sms * tiles * (double)B_ROWS * A_ROWS * K;
    printf("%d tile pairs per cluster: %8.1f us, %6.1f TFLOP/s %s\n", tiles, us, flop / (us * 1e-6) / 1e12,
           err == cudaSuccess ? "" : cudaGetErrorString(err));
  }
  return 0;
}
