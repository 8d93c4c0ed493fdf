// A CTA-pair (.cta_group::2) tcgen05 GEMM tile, our own look-alike of the 2-SM kernels (cluster of 2 CTAs, M = 256
// per pair): for bench/emulation/cta_pair_check.py under --emulate-blackwell's runtime (written for sm_100a).
//
// Each CTA of a cluster (2, 1, 1) loads with plain loads its 128 rows of A, its half of B (N / 2 = 64 rows:
// the even CTA rows [0, 64) of the pair's tile, the odd CTA rows [64, 128)), and, for NVFP4, the scale factors of
// its 128 rows of A and of all 128 rows of B. Both CTAs allocate tensor memory with tcgen05.alloc.cta_group::2;
// the even CTA's thread 0 issues tcgen05.cp.cta_group::2 (scale factors, each CTA's shared memory into its own
// tensor memory), tcgen05.mma.cta_group::2 (M = 256, N = 128) and a tcgen05.commit.cta_group::2 multicast to
// both CTAs' mbarriers; each CTA then reads its 128 rows of D with tcgen05.ld and deallocates.
//
// KIND 0: kind::f16 (bf16 in, f32 out; K = 16 per MMA), with the all-zero disable-output-lane mask of 8
// registers that CUTLASS's SM100_MMA_F16BF16_2x1SM_SS passes. KIND 1: kind::mxf4nvf4.block_scale.block16
// (e2m1, UE4M3 scales per 16 elements; K = 64 per MMA).
// Operands: K-major, no swizzle, per MMA a block of rows x 32 bytes: chunk c of row r at (r / 8) * 256 + c * 128 +
// (r % 8) * 16 (LBO = 128, SBO = 256). Scale factors per MMA: 32 rows x 16 bytes (32x128b.warpx4), byte 4 j + b
// of source row r' = block b of row r' + 32 j.
//
// pair_tma_probe: TMA with .cta_group::2 as CUTLASS's SM100_TMA_2SM_LOAD issues it: both CTAs load a box into
// their own shared memory and complete its bytes on the even CTA's mbarrier (own address & 0xFEFFFFFF).
#include <cuda.h>
#include <stdint.h>
#ifndef CTA_PAIR_KERNELS_ONLY   // the CPU tests build the kernels alone
#include <torch/extension.h>
#endif

constexpr int TILE_N = 128, HALF_N = 64, MAX_KB = 4;
constexpr int A_BYTES = 128 * 32, B_BYTES = HALF_N * 32, SF_BYTES = 512;
constexpr int SMEM = MAX_KB * (A_BYTES + B_BYTES + 2 * SF_BYTES) + 64 * 1024;   // > 114 KB: one CTA per SM

