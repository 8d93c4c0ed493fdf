// Could a large-M Hopper kernel read A already decoded to fp16 instead of decoding it in every CTA? Such a
// kernel (256 A rows x 128 B rows per CTA, m64n256k16 consumers) needs 64 KB of fp16 A per 128-k block per
// CTA from L2, every A tile read by N/128 CTAs. This streams 256-row x 128-k fp16 tiles of a 2304 x 7168 fp16
// matrix (33 MB, warm in L2) through a ring of 64 KB stages on every SM, nothing computed, and reports the
// rate at which the stages fill: one CTA per tile (each loads its own copy) or clusters of 2 whose CTAs load
// one half each and multicast it to both (half the L2 reads). Median of 9 runs, CUDA events.
// Build and run on the device: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a tma_multicast_stream.cu -o t && ./t
#include <stdio.h>

#include "micro_common.cuh"

constexpr int ROWS = 2304, COLS = 7168;          // fp16 A
constexpr int TILE_ROWS = 256, BK = 128;          // one stage: 256 rows x 128 k x 2 B = 64 KB (two 32 KB boxes)
constexpr int STAGE_BYTES = TILE_ROWS * BK * 2, BOX_BYTES = STAGE_BYTES / 2;

__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// warp 0: the consumer (waits for each stage, frees it in every CTA of the cluster); warp 1: the producer
template <int CL>
__global__ void __launch_bounds__(64, 1) stream_kernel(const __grid_constant__ CUtensorMap map, int kblocks,
                                                       int stages, unsigned long long* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* base = smem_raw + ((1024 - (su(smem_raw) & 1023)) & 1023);
  const uint32_t full0 = su(base + stages * STAGE_BYTES), empty0 = full0 + 8 * stages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(full0 + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(empty0 + 8 * s), "r"(CL));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (CL > 1) cluster_sync(); else __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cluster = blockIdx.x / CL, r = CL > 1 ? (int)rank() : 0;
  const int mt = cluster % (ROWS / TILE_ROWS);
  if (warp == 1 && lane == 0) {
    for (int j = 0; j < kblocks; ++j) {
      const int s = j % stages;
      mbar_wait(empty0 + 8 * s, ((j / stages) & 1) ^ 1);
      const uint32_t full = full0 + 8 * s, dst = su(base + s * STAGE_BYTES);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(full), "r"(STAGE_BYTES));
      const int k0 = (j % (COLS / BK)) * BK;
      if (CL == 1) {
        for (int h = 0; h < 2; ++h)
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                       " [%0], [%1, {%3, %4}], [%2];"
                       :: "r"(dst + h * BOX_BYTES), "l"((uint64_t)&map), "r"(full), "r"(k0 + 64 * h), "r"(mt * TILE_ROWS)
                       : "memory");
      } else {   // this CTA's half of the stage, written into the same offsets of both CTAs
        const uint16_t mask = 3;
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                     " [%0], [%1, {%3, %4}], [%2], %5;"
                     :: "r"(dst + r * BOX_BYTES), "l"((uint64_t)&map), "r"(full), "r"(k0 + 64 * r),
                        "r"(mt * TILE_ROWS), "h"(mask) : "memory");
      }
    }
  } else if (warp == 0) {
    unsigned long long acc = 0;
    for (int j = 0; j < kblocks; ++j) {
      const int s = j % stages;
      mbar_wait(full0 + 8 * s, (j / stages) & 1);
      acc += *(volatile uint32_t*)(base + s * STAGE_BYTES + lane * 4);   // touch the stage
      __syncwarp();
      if (lane < CL) {   // free the stage in CTA `lane` of the cluster (its producer refills both)
        uint32_t bar = empty0 + 8 * s;
        if (CL > 1) asm volatile("mapa.shared::cluster.u32 %0, %0, %1;" : "+r"(bar) : "r"(lane));
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(bar) : "memory");
      }
    }
    if (acc == 0x123456789ull) *sink = acc;
  }
  if (CL > 1) cluster_sync();   // no CTA leaves while its peer may still write into it
}

template <int CL>
void run(const CUtensorMap& map, int sms, int kblocks, int stages, unsigned long long* sink) {
  auto k = stream_kernel<CL>;
  const int smem = stages * STAGE_BYTES + 1024 + 16 * stages;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int grid = sms / CL * CL;
  ClusterLaunch l(grid, 64, smem, CL);
  // (the first, untimed run warms the L2)
  const float us = median_us(10, [&] { cudaLaunchKernelEx(&l.cfg, k, map, kblocks, stages, sink); });
  cudaError_t err = cudaGetLastError();
  const double filled = (double)grid * kblocks * STAGE_BYTES, read = filled / CL;
  printf("cluster %d, %d stages of 64 KB: %8.1f us, stages filled at %6.2f TB/s, L2 read at %6.2f TB/s %s\n", CL,
         stages, us, filled / us / 1e6, read / us / 1e6, err == cudaSuccess ? "" : cudaGetErrorString(err));
}

int main() {
  const EncodeTiled enc = encode_tiled();
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  void* a;
  cudaMalloc(&a, (size_t)ROWS * COLS * 2);
  cudaMemset(a, 0x3C, (size_t)ROWS * COLS * 2);
  unsigned long long* sink;
  cudaMalloc(&sink, 8);
  CUtensorMap map;
  cuuint64_t dims[2] = {COLS, ROWS}, str[1] = {(cuuint64_t)COLS * 2};
  cuuint32_t box[2] = {64, TILE_ROWS}, es[2] = {1, 1};
  CUresult r = enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, a, dims, str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); return 1; }
  // 2304 x 4608 x 7168 with 128 B rows per CTA: every CTA streams 56 k-blocks for each of its ~2.5 tiles
  const int kblocks = 140;
  printf("%s, %d SMs, L2 %d MB; fp16 A %d x %d (%.0f MB), %d k-blocks of 64 KB per CTA\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize >> 20, ROWS, COLS, ROWS * (double)COLS * 2 / 1e6, kblocks);
  for (int stages : {2, 3}) {
    run<1>(map, prop.multiProcessorCount, kblocks, stages, sink);
    run<2>(map, prop.multiProcessorCount, kblocks, stages, sink);
  }
  return 0;
}
