// NVFP4 block-scaled GEMM for sm_100a (B200): C[M,N,L] (fp16) = (A * SFA) x (B * SFB)^T.
//
// NOT RUN ON BLACKWELL HARDWARE HERE. Verified by compile/SASS checks for sm_100a and by the emulation
// build (-DNVFP4_TCGEN05_EMULATION, sm_90a) that runs this same kernel on a Hopper GPU.
//
// Pipeline (one CTA = 128 x 64 output tile, 128 threads):
//   warp 0 : producer. TMA (2-D, UINT8 maps, 128B swizzle) loads A [128 x 256 fp4] and B [64 x 256 fp4]
//            per stage, plus two 1-D bulk copies of the 2 KiB of blocked scale atoms for A and for B.
//   warp 1 : allocates TMEM; per stage: tcgen05.cp of the 8 scale atoms into TMEM, 4 x tcgen05.mma
//            kind::mxf4nvf4 block16 (K = 64 each), tcgen05.commit -> "empty" mbarrier of the stage.
//   warps 0-3 : epilogue, tcgen05.ld 32x32b (warp w reads lanes 32w..32w+31 = rows), fp16 stores.
//   Split-K (gridDim.z = L * splits): each split writes an fp32 partial tile to a workspace; the last
//   CTA of a tile (atomic counter) sums the partials in split order and writes fp16.
// Data contract: a/b: packed fp4 [rows, K/2, L] (row stride K/2 bytes, batch stride rows*K/2);
// sf*_perm: the 128x4 blocked (cuBLAS) scale layout, 512-byte atoms, batches outermost.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "../common/nvfp4_common.cuh"
#include "tcgen05_desc.h"
#ifdef NVFP4_TCGEN05_EMULATION
#include "tcgen05_emulation.cuh"
#else
#include "tcgen05_hw.cuh"
#endif

namespace nvfp4_sm100 {
using namespace t5;

constexpr int kThreads = 128;
constexpr int kSmemBytes = kStages * kStageBytes + 1024 /*align*/ + 256 /*barriers*/;

// mbarrier / TMA helpers and the tensor-map encoder: kernels/common (shared with the sm_90a kernel)
using nvfp4::smem_u32; using nvfp4::mbar_init; using nvfp4::fence_mbar_init; using nvfp4::mbar_expect_tx;
using nvfp4::tma_load_2d; using nvfp4::bulk_load; using nvfp4::kEvictFirst; using nvfp4::kEvictLast;
// Its own wait loop: the emulation build turns a hang into a trap, and the hardware build keeps the loop shape
// it was checked with (common's PTX-label loop compiles to different SASS here).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t a = smem_u32(bar);
  uint32_t done;
#ifdef NVFP4_TCGEN05_EMULATION
  const long long t0 = clock64();  // emulation build only: a hang becomes a trap after ~20 s
#endif
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done) : "r"(a), "r"(parity) : "memory");
#ifdef NVFP4_TCGEN05_EMULATION
    if (!done && clock64() - t0 > 40000000000ll) __trap();
#endif
  } while (!done);
}

struct Params {
  const uint8_t* sfa;  // blocked scale atoms of A (sfa_permuted storage)
  const uint8_t* sfb;
  __half* c;           // [L][M][N]
  float* workspace;    // split-K partials (unused when splits == 1)
  unsigned* counters;  // one per output tile, zero on entry, left zero on exit
  int M, N, K, L, splits, k_iters_per_split;
};