__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 46);
}
__device__ __forceinline__ uint32_t cluster_rank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <int KIND>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
pair_gemm(const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb, float* d, uint32_t idesc,
          int n_total, int kb) {
  extern __shared__ __align__(1024) uint8_t buf[];
  __shared__ uint32_t slot;
  __shared__ __align__(8) uint64_t bar;
  uint8_t* sA = buf;
  uint8_t* sB = sA + MAX_KB * A_BYTES;
  uint8_t* sSFA = sB + MAX_KB * B_BYTES;
  uint8_t* sSFB = sSFA + MAX_KB * SF_BYTES;
  const uint32_t rank = cluster_rank(), tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tile_m = blockIdx.y, tile_n = blockIdx.z, row_bytes = kb * 32, sf_bytes = kb * 4;
  const int a_row0 = tile_m * 256 + rank * 128, b_row0 = tile_n * TILE_N + rank * HALF_N;
  for (int i = tid; i < kb * 128 * 32; i += blockDim.x) {
    const int kk = i / (128 * 32), r = (i / 32) % 128, byte = i % 32, c = byte / 16;
    sA[kk * A_BYTES + (r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = a[(size_t)(a_row0 + r) * row_bytes + kk * 32 + byte];
  }
  for (int i = tid; i < kb * HALF_N * 32; i += blockDim.x) {
    const int kk = i / (HALF_N * 32), r = (i / 32) % HALF_N, byte = i % 32, c = byte / 16;
    sB[kk * B_BYTES + (r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = b[(size_t)(b_row0 + r) * row_bytes + kk * 32 + byte];
  }
  if (KIND != 0) {     // scale factors (the block-scaled kinds 1 and 3)
    for (int i = tid; i < kb * SF_BYTES; i += blockDim.x) {   // source row r' = i / 16 (within the MMA), byte 4 j + blk
      const int kk = i / SF_BYTES, rp = (i % SF_BYTES) / 16, j = (i % 16) / 4, blk = i % 4, r = rp + 32 * j;
      sSFA[i] = sfa[(size_t)(a_row0 + r) * sf_bytes + kk * 4 + blk];
      sSFB[i] = sfb[(size_t)(tile_n * TILE_N + r) * sf_bytes + kk * 4 + blk];
    }
  }
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (warp == 0) asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 256;" ::"r"(smem(&slot)) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  cluster_sync();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t t = slot;
  // KIND 3: as KIND 1, and the odd CTA issues the same MMAs too, never committed (a public CuTe DSL dual GEMM does,
  // its cute.gemm outside its leader-CTA test; it passed on B200s)
  if ((rank == 0 || KIND == 3) && tid == 0) {
    for (int kk = 0; kk < kb; ++kk) {
      const uint64_t da = desc(smem(sA + kk * A_BYTES), 128, 256), db = desc(smem(sB + kk * B_BYTES), 128, 256);
      const uint32_t accumulate = kk > 0;
      if (KIND == 0) {
        const uint32_t zero = 0;
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                     "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, {%5, %5, %5, %5, %5, %5, %5, %5}, p;\n\t}"
                     ::"r"(t), "l"(da), "l"(db), "r"(idesc), "r"(accumulate), "r"(zero));
      } else {
        const uint32_t tsfa = t + 128 + 4 * kk, tsfb = t + 160 + 4 * kk;
        if (rank == 0) {
          asm volatile("tcgen05.cp.cta_group::2.32x128b.warpx4 [%0], %1;" ::"r"(tsfa), "l"(desc(smem(sSFA + kk * SF_BYTES), 128, 128)));
          asm volatile("tcgen05.cp.cta_group::2.32x128b.warpx4 [%0], %1;" ::"r"(tsfb), "l"(desc(smem(sSFB + kk * SF_BYTES), 128, 128)));
        }
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                     "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                     ::"r"(t), "l"(da), "l"(db), "r"(idesc), "r"(accumulate), "r"(tsfa), "r"(tsfb));
      }
    }
    if (rank == 0)
      asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                   ::"r"(smem(&bar)), "h"((uint16_t)3) : "memory");
  }
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem(&bar)) : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  for (int c0 = 0; c0 < TILE_N; c0 += 8) {   // 32x32b.x8: thread l of warp w = row 32 w + l, columns c0 .. c0 + 7
    uint32_t r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(t + ((32 * warp) << 16) + c0));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int j = 0; j < 8; ++j)
      d[(size_t)(a_row0 + 32 * warp + lane) * n_total + tile_n * TILE_N + c0 + j] = __uint_as_float(r[j]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  cluster_sync();
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
}

// cluster_gemm: the same tiles, each CTA of the cluster (2, 1, 1) computing its own 128 rows alone (.cta_group::1,
// all N = 128 columns of B in its own shared memory), as a one-SM kernel launched in 2x1 clusters for TMA
// multicast does. On a Hopper GPU the odd CTA's shared::cta addresses carry its cluster rank above the 18 bits a
// shared-memory descriptor keeps. kind::mxf4nvf4.block_scale.block16 only.
constexpr int ONE_B_BYTES = TILE_N * 32;
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
cluster_gemm(const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb, float* d, uint32_t idesc,
             int n_total, int kb) {
  extern __shared__ __align__(1024) uint8_t buf[];
  __shared__ uint32_t slot;
  __shared__ __align__(8) uint64_t bar;
  uint8_t* sA = buf;
  uint8_t* sB = sA + MAX_KB * A_BYTES;
  uint8_t* sSFA = sB + MAX_KB * ONE_B_BYTES;
  uint8_t* sSFB = sSFA + MAX_KB * SF_BYTES;
  const uint32_t rank = cluster_rank(), tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tile_m = blockIdx.y, tile_n = blockIdx.z, row_bytes = kb * 32, sf_bytes = kb * 4;
  const int a_row0 = tile_m * 256 + rank * 128, b_row0 = tile_n * TILE_N;
  for (int i = tid; i < kb * 128 * 32; i += blockDim.x) {
    const int kk = i / (128 * 32), r = (i / 32) % 128, byte = i % 32, c = byte / 16;
    sA[kk * A_BYTES + (r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = a[(size_t)(a_row0 + r) * row_bytes + kk * 32 + byte];
    sB[kk * ONE_B_BYTES + (r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = b[(size_t)(b_row0 + r) * row_bytes + kk * 32 + byte];
  }
  for (int i = tid; i < kb * SF_BYTES; i += blockDim.x) {   // as pair_gemm's
    const int kk = i / SF_BYTES, rp = (i % SF_BYTES) / 16, j = (i % 16) / 4, blk = i % 4, r = rp + 32 * j;
    sSFA[i] = sfa[(size_t)(a_row0 + r) * sf_bytes + kk * 4 + blk];
    sSFB[i] = sfb[(size_t)(b_row0 + r) * sf_bytes + kk * 4 + blk];
  }
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (warp == 0) asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;" ::"r"(smem(&slot)) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t t = slot;
  if (tid == 0) {
    for (int kk = 0; kk < kb; ++kk) {
      const uint64_t da = desc(smem(sA + kk * A_BYTES), 128, 256), db = desc(smem(sB + kk * ONE_B_BYTES), 128, 256);
      const uint32_t tsfa = t + 128 + 4 * kk, tsfb = t + 160 + 4 * kk;
      asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(tsfa), "l"(desc(smem(sSFA + kk * SF_BYTES), 128, 128)));
      asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(tsfb), "l"(desc(smem(sSFB + kk * SF_BYTES), 128, 128)));
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                   "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                   ::"r"(t), "l"(da), "l"(db), "r"(idesc), "r"((uint32_t)(kk > 0)), "r"(tsfa), "r"(tsfb));
    }
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem(&bar)) : "memory");
  }
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem(&bar)) : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  for (int c0 = 0; c0 < TILE_N; c0 += 8) {
    uint32_t r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(t + ((32 * warp) << 16) + c0));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int j = 0; j < 8; ++j)
      d[(size_t)(a_row0 + 32 * warp + lane) * n_total + tile_n * TILE_N + c0 + j] = __uint_as_float(r[j]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (warp == 0) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
}

