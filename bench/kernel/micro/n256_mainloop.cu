// The main loop of a large-M design the shipped kernel cannot express (docs/hopper_kernel.md, "Designs measured
// and dropped"), timed before building it: A already decoded to fp16 (as a per-call prologue would leave it, in L2),
// loaded by TMA and multicast over a cluster pair; B as fp4 + scales per CTA; no transform warps; 384 threads:
// a producer warpgroup and two consumer warpgroups that decode their 64 B rows into fragments and issue
// m64n256k16 (256 A rows per CTA). Timing only: synthetic data, accumulators written to a scratch buffer, no
// scales applied, no split-K. Each cluster computes TILES pairs of 128 B rows x 256 A rows over K = 7168 of a
// 2304 x 4608 x 7168 problem; prints TFLOP/s (median of 9, CUDA events; the shipped kernel does 587 on this
// shape, cuBLAS bf16 on pre-dequantized operands about 700).
// Build and run on the device: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a n256_mainloop.cu -o n && ./n
#include <cuda_fp8.h>
#include <stdio.h>

#include "micro_common.cuh"

constexpr int M = 2304, N = 4608, K = 7168, BK = 128, NK = K / BK;
constexpr int A_ROWS = 256, B_ROWS = 128;               // per CTA: wgmma N = 256 A rows, 2 x m64 B rows
constexpr int A_STAGE = A_ROWS * BK * 2;                 // 64 KB fp16, two 32 KB boxes (64 k each)
constexpr int B_STAGE = B_ROWS * BK / 2;                 // 8 KB fp4
constexpr int SF_STAGE = 1024;                           // 128 rows x 8 scale bytes
constexpr int STAGE = A_STAGE + B_STAGE + SF_STAGE;      // 74752
constexpr int STAGES = 3, THREADS = 384, CL = 2;

// arrive on barrier `bar` of CTA `cta` of the cluster where pred holds, without a branch (a branch between a
// wgmma and its wait makes ptxas serialize the wgmmas, C7513)
__device__ __forceinline__ void arrive_in_if(uint32_t bar, uint32_t cta, bool pred) {
  asm volatile("mapa.shared::cluster.u32 %0, %0, %1;" : "+r"(bar) : "r"(cta));
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cluster.b64 _, [%0];\n}\n"
               :: "r"(bar), "r"((uint32_t)pred) : "memory");
}

template <bool E4M3>
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
        mbar_wait(empty0 + 8 * s, ((j / STAGES) & 1) ^ 1);
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
        mbar_wait(full0 + 8 * s, (j / STAGES) & 1);
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
          wgmma_wait<1>();
          if (gi == 1) {   // every group of the previous stage is done: free it in both CTAs
            __syncwarp();
            arrive_in_if(empty0 + 8 * (pending < 0 ? 0 : pending), lane & 1, lane < CL && pending >= 0);
          }
          const uint32_t a0 = scale_pair((sb[0] >> (8 * gi)) & 0xFF), a1 = scale_pair((sb[1] >> (8 * gi)) & 0xFF);
#pragma unroll
          for (int kk = 0; kk < 4; kk += 2) {
            const int q = 2 * gi + (kk >> 1);
            const uint32_t w0 = word(x[0], q), w1 = word(x[1], q);
            if (E4M3) {   // the shipped kernel's decode
              uint32_t p[4], r[4];
              dec4_e4m3(w0, a0, p);
              dec4_e4m3(w1, a1, r);
              frag[gi][kk][0] = p[0]; frag[gi][kk][1] = r[0]; frag[gi][kk][2] = p[1]; frag[gi][kk][3] = r[1];
              frag[gi][kk + 1][0] = p[2]; frag[gi][kk + 1][1] = r[2]; frag[gi][kk + 1][2] = p[3]; frag[gi][kk + 1][3] = r[3];
            } else {
              frag[gi][kk][0] = dec<0>(w0, a0); frag[gi][kk][1] = dec<0>(w1, a1);
              frag[gi][kk][2] = dec<1>(w0, a0); frag[gi][kk][3] = dec<1>(w1, a1);
              frag[gi][kk + 1][0] = dec<2>(w0, a0); frag[gi][kk + 1][1] = dec<2>(w1, a1);
              frag[gi][kk + 1][2] = dec<3>(w0, a0); frag[gi][kk + 1][3] = dec<3>(w1, a1);
            }
          }
          wgmma_fence();
          const uint64_t desc = sw128_desc(__shfl_sync(0xffffffffu, st + gi * (A_STAGE / 2), 0));
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) mma256_rs(acc, frag[gi][kk], desc + (uint64_t)(kk * 2));
          wgmma_commit();
        }
        pending = s;
      }
      wgmma_wait<0>();
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

int main() {
  const EncodeTiled enc = encode_tiled();
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
  cudaFuncSetAttribute(mainloop<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(mainloop<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("%s, %d SMs; clusters of %d, %d threads, %d stages of %d B\n", prop.name, prop.multiProcessorCount, CL,
         THREADS, STAGES, STAGE);
  for (int e4m3 : {0, 1})
  for (int tiles : {2, 3}) {   // 66 clusters x tiles pairs of the 162 the problem has (2.45 per cluster)
    ClusterLaunch l(sms, THREADS, smem, CL);
    const float us = median_us(10, [&] {
      cudaLaunchKernelEx(&l.cfg, e4m3 ? mainloop<true> : mainloop<false>, map, (const uint8_t*)b, (const uint8_t*)sfb,
                         (float4*)out, tiles);
    });
    cudaError_t err = cudaGetLastError();
    const double flop = 2.0 * sms * tiles * (double)B_ROWS * A_ROWS * K;
    printf("%s decode, %d tile pairs per cluster: %8.1f us, %6.1f TFLOP/s %s\n", e4m3 ? "e4m3" : "bit ", tiles, us, flop / (us * 1e-6) / 1e12,
           err == cudaSuccess ? "" : cudaGetErrorString(err));
  }
  return 0;
}