__global__ void __launch_bounds__(kThreads, 1)
nvfp4_gemm_sm100_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                        const Params p) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  uint64_t* full_bar = (uint64_t*)(smem + kStages * kStageBytes);
  uint64_t* empty_bar = full_bar + kStages;
  uint64_t* done_bar = empty_bar + kStages;
  uint32_t* tmem_slot = (uint32_t*)(done_bar + 1);
  __shared__ int s_is_last;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_tile = blockIdx.x, m_tile = blockIdx.y;
  const int l = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
  const int n0 = n_tile * kBlockN, m0 = m_tile * kBlockM;
  const int k_iters_total = p.K / kBlockK;
  const int k_begin = split * p.k_iters_per_split;
  const int k_end = min(k_iters_total, k_begin + p.k_iters_per_split);
  const int num_k = k_end - k_begin;  // >= 1 (host guarantees)
  const int k64_blocks = (p.K + 63) / 64;
  const int m_blocks128 = (p.M + 127) / 128, n_blocks128 = (p.N + 127) / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) { mbar_init(&full_bar[s], 1); mbar_init(&empty_bar[s], 1); }
    mbar_init(done_bar, 1);
    fence_mbar_init();
  }
  if (warp == 1) { tmem_alloc(tmem_slot, kTmemCols); tmem_relinquish(); }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const uint32_t tmem_base = *tmem_slot;

  if (warp == 0) {
    // ------------------------------------------------------------------ producer
    const uint8_t* sfa_src = p.sfa + ((size_t)(l * m_blocks128 + m0 / 128) * k64_blocks) * kSfAtomBytes;
    const uint8_t* sfb_src = p.sfb + ((size_t)(l * n_blocks128 + n0 / 128) * k64_blocks) * kSfAtomBytes;
    for (int i = 0; i < num_k; ++i) {
      const int s = i % kStages, round = i / kStages;
      if (i >= kStages) mbar_wait(&empty_bar[s], (round - 1) & 1);
      if (lane == 0) {
        uint8_t* st = smem + s * kStageBytes;
        const int kb = k_begin + i;
        mbar_expect_tx(&full_bar[s], kStageBytes);
        tma_load_2d(st, &tmap_a, &full_bar[s], kb * (kBlockK / 2), l * p.M + m0, kEvictLast);
        tma_load_2d(st + kStageABytes, &tmap_b, &full_bar[s], kb * (kBlockK / 2), l * p.N + n0, kEvictFirst);
        bulk_load(st + kStageABytes + kStageBBytes, sfa_src + (size_t)kb * kStageSFABytes, kStageSFABytes,
                     &full_bar[s], kEvictLast);
        // SFB atoms of a 128-row group are shared by the two N = 64 tiles of the group
        bulk_load(st + kStageABytes + kStageBBytes + kStageSFABytes, sfb_src + (size_t)kb * kStageSFBBytes,
                     kStageSFBBytes, &full_bar[s], kEvictLast);
      }
      __syncwarp();
    }
  } else if (warp == 1) {
    // ------------------------------------------------------------------ MMA issuer
    constexpr uint32_t idesc = make_idesc_mxf4nvf4(kBlockM, kBlockN);
    for (int i = 0; i < num_k; ++i) {
      const int s = i % kStages, round = i / kStages;
      mbar_wait(&full_bar[s], round & 1);
      tcgen05_fence_after_thread_sync();
      const uint32_t sa = smem_u32(smem + s * kStageBytes);
      const uint32_t sb = sa + kStageABytes;
      const uint32_t ssfa = sb + kStageBBytes;
      const uint32_t ssfb = ssfa + kStageSFABytes;
#pragma unroll
      for (int j = 0; j < kBlockK / kMmaK; ++j) {
        umma_cp_32x128b_warpx4(tmem_base + sfa_col(s, j), make_sf_desc(ssfa + j * kSfAtomBytes));
        umma_cp_32x128b_warpx4(tmem_base + sfb_cp_col(s, j), make_sf_desc(ssfb + j * kSfAtomBytes));
      }
#pragma unroll
      for (int j = 0; j < kBlockK / kMmaK; ++j) {
        umma_mma_mxf4nvf4(tmem_base, make_operand_desc_kmajor_sw128(sa + j * (kMmaK / 2)),
                          make_operand_desc_kmajor_sw128(sb + j * (kMmaK / 2)), idesc, tmem_base + sfa_col(s, j),
                          tmem_base + sfb_col(s, j, n0), (i > 0 || j > 0) ? 1u : 0u);
      }
      umma_commit(&empty_bar[s]);  // frees the smem stage once these MMAs have read it
    }
    umma_commit(done_bar);  // accumulator complete
  }
  __syncwarp();

  // -------------------------------------------------------------------- epilogue (all 4 warps)
  mbar_wait(done_bar, 0);
  tcgen05_fence_after_thread_sync();
  const int row = m0 + warp * 32 + lane;  // TMEM lane = row of the tile
  const size_t tile_id = ((size_t)l * gridDim.y + m_tile) * gridDim.x + n_tile;
  float* ws_tile = p.workspace + tile_id * (size_t)p.splits * (kBlockM * kBlockN);