#ifdef CTA_PAIR_KERNELS_ONLY
template __global__ void pair_gemm<0>(const uint8_t*, const uint8_t*, const uint8_t*, const uint8_t*, float*, uint32_t, int, int);
template __global__ void pair_gemm<1>(const uint8_t*, const uint8_t*, const uint8_t*, const uint8_t*, float*, uint32_t, int, int);
template __global__ void pair_gemm<3>(const uint8_t*, const uint8_t*, const uint8_t*, const uint8_t*, float*, uint32_t, int, int);
#endif

#ifndef CTA_PAIR_KERNELS_ONLY
// a: (M, kb * 32) uint8, b: (N, kb * 32), sfa: (M, kb * 4), sfb: (N, kb * 4), d: (M, N) float32; M % 256 == 0,
// N % 128 == 0. kind 0: f16, 1: mxf4nvf4 block16, 2: mxf4nvf4 block16 one CTA at a time in clusters of 2, 3: as 1
// with the odd CTA issuing the pair's MMAs too (uncommitted).
void gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor d, int64_t kind,
          int64_t idesc, int64_t kb) {
  TORCH_CHECK(kb >= 1 && kb <= MAX_KB && a.size(0) % 256 == 0 && b.size(0) % TILE_N == 0);
  const dim3 grid(2, a.size(0) / 256, b.size(0) / TILE_N);
  auto go = [&](auto kernel) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    kernel<<<grid, 128, SMEM>>>(a.data_ptr<uint8_t>(), b.data_ptr<uint8_t>(), sfa.data_ptr<uint8_t>(),
                                sfb.data_ptr<uint8_t>(), d.data_ptr<float>(), (uint32_t)idesc, (int)b.size(0), (int)kb);
  };
  if (kind == 0) go(pair_gemm<0>);
  else if (kind == 1) go(pair_gemm<1>);
  else if (kind == 3) go(pair_gemm<3>);
  else go(cluster_gemm);
}
#endif