#pragma unroll
  for (int c0 = 0; c0 < kBlockN; c0 += 32) {
    uint32_t r[32];
    tmem_ld_32x32b_x32(tmem_base + ((uint32_t)(warp * 32) << 16) + c0, r);
    tmem_wait_ld();
    if (p.splits == 1) {
      uint4* dst = (uint4*)(p.c + ((size_t)l * p.M + row) * p.N + n0 + c0);
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        uint4 o;
        uint32_t* ow = (uint32_t*)&o;
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          __half2 x = __floats2half2_rn(__uint_as_float(r[8 * v + 2 * h]), __uint_as_float(r[8 * v + 2 * h + 1]));
          ow[h] = *(uint32_t*)&x;
        }
        dst[v] = o;
      }
    } else {
      float4* dst = (float4*)(ws_tile + (size_t)split * (kBlockM * kBlockN) + (warp * 32 + lane) * kBlockN + c0);
#pragma unroll
      for (int v = 0; v < 8; ++v)
        dst[v] = make_float4(__uint_as_float(r[4 * v]), __uint_as_float(r[4 * v + 1]), __uint_as_float(r[4 * v + 2]),
                             __uint_as_float(r[4 * v + 3]));
    }
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 1) tmem_dealloc(tmem_base, kTmemCols);

  if (p.splits > 1) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned prev = atomicAdd(&p.counters[tile_id], 1u);
      s_is_last = (prev == (unsigned)p.splits - 1);
      if (s_is_last) p.counters[tile_id] = 0;  // ready for the next launch
    }
    __syncthreads();
    if (s_is_last) {
      __threadfence();
      const int r_local = warp * 32 + lane;
      __half* dst = p.c + ((size_t)l * p.M + row) * p.N + n0;
      for (int c = 0; c < kBlockN; c += 4) {
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int sp = 0; sp < p.splits; ++sp) {
          const float4 v = __ldcg((const float4*)(ws_tile + (size_t)sp * (kBlockM * kBlockN) + r_local * kBlockN + c));
          acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
        __half2 h0 = __floats2half2_rn(acc.x, acc.y), h1 = __floats2half2_rn(acc.z, acc.w);
        uint2 o = make_uint2(*(uint32_t*)&h0, *(uint32_t*)&h1);
        *(uint2*)(dst + c) = o;
      }
    }
  }
}

// ---------------------------------------------------------------------- host side (no torch)
// Packed fp4 operand [rows_total][K/2 bytes] as UINT8 (16U4 maps cannot be encoded on Hopper; the
// bytes and the 128B swizzle are the same), box = 128 bytes (256 fp4) x box_rows, SWIZZLE_128B.
static int encode_operand_map(CUtensorMap* map, const void* ptr, int rows_total, int K, int box_rows) {
  if (!nvfp4::get_encode_tiled()) return 1001;
  return nvfp4::make_fp4_map(map, ptr, (uint64_t)rows_total, (uint64_t)(K / 2), (uint32_t)box_rows,
                             (uint32_t)(kBlockK / 2), CU_TENSOR_MAP_SWIZZLE_128B) == 0 ? 0 : 1002;
}

// Number of K splits for a problem; the workspace must hold L*(M/128)*(N/64)*splits*128*64 floats and the
// counters L*(M/128)*(N/64) zeroed unsigned ints (only when splits > 1).
static inline int choose_splits(int M, int N, int K, int L, int num_sms) {
  const int tiles = L * (M / kBlockM) * (N / kBlockN);
  const int k_iters = K / kBlockK;
  int s = num_sms / (tiles > 0 ? tiles : 1);
  if (s > k_iters / 4) s = k_iters / 4;
  if (s < 1) s = 1;
  return s;
}

}  // namespace nvfp4_sm100

// Returns 0 on success, else an error code (CUDA error or 1000+ for argument/encode problems).
// Launches on the default (legacy) queue 0.
extern "C" int nvfp4_gemm_sm100_launch(const void* a, const void* b, const void* sfa_perm, const void* sfb_perm,
                                       void* c, void* workspace, void* counters, int M, int N, int K, int L,
                                       int splits) {
  using namespace nvfp4_sm100;
  if (M % kBlockM || N % kBlockN || K % kBlockK || L < 1) return 1000;
  const int k_iters = K / kBlockK;
  if (splits < 1) splits = 1;
  if (splits > k_iters) splits = k_iters;
  const int per = (k_iters + splits - 1) / splits;
  splits = (k_iters + per - 1) / per;  // no empty split
  if (splits > 1 && (!workspace || !counters)) return 1003;
  CUtensorMap ma, mb;
  int e = encode_operand_map(&ma, a, M * L, K, kBlockM);
  if (e) return e;
  e = encode_operand_map(&mb, b, N * L, K, kBlockN);
  if (e) return e;
  static bool attr_done = false;
  if (!attr_done) {
    cudaError_t ce = cudaFuncSetAttribute(nvfp4_gemm_sm100_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kSmemBytes);
    if (ce != cudaSuccess) return (int)ce;
    attr_done = true;
  }
  Params p;
  p.sfa = (const uint8_t*)sfa_perm;
  p.sfb = (const uint8_t*)sfb_perm;
  p.c = (__half*)c;
  p.workspace = (float*)workspace;
  p.counters = (unsigned*)counters;
  p.M = M; p.N = N; p.K = K; p.L = L; p.splits = splits; p.k_iters_per_split = per;
  dim3 grid(N / kBlockN, M / kBlockM, L * splits);
  nvfp4_gemm_sm100_kernel<<<grid, kThreads, kSmemBytes>>>(ma, mb, p);
  return (int)cudaGetLastError();
}

extern "C" int nvfp4_gemm_sm100_choose_splits(int M, int N, int K, int L, int num_sms) {
  return nvfp4_sm100::choose_splits(M, N, K, L, num_sms);
}