// ---- TMA .cta_group::2 probe: CTA `rank` of the pair loads rows [16 rank, 16 rank + 16) x 64 bytes into box[rank]
// and completes its bytes on the even CTA's mbarrier, which expects every box. Unicast (multicast = 0): the box
// lands in the issuing CTA. Multicast (.multicast::cluster, mask 0b11): it lands in both CTAs, and each
// destination completes its bytes on the even CTA's barrier. out[rank] gets the CTA's two boxes; flags[rank] = 1
// when the even CTA's barrier completed within 2 s (the odd CTA learns it through the cluster barrier). `mode` bit 0:
// multicast; bit 1: the map's word 16 (the bytes of one box, which the driver's encoder fills) is 0, as in a map
// that CuTe DSL's host code encodes itself.
constexpr int PROBE_ROWS = 16, PROBE_COLS = 64, PROBE_BYTES = PROBE_ROWS * PROBE_COLS;

__global__ void __cluster_dims__(2, 1, 1) pair_tma_probe(const __grid_constant__ CUtensorMap map, uint8_t* out, int* flags,
                                                        int multicast) {
  __shared__ alignas(128) uint8_t box[2][PROBE_BYTES];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t rank = cluster_rank();
  for (int i = threadIdx.x; i < 2 * PROBE_BYTES; i += blockDim.x) box[i / PROBE_BYTES][i % PROBE_BYTES] = 0;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  cluster_sync();
  int ok = 1;
  if (threadIdx.x == 0) {
    if (rank == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(&bar)),
                   "r"((multicast ? 4 : 2) * PROBE_BYTES) : "memory");
    const uint32_t leader_bar = smem(&bar) & 0xFEFFFFFFu;   // as SM100_TMA_2SM_LOAD: the even CTA's barrier
    if (multicast)
      asm volatile("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                   "[%0], [%1, {%2, %3}], [%4], %5;"
                   ::"r"(smem(box[rank])), "l"(&map), "r"(0), "r"((int)(PROBE_ROWS * rank)), "r"(leader_bar), "h"((uint16_t)3)
                   : "memory");
    else
      asm volatile("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                   ::"r"(smem(box[rank])), "l"(&map), "r"(0), "r"((int)(PROBE_ROWS * rank)), "r"(leader_bar) : "memory");
    if (rank == 0) {
      long long t0 = clock64();
      uint32_t done = 0;
      while (!done && clock64() - t0 < 4000000000ll)
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(smem(&bar)) : "memory");
      ok = done;
      flags[0] = ok;
    }
  }
  cluster_sync();   // the even CTA saw every box complete (or gave up): the odd's boxes have landed too
  for (int i = threadIdx.x; i < 2 * PROBE_BYTES; i += blockDim.x) out[rank * 2 * PROBE_BYTES + i] = box[i / PROBE_BYTES][i % PROBE_BYTES];
  if (threadIdx.x == 0 && rank == 1) flags[1] = 1;
}

#ifndef CTA_PAIR_KERNELS_ONLY
void tma_probe(torch::Tensor src, torch::Tensor out, torch::Tensor flags, int64_t mode) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)src.size(1), (cuuint64_t)src.size(0)};
  const cuuint64_t strides[1] = {(cuuint64_t)src.stride(0)};
  const cuuint32_t box[2] = {PROBE_COLS, PROBE_ROWS}, element_strides[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, src.data_ptr(), dims, strides, box,
                                      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed: ", (int)r);
  if (mode & 2) reinterpret_cast<uint32_t*>(&map)[16] = 0;
  pair_tma_probe<<<2, 128>>>(map, out.data_ptr<uint8_t>(), flags.data_ptr<int>(), (int)(mode & 1));
}
#endif
