"""NVFP4 block-scaled GEMM: C[m, n, l] = sum_k A[m, k, l] * SFA[m, k/16, l] * B[n, k, l] * SFB[n, k/16, l].

One file, uploadable as is. CUDA C++ compiled once per process with torch's load_inline.

Dispatch by compute capability:
  * 9.x  (H100/H200, sm_90a): this file's Hopper path. fp4 x e4m3 is decoded exactly to fp16 and fed
    to wgmma (fp32 accumulation).
  * 10.x+ (B200, sm_100a): `_run_sm100`, filled in by the Blackwell path (tcgen05, kernels/sm100/).

CUDA sources (module-level string constants, no torch headers, compile with plain nvcc):
  * CUDA_COMMON  - everything that is not the MMA: the balanced split-K tile schedule, the blocked
                   scale-factor indexing, TMA / bulk-copy / mbarrier helpers, epilogue addressing and
                   the host-side tensor-map encoder. Shared with the sm_100a path.
  * CUDA_SM90    - the sm_90a kernel (fp4 decode + wgmma) and its extern "C" launcher.
  CUDA_SM90 is defined as CUDA_COMMON + the kernel text, so it is one complete translation unit:
  nvcc -gencode=arch=compute_90a,code=sm_90a.
  * CPP_SM90     - the torch binding (tensors -> raw pointers), compiled by the host compiler.

Hopper kernel design (one CTA per SM, 512 threads = 4 warpgroups):
  * GEMM is computed transposed (C^T = B A^T): B rows (the large N side) are wgmma's M and come from
    registers (RS form), A rows (the small M side) are wgmma's N and come from shared memory.
  * warpgroup 3 (one working warp): TMA producer. fp4 tiles (rows x 64 bytes) by 2-D TMA, scale tiles
    (512-byte blocks of the blocked layout, contiguous) by 1-D bulk copies, into a 4-stage mbarrier ring.
  * warpgroup 0 ("transform"): decodes the A tile (128 rows x 128 k) to fp16 * scale into a 128B-swizzled
    K-major buffer, which wgmma reads as its B operand.
  * warpgroups 1, 2 (consumers): each decodes 64*MB B rows x 128 k straight into wgmma A fragments, then
    wgmma.m64n128k16 (fp16 in, fp32 accumulators), one batch of 8 per m64 block, waited before the next
    decode (registers read by an RS wgmma must not be rewritten while it runs).
  * B tile height: MB = 2 (256 rows; setmaxnreg gives consumers 208 registers) halves the A-decode work per
    MMA; MB = 1 (128 rows) gives twice as many work units, better when an SM would get few k-blocks.
    The launcher picks per shape (MB2_MIN_KBLOCKS_PER_SM).
  * K is permuted consistently on both sides (a GEMM is invariant to that) so that each thread's
    fragment comes from one 16-byte load and each fp16 pair from one 32-bit word.
  * Exactness: fp4 decodes to a*2^-14 (fp16, subnormal for 0.5), times (scale*2^7) -> a*s*2^-7 exactly in
    fp16; products are exact in fp32; the epilogue multiplies by 2^14.
  * Schedule: the (tile, k-block) iteration space is cut into `grid` equal contiguous ranges (grid = #SMs),
    so every SM gets the same work even when M = 128 gives only 16-56 tiles. A tile split across CTAs is
    reduced by the last CTA to finish (fp32 partials in a workspace, per-tile counters with release /
    acquire fences, fixed summation order, counters reset for the next call).
"""

import torch

from task import input_t, output_t

# ----------------------------------------------------------------------------------------------------
# CUDA: shared, not-the-MMA part (also used by the sm_100a path)
# ----------------------------------------------------------------------------------------------------
CUDA_COMMON = r"""
#include <cuda.h>            // CUtensorMap and its enums (header only; the driver is reached at run time)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>

namespace nvfp4 {

// ---- problem tiling -------------------------------------------------------------------------------
constexpr int TILE_ROWS = 128;          // rows of A or B per tile = one row block of the blocked layout
constexpr int BK = 128;                 // k elements per pipeline stage
constexpr int BK_BYTES = BK / 2;        // fp4 bytes per row per stage (64)
constexpr int SF_BLOCK_BYTES = 512;     // one 128-row x 4-scale block of the blocked layout
constexpr int SF_STAGE_BYTES = (BK / 64) * SF_BLOCK_BYTES;  // scales of one tile per stage (1024)

// ---- blocked (cuBLAS "128x4") scale-factor layout -----------------------------------------------------
// row r = 128*rb + 32*r4 + r32, scale column j = 4*cb + c4:
// byte = (rb*kb64 + cb)*512 + r32*16 + r4*4 + c4, with kb64 = ceil(K/64); batches outermost.
__host__ __device__ inline uint32_t sf_inblock_offset(int row_in_tile, int c4) {
  return (uint32_t)((row_in_tile & 31) * 16 + ((row_in_tile >> 5) & 3) * 4 + c4);
}
__host__ __device__ inline uint64_t sf_block_offset(int row_block, int col_block, int kb64) {
  return ((uint64_t)row_block * kb64 + col_block) * SF_BLOCK_BYTES;
}
__host__ __device__ inline uint64_t sf_batch_bytes(int rows, int K) {
  return (uint64_t)((rows + 127) / 128) * ((K + 63) / 64) * SF_BLOCK_BYTES;
}

// ---- balanced split-K schedule --------------------------------------------------------------------
// Iterations (tile, k-block) are numbered it = tile*nk + kb. CTA c owns [begin(c), begin(c+1)).
// A tile whose iterations span several CTAs is finished by the last of them (see Fixup below).
struct Schedule {
  int m_tiles, n_tiles, L, nk;
  long long total;   // tiles * nk
  int grid;
  __host__ __device__ long long begin(int c) const { return (long long)c * total / grid; }
  __host__ __device__ int cta_of(long long it) const { return (int)(((it + 1) * grid - 1) / total); }
  __host__ __device__ int tiles() const { return m_tiles * n_tiles * L; }
  // tile -> (batch, n tile, m tile); m fastest so neighbouring iterations share B rows in L2
  __host__ __device__ void decode(long long t, int& l, int& nt, int& mt) const {
    mt = (int)(t % m_tiles);
    long long r = t / m_tiles;
    nt = (int)(r % n_tiles);
    l = (int)(r / n_tiles);
  }
  // number of CTAs that contribute to tile t, and the first of them
  __host__ __device__ int first_cta(long long t) const { return cta_of(t * nk); }
  __host__ __device__ int num_parts(long long t) const { return cta_of(t * nk + nk - 1) - cta_of(t * nk) + 1; }
  // workspace slot of CTA c's part of tile t: each CTA has at most two partial tiles (its first, its last)
  __host__ __device__ int slot(int c, long long t) const { return 2 * c + (t == begin(c) / nk ? 0 : 1); }
};

// ---- epilogue addressing: C is [M, N, L] fp16 with strides (N, 1, M*N) -------------------------------
__host__ __device__ inline uint64_t c_offset(int m, int n, int l, int M, int N) {
  return ((uint64_t)l * M + m) * (uint64_t)N + n;
}

// ---- shared memory / mbarrier / TMA helpers ---------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(bar)) : "memory");
}
// wait until the phase with parity `parity` has completed
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\n"
      "bra LAB_WAIT;\n"
      "DONE:\n"
      "}\n" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// 2-D tiled TMA load, completion counted in bytes on `bar`
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      :: "r"(smem_u32(dst)), "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(x), "r"(y) : "memory");
}
// 1-D bulk copy global -> shared (bytes % 16 == 0, both addresses 16-byte aligned)
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      :: "r"(smem_u32(dst)), "l"((uint64_t)src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"((uint64_t)map) : "memory");
}
// ordinary st.shared -> visible to the async proxy (wgmma / TMA) after the following barrier
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(nthreads) : "memory");
}

// ---- fixup of tiles split across CTAs --------------------------------------------------------------------
// Partials are fp32, stored in a fragment-native order (each thread writes / reads its own 16-byte
// chunks, coalesced across the warp). `unit` is one reduction unit (a tile, or a tile half owned by one
// warpgroup); counters are reset by the finishing CTA so the buffer can be reused by the next call.
// Call from ONE thread, after a barrier that follows the unit's partial stores (release, cumulative over the
// barrier); the returned count is acquired, so the caller's barrier-mates may then read the other parts.
__device__ __forceinline__ int fixup_arrive(int* counter) {
  int old;
  asm volatile("fence.acq_rel.gpu;\n\tatom.relaxed.gpu.global.add.s32 %0, [%1], 1;\n\tfence.acq_rel.gpu;"
               : "=r"(old) : "l"(counter) : "memory");
  return old;
}

// ---- host: tensor maps through the driver entry point (no -lcuda needed) ------------------------------------
typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn get_encode_tiled() {
  static EncodeTiledFn fn = nullptr;
  if (!fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (EncodeTiledFn)p;
  }
  return fn;
}

// A 2-D byte view of packed fp4 rows: [rows, row_bytes], box [box_rows, box_bytes]; out-of-range rows read 0.
static int make_fp4_map(CUtensorMap* map, const void* base, uint64_t rows, uint64_t row_bytes, uint32_t box_rows,
                        uint32_t box_bytes, CUtensorMapSwizzle swz) {
  EncodeTiledFn enc = get_encode_tiled();
  if (!enc) return -1;
  cuuint64_t dims[2] = {row_bytes, rows};
  cuuint64_t strides[1] = {row_bytes};
  cuuint32_t box[2] = {box_bytes, box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : (int)r;
}

}  // namespace nvfp4
"""

# ----------------------------------------------------------------------------------------------------
# CUDA: the sm_90a kernel (fp4 -> fp16 decode + wgmma) and its launcher
# ----------------------------------------------------------------------------------------------------
CUDA_SM90 = CUDA_COMMON + r"""
// target: sm_90a (wgmma, setmaxnreg)
#ifndef NVFP4_PROFILE_MODE
#define NVFP4_PROFILE_MODE 0   // bench bottleneck probes (wrong results): bit 1 skip A decode, 2 skip B decode,
                               // 4 skip the wgmmas, 8 skip the transform's loads/decode/stores
#endif
namespace nvfp4 {
namespace sm90 {

// CTA tile: B_ROWS B rows (NUM_CWG consumer warpgroups x MB m64 blocks each) x 128 A rows, 128 k per stage.
// MB = 2 (256-row B tiles) halves the A-decode work per MMA; MB = 1 (128-row tiles) gives twice the work
// units, better when each SM would get only a few k-blocks. The launcher picks one per shape.
constexpr int NUM_CWG = 2;                    // consumer warpgroups
constexpr int PRODUCER_WARP = 4 * (1 + NUM_CWG);
constexpr int THREADS = 32 * (PRODUCER_WARP + 4);  // WG0 transform, WG1-2 consumers, WG3 producer (one warp works)
constexpr int ACT_ATOM_BYTES = TILE_ROWS * 128;    // 64 k x 128 rows, fp16, 128B swizzle
constexpr int ACT_STAGE_BYTES = 2 * ACT_ATOM_BYTES;  // 32768
constexpr int EPI_LD = 72;                         // halves per row of the epilogue buffer
constexpr int EPI_BYTES = TILE_ROWS * EPI_LD * 2;  // per consumer warpgroup (one m64 block at a time)

template <int MB_>
struct Cfg {
  static constexpr int MB = MB_;                       // m64 blocks (64 B rows each) per consumer warpgroup
  static constexpr int B_ROWS = 64 * NUM_CWG * MB;     // 256 or 128
  static constexpr int RAW_STAGES = 4;                 // TMA ring depth (fp4 + scales)
  static constexpr int ACT_STAGES = MB == 2 ? 2 : 3;   // decoded A buffers
  static constexpr int PRODUCER_REGS = 24, TRANSFORM_REGS = 72, CONSUMER_REGS = 208;  // setmaxnreg (MB == 2)
  static constexpr int RAW_B = 0;                                  // offsets inside one raw stage
  static constexpr int RAW_A = B_ROWS * BK_BYTES;
  static constexpr int RAW_SB = RAW_A + TILE_ROWS * BK_BYTES;      // 2 x 1024: B scale tiles of two 128-row blocks
  static constexpr int RAW_SA = RAW_SB + 2 * SF_STAGE_BYTES;
  static constexpr int RAW_STAGE_BYTES = RAW_SA + SF_STAGE_BYTES;
  static constexpr int OFF_RAW = 0;
  static constexpr int OFF_ACT = OFF_RAW + RAW_STAGES * RAW_STAGE_BYTES;
  static constexpr int OFF_EPI = OFF_ACT + ACT_STAGES * ACT_STAGE_BYTES;
  static constexpr int OFF_BAR = OFF_EPI + NUM_CWG * EPI_BYTES;
  static constexpr int SMEM_BYTES = OFF_BAR + 256 + 1024;          // + barriers + alignment slack
  static constexpr int WS_FLOAT4_PER_UNIT = MB * 16 * 128;         // one consumer warpgroup's (64*MB) x 128 partial
  static_assert(MB == 1 || MB == 2, "MB");
  static_assert(RAW_STAGE_BYTES % 1024 == 0, "stage alignment");
  static_assert(SMEM_BYTES <= 232448, "shared memory");
};
#define NVFP4_SM90_CFG(MBV)                                                                                  \
  constexpr int MB = Cfg<MBV>::MB, B_ROWS = Cfg<MBV>::B_ROWS, RAW_STAGES = Cfg<MBV>::RAW_STAGES;            \
  constexpr int ACT_STAGES = Cfg<MBV>::ACT_STAGES, PRODUCER_REGS = Cfg<MBV>::PRODUCER_REGS;                 \
  constexpr int TRANSFORM_REGS = Cfg<MBV>::TRANSFORM_REGS, CONSUMER_REGS = Cfg<MBV>::CONSUMER_REGS;         \
  constexpr int RAW_B = Cfg<MBV>::RAW_B, RAW_A = Cfg<MBV>::RAW_A, RAW_SB = Cfg<MBV>::RAW_SB;                \
  constexpr int RAW_SA = Cfg<MBV>::RAW_SA, RAW_STAGE_BYTES = Cfg<MBV>::RAW_STAGE_BYTES;                     \
  constexpr int OFF_RAW = Cfg<MBV>::OFF_RAW, OFF_ACT = Cfg<MBV>::OFF_ACT, OFF_EPI = Cfg<MBV>::OFF_EPI;      \
  constexpr int OFF_BAR = Cfg<MBV>::OFF_BAR, WS_FLOAT4_PER_UNIT = Cfg<MBV>::WS_FLOAT4_PER_UNIT;             \
  (void)MB; (void)B_ROWS; (void)PRODUCER_REGS; (void)TRANSFORM_REGS; (void)CONSUMER_REGS; (void)RAW_B;      \
  (void)OFF_RAW; (void)OFF_EPI; (void)WS_FLOAT4_PER_UNIT;

struct Params {
  const uint8_t* sfa;   // blocked scales of A (batch stride sfa_batch bytes)
  const uint8_t* sfb;
  __half* c;
  float4* ws;           // fixup partials
  int* counters;        // one per (tile, consumer warpgroup), zero between calls
  uint64_t sfa_batch, sfb_batch;
  int M, N, K, L, kb64;
  int b_row_blocks;     // ceil(N / 128): blocked-scale row blocks of B per batch
  int vec_store;        // N % 8 == 0: 16-byte stores of C
  Schedule sch;         // tiles: m_tiles = ceil(M/128), n_tiles = ceil(N/B_ROWS)
};

// fp4 pair -> fp16x2 bits of (value * 2^-14): lane 0 <- nibble I, lane 1 <- nibble I+4 of w.
// e2m1 "s e e m" goes to fp16 bits 15 | 11..9 (exponent ee, top mantissa bit m); e == 0 gives the
// fp16 subnormal 0.5 * 2^-14, so every code decodes exactly.
template <int I>
__device__ __forceinline__ uint32_t fp4x2_to_f16x2_scaled(uint32_t w) {
  uint32_t mag = (I * 4 <= 9 ? (w << (9 - 4 * I)) : (w >> (4 * I - 9))) & 0x0E000E00u;
  uint32_t sgn = (w << (12 - 4 * I)) & 0x80008000u;
  return mag | sgn;
}
// e4m3 scale byte -> (s * 2^7, s * 2^7) fp16x2 (exact: s <= 448 -> <= 57344)
__device__ __forceinline__ uint32_t scale_x2(uint32_t byte) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(byte | (byte << 8)), __NV_E4M3);
  __half2 s = *reinterpret_cast<__half2*>(&h);
  s = __hmul2(s, __floats2half2_rn(128.f, 128.f));
  return *reinterpret_cast<uint32_t*>(&s);
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) {
  __half2 r = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}
template <int I>
__device__ __forceinline__ uint32_t dec(uint32_t w, uint32_t s2) {
  return hmul2_u32(fp4x2_to_f16x2_scaled<I>(w), s2);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int q) {
  return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds16(uint32_t addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// K permutation (inside one 128-k stage; both operands use it, so the GEMM is unchanged).
// Physical element p = 32t + 8q + n (t = 16-byte chunk of the row, q = 32-bit word, n = nibble) sits at
// logical k = 16*(2q + ((n>>1)&1)) + 2t + 8*(n&1) + (n>>2). Then the 4 threads of a quad (t = 0..3) each
// need exactly one 16-byte chunk of a row per stage, and every fp16 pair comes from one word.

// ---- wgmma (sm_90a) ----------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  uint64_t d = 0;
  d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)(16 >> 4) << 16;       // leading byte offset (unused for swizzled K-major)
  d |= (uint64_t)(1024 >> 4) << 32;     // stride byte offset: 8 rows x 128 B
  d |= (uint64_t)1 << 62;               // 128-byte swizzle
  return d;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void keep(const uint32_t (&a)[4]) {
  asm volatile("" :: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]) : "memory");
}
__device__ __forceinline__ void keep_acc(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

// one k16 step of one m64 block: fragments of rows g (x0) and g+8 (x1) from word q, pair base pb
template <int PB>
__device__ __forceinline__ void decode_step(uint32_t (&f)[4], uint32_t w0, uint32_t w1, uint32_t s0, uint32_t s1) {
  f[0] = dec<PB>(w0, s0);
  f[1] = dec<PB>(w1, s1);
  f[2] = dec<PB + 1>(w0, s0);
  f[3] = dec<PB + 1>(w1, s1);
}

// ---- the kernel ----------------------------------------------------------------------------------------------
template <int MBV>
__global__ void __launch_bounds__(THREADS, 1)
gemm_kernel(const __grid_constant__ Params p, const __grid_constant__ CUtensorMap map_a,
            const __grid_constant__ CUtensorMap map_b) {
  NVFP4_SM90_CFG(MBV)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  // keep the pointer derived from smem_raw (shared window) while aligning to 1024 B
  uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const uint32_t sbase = smem_u32(smem);
  uint64_t* raw_full = (uint64_t*)(smem + OFF_BAR);
  uint64_t* raw_empty = raw_full + RAW_STAGES;
  uint64_t* act_full = raw_empty + RAW_STAGES;
  uint64_t* act_empty = act_full + ACT_STAGES;
  int* fix_flag = (int*)(act_empty + ACT_STAGES);

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const Schedule& sch = p.sch;
  const int cta = blockIdx.x;
  // (iteration range computed inside each role, after its setmaxnreg: nothing lives across it)
#define NVFP4_ITER_RANGE                                                     \
  const long long it_begin = sch.begin(cta), it_end = sch.begin(cta + 1); \
  const int nk = sch.nk;                                                   \
  (void)nk;

  if (tid == 0) {
    for (int s = 0; s < RAW_STAGES; ++s) {
      mbar_init(&raw_full[s], 1);
      mbar_init(&raw_empty[s], 4 + 4 * NUM_CWG);   // every transform and consumer warp
    }
    for (int s = 0; s < ACT_STAGES; ++s) { mbar_init(&act_full[s], 4); mbar_init(&act_empty[s], 4 * NUM_CWG); }
    fence_mbar_init();
  }
  __syncthreads();

  if (warp < 4) {
    // ------------------------------------------------------------------ transform: A tile -> fp16 smem
    if (MB == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(TRANSFORM_REGS));
    NVFP4_ITER_RANGE
    const int r = tid;  // row of the A tile
    for (long long it = it_begin; it < it_end; ++it) {
      const int j = (int)(it - it_begin);
      const int s = j % RAW_STAGES;
      const int as = j % ACT_STAGES;
      mbar_wait(&raw_full[s], (j / RAW_STAGES) & 1);
#if NVFP4_PROFILE_MODE & 8
      __syncwarp();
      if (lane == 0) mbar_arrive(&raw_empty[s]);
      mbar_wait(&act_empty[as], ((j / ACT_STAGES) & 1) ^ 1);
      __syncwarp();
      if (lane == 0) mbar_arrive(&act_full[as]);
      continue;
#endif
      const uint32_t st = sbase + OFF_RAW + s * RAW_STAGE_BYTES;
      uint4 v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c)  // 64-byte TMA swizzle: chunk c of row r sits at c ^ ((r >> 1) & 3)
        v[c] = lds128(st + RAW_A + r * 64 + ((c ^ ((r >> 1) & 3)) << 4));
      const uint32_t sc0 = lds32(st + RAW_SA + sf_inblock_offset(r, 0));
      const uint32_t sc1 = lds32(st + RAW_SA + SF_BLOCK_BYTES + sf_inblock_offset(r, 0));
      __syncwarp();
      if (lane == 0) mbar_arrive(&raw_empty[s]);
      uint32_t sc[8];
#pragma unroll
      for (int b = 0; b < 8; ++b) sc[b] = scale_x2(((b < 4 ? sc0 : sc1) >> (8 * (b & 3))) & 0xFF);

      mbar_wait(&act_empty[as], ((j / ACT_STAGES) & 1) ^ 1);
      const uint32_t act = sbase + OFF_ACT + as * ACT_STAGE_BYTES;
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {     // k16 step
        const int q = ks >> 1;             // word inside each 16-byte chunk
#pragma unroll
        for (int h = 0; h < 2; ++h) {      // slots 0-7 / 8-15 of the k16 step
          uint32_t o[4];
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const uint32_t w = word(v[t], q);
            const uint32_t s2 = sc[2 * t + (ks >> 2)];
            const int pi = 2 * (ks & 1) + h;
#if NVFP4_PROFILE_MODE & 1
            o[t] = w ^ s2 ^ pi;
#else
            o[t] = pi == 0 ? dec<0>(w, s2) : pi == 1 ? dec<1>(w, s2) : pi == 2 ? dec<2>(w, s2) : dec<3>(w, s2);
#endif
          }
          const int chunk = 2 * (ks & 3) + h;  // 16-byte chunk inside the 128-byte row of the 64-k atom
          sts128(act + (ks >> 2) * ACT_ATOM_BYTES + r * 128 + ((chunk ^ (r & 7)) << 4), o[0], o[1], o[2], o[3]);
        }
      }
      fence_proxy_async();
      __syncwarp();
      if (lane == 0) mbar_arrive(&act_full[as]);
    }
  } else if (warp < PRODUCER_WARP) {
    // ------------------------------------------------------------------ consumers: decode B + wgmma
    if (MB == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
    NVFP4_ITER_RANGE
    const int cw = (warp >> 2) - 1;            // consumer warpgroup: B rows 64*MB*cw .. of the tile
    const int ct = tid - 128 * (cw + 1);       // thread in warpgroup
    const int wq = ct >> 5;                    // warp in warpgroup
    const int g = lane >> 2, t = lane & 3;
    const int rw = 64 * MB * cw + 16 * wq + g; // row of block 0, half 0; block b half h: rw + 64*b + 8*h
    const uint32_t epi = sbase + OFF_EPI + cw * EPI_BYTES;
    float acc[MB][64];

    long long it = it_begin;
    while (it < it_end) {
      const long long tile = it / nk;
      const long long seg_begin = it;
      const long long seg_end = (tile + 1) * nk < it_end ? (tile + 1) * nk : it_end;
      // B rows of this tile start at nt*B_ROWS; with B_ROWS % 128 == 0 its scale tiles are blocks 0, 1 of the stage
#pragma unroll
      for (int b = 0; b < MB; ++b)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[b][i] = 0.f;

      for (; it < seg_end; ++it) {
        const int j = (int)(it - it_begin);
        const int s = j % RAW_STAGES;
        const int as = j % ACT_STAGES;
        mbar_wait(&raw_full[s], (j / RAW_STAGES) & 1);
        const uint32_t st = sbase + OFF_RAW + s * RAW_STAGE_BYTES;
        const uint32_t act = sbase + OFF_ACT + as * ACT_STAGE_BYTES;
#pragma unroll
        for (int b = 0; b < MB; ++b) {
          const int r0 = rw + 64 * b, r1 = r0 + 8;
          const uint4 x0 = lds128(st + RAW_B + r0 * 64 + t * 16);
          const uint4 x1 = lds128(st + RAW_B + r1 * 64 + t * 16);
          const uint32_t sb0 = lds16(st + RAW_SB + (r0 >> 7) * SF_STAGE_BYTES + (t >> 1) * SF_BLOCK_BYTES +
                                     sf_inblock_offset(r0 & 127, 2 * (t & 1)));
          const uint32_t sb1 = lds16(st + RAW_SB + (r1 >> 7) * SF_STAGE_BYTES + (t >> 1) * SF_BLOCK_BYTES +
                                     sf_inblock_offset(r1 & 127, 2 * (t & 1)));
          if (b == MB - 1) {
            __syncwarp();
            if (lane == 0) mbar_arrive(&raw_empty[s]);
          }
          const uint32_t s00 = scale_x2(sb0 & 0xFF), s01 = scale_x2(sb0 >> 8);
          const uint32_t s10 = scale_x2(sb1 & 0xFF), s11 = scale_x2(sb1 >> 8);

          uint32_t frag[8][4];
#pragma unroll
          for (int ks = 0; ks < 8; ++ks) {
            const int q = ks >> 1;
            const uint32_t w0 = word(x0, q), w1 = word(x1, q);
            const uint32_t a0 = (ks >> 2) ? s01 : s00;
            const uint32_t a1 = (ks >> 2) ? s11 : s10;
#if NVFP4_PROFILE_MODE & 2
            frag[ks][0] = w0 ^ a0; frag[ks][1] = w1 ^ a1; frag[ks][2] = w0 ^ ks; frag[ks][3] = w1 ^ ks;
#else
            if ((ks & 1) == 0) decode_step<0>(frag[ks], w0, w1, a0, a1);
            else decode_step<2>(frag[ks], w0, w1, a0, a1);
#endif
          }
          if (b == 0) mbar_wait(&act_full[as], (j / ACT_STAGES) & 1);
          wgmma_fence();
#if !(NVFP4_PROFILE_MODE & 4)
          const uint64_t dbase = sw128_desc(act);   // k16 step ks: +32 B inside the atom, +ACT_ATOM_BYTES per atom
#pragma unroll
          for (int ks = 0; ks < 8; ++ks)
            wgmma_m64n128k16_rs(acc[b], frag[ks], dbase + (uint64_t)((((ks >> 2) * ACT_ATOM_BYTES) + (ks & 3) * 32) >> 4));
#endif
          wgmma_commit();
          wgmma_wait<0>();
          keep_acc(acc[b]);
#pragma unroll
          for (int ks = 0; ks < 8; ++ks) keep(frag[ks]);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&act_empty[as]);
      }

      // ---------------------------------------------------------------- epilogue of this tile
      int l, nt, mt;
      sch.decode(tile, l, nt, mt);
      const bool whole = seg_begin == tile * nk && seg_end == (tile + 1) * nk;
      bool finish = true;
      if (!whole) {
        const int unit = (int)(tile * NUM_CWG + cw);
        float4* mine = p.ws + ((size_t)sch.slot(cta, tile) * NUM_CWG + cw) * WS_FLOAT4_PER_UNIT;
#pragma unroll
        for (int b = 0; b < MB; ++b)
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
            mine[(16 * b + jj) * 128 + ct] =
                make_float4(acc[b][4 * jj], acc[b][4 * jj + 1], acc[b][4 * jj + 2], acc[b][4 * jj + 3]);
        named_bar_sync(1 + cw, 128);
        if (ct == 0) fix_flag[cw] = fixup_arrive(&p.counters[unit]);
        named_bar_sync(1 + cw, 128);
        const int parts = sch.num_parts(tile);
        finish = fix_flag[cw] == parts - 1;
        named_bar_sync(1 + cw, 128);   // fix_flag may be rewritten by the next tile
        if (finish) {
          const int c0 = sch.first_cta(tile);
#pragma unroll
          for (int b = 0; b < MB; ++b)
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[b][i] = 0.f;
          for (int part = 0; part < parts; ++part) {   // fixed order: deterministic sums
            const float4* src = p.ws + ((size_t)sch.slot(c0 + part, tile) * NUM_CWG + cw) * WS_FLOAT4_PER_UNIT;
#pragma unroll
            for (int b = 0; b < MB; ++b)
#pragma unroll
              for (int jj = 0; jj < 16; ++jj) {
                const float4 u = __ldcg(src + (16 * b + jj) * 128 + ct);
                acc[b][4 * jj] += u.x; acc[b][4 * jj + 1] += u.y; acc[b][4 * jj + 2] += u.z; acc[b][4 * jj + 3] += u.w;
              }
          }
          if (ct == 0) p.counters[unit] = 0;
        }
      }
      if (finish) {
        // per m64 block: registers -> smem [m][n] (transpose) -> 16-byte coalesced stores of C rows
#pragma unroll
        for (int b = 0; b < MB; ++b) {
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int n_local = 16 * wq + g + 8 * (e >> 1);
              const int m_local = 8 * jj + 2 * t + (e & 1);
              const unsigned short hv = __half_as_ushort(__float2half_rn(acc[b][4 * jj + e] * 16384.f));
              asm volatile("st.shared.u16 [%0], %1;" :: "r"(epi + (m_local * EPI_LD + n_local) * 2), "h"(hv) : "memory");
            }
          named_bar_sync(1 + cw, 128);
#pragma unroll
          for (int pass = 0; pass < 8; ++pass) {
            const int idx = pass * 128 + ct;
            const int m_local = idx >> 3, ch = idx & 7;
            const int m = mt * TILE_ROWS + m_local;
            const int n = nt * B_ROWS + 64 * MB * cw + 64 * b + ch * 8;
            if (m < p.M && n < p.N) {
              const uint4 val = lds128(epi + (m_local * EPI_LD + ch * 8) * 2);
              __half* dst = p.c + c_offset(m, n, l, p.M, p.N);
              if (p.vec_store && n + 8 <= p.N) {
                *(uint4*)dst = val;
              } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                  const uint32_t wv = word(val, i >> 1);
                  if (n + i < p.N) dst[i] = __ushort_as_half((unsigned short)(wv >> (16 * (i & 1))));
                }
              }
            }
          }
          named_bar_sync(1 + cw, 128);
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ producer: TMA + bulk copies
    if (MB == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
    if (warp == PRODUCER_WARP && lane == 0) {
      NVFP4_ITER_RANGE
      prefetch_tensormap(&map_a);
      prefetch_tensormap(&map_b);
      for (long long it = it_begin; it < it_end; ++it) {
        const int j = (int)(it - it_begin);
        const int s = j % RAW_STAGES;
        mbar_wait(&raw_empty[s], ((j / RAW_STAGES) & 1) ^ 1);
        int l, nt, mt;
        sch.decode(it / nk, l, nt, mt);
        const int kb = (int)(it % nk);
        uint8_t* st = smem + OFF_RAW + s * RAW_STAGE_BYTES;
        const int rb0 = (nt * B_ROWS) >> 7;                      // first 128-row scale block of this B tile
        const int rb_last = (nt * B_ROWS + B_ROWS - 1) >> 7;
        const int nsb = (rb_last < p.b_row_blocks ? rb_last : p.b_row_blocks - 1) - rb0 + 1;  // never past the end
        mbar_expect_tx(&raw_full[s], (B_ROWS + TILE_ROWS) * BK_BYTES + (nsb + 1) * SF_STAGE_BYTES);
        tma_load_2d(st + RAW_B, &map_b, &raw_full[s], kb * BK_BYTES, l * p.N + nt * B_ROWS);
        tma_load_2d(st + RAW_A, &map_a, &raw_full[s], kb * BK_BYTES, l * p.M + mt * TILE_ROWS);
        for (int i = 0; i < nsb; ++i)
          bulk_load(st + RAW_SB + i * SF_STAGE_BYTES,
                    p.sfb + l * p.sfb_batch + sf_block_offset(rb0 + i, kb * (BK / 64), p.kb64),
                    SF_STAGE_BYTES, &raw_full[s]);
        bulk_load(st + RAW_SA, p.sfa + l * p.sfa_batch + sf_block_offset(mt, kb * (BK / 64), p.kb64),
                  SF_STAGE_BYTES, &raw_full[s]);
      }
    }
  }
}

}  // namespace sm90
}  // namespace nvfp4

namespace nvfp4 {
namespace sm90 {
// Work per SM in k-blocks if B tiles were 256 rows; below this, 128-row tiles (twice the work units) win.
constexpr int MB2_MIN_KBLOCKS_PER_SM = 16;

inline int choose_mb(int M, int N, int K, int L, int num_sms) {
  const long long iters = (long long)((M + 127) / 128) * ((N + 255) / 256) * L * (K / BK);
  return iters >= (long long)MB2_MIN_KBLOCKS_PER_SM * num_sms ? 2 : 1;
}

template <int MBV>
int launch(const void* a, const void* b, Params& p, int num_sms, char* err, int err_len) {
  constexpr int B_ROWS = Cfg<MBV>::B_ROWS;
  constexpr int SMEM_BYTES = Cfg<MBV>::SMEM_BYTES;
  const int M = p.M, N = p.N, K = p.K, L = p.L;
  Schedule& s = p.sch;
  s.m_tiles = (M + TILE_ROWS - 1) / TILE_ROWS;
  s.n_tiles = (N + B_ROWS - 1) / B_ROWS;
  s.L = L;
  s.nk = K / BK;
  s.total = (long long)s.tiles() * s.nk;
  s.grid = (int)(s.total < num_sms ? s.total : num_sms);

  CUtensorMap map_a, map_b;
  int r = make_fp4_map(&map_a, a, (uint64_t)L * M, (uint64_t)K / 2, TILE_ROWS, BK_BYTES, CU_TENSOR_MAP_SWIZZLE_64B);
  if (r == 0) r = make_fp4_map(&map_b, b, (uint64_t)L * N, (uint64_t)K / 2, B_ROWS, BK_BYTES, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (r != 0) {
    snprintf(err, err_len, "cuTensorMapEncodeTiled failed (%d) for M=%d N=%d K=%d L=%d", r, M, N, K, L);
    return 2;
  }
  static bool attr_done = false;
  if (!attr_done) {
    cudaError_t e = cudaFuncSetAttribute(gemm_kernel<MBV>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) {
      snprintf(err, err_len, "cudaFuncSetAttribute: %s", cudaGetErrorString(e));
      return 3;
    }
    attr_done = true;
  }
  gemm_kernel<MBV><<<s.grid, THREADS, SMEM_BYTES>>>(p, map_a, map_b);   // default (legacy) queue 0
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    snprintf(err, err_len, "kernel launch: %s", cudaGetErrorString(e));
    return 4;
  }
  return 0;
}
}  // namespace sm90
}  // namespace nvfp4

// Launcher: raw pointers and ints only. Returns 0 on success; otherwise writes a message into err.
// a, b: packed fp4 [L][rows][K/2]; sfa, sfb: blocked scales (batches outermost); c: fp16 [L][M][N].
// ws: fixup workspace of nvfp4_sm90_workspace_bytes(); counters: nvfp4_sm90_counter_count() zeroed ints.
// mb: 0 = choose the B tile height per shape, 1 = 128 rows, 2 = 256 rows.
extern "C" long long nvfp4_sm90_workspace_bytes(int num_sms) {
  using namespace nvfp4::sm90;
  return (long long)2 * num_sms * NUM_CWG * Cfg<2>::WS_FLOAT4_PER_UNIT * 16;   // the larger of the two configs
}
extern "C" long long nvfp4_sm90_counter_count(int M, int N, int L) {
  return (long long)((M + 127) / 128) * ((N + 127) / 128) * L * nvfp4::sm90::NUM_CWG;  // 128-row tiles: the most
}
extern "C" int nvfp4_sm90_launch(const void* a, const void* b, const void* sfa, const void* sfb, void* c, void* ws,
                                 int* counters, int M, int N, int K, int L, int num_sms, int mb, char* err,
                                 int err_len) {
  using namespace nvfp4;
  using namespace nvfp4::sm90;
  if (M <= 0 || N <= 0 || L <= 0 || K <= 0 || K % BK != 0) {
    snprintf(err, err_len, "unsupported shape M=%d N=%d K=%d L=%d (need K %% %d == 0)", M, N, K, L, BK);
    return 1;
  }
  Params p;
  p.sfa = (const uint8_t*)sfa;
  p.sfb = (const uint8_t*)sfb;
  p.c = (__half*)c;
  p.ws = (float4*)ws;
  p.counters = counters;
  p.sfa_batch = sf_batch_bytes(M, K);
  p.sfb_batch = sf_batch_bytes(N, K);
  p.M = M; p.N = N; p.K = K; p.L = L;
  p.kb64 = K / 64;
  p.b_row_blocks = (N + 127) / 128;
  p.vec_store = (N % 8 == 0) && (((uintptr_t)c & 15) == 0);
  if (mb == 0) mb = choose_mb(M, N, K, L, num_sms);
  return mb == 2 ? launch<2>(a, b, p, num_sms, err, err_len) : launch<1>(a, b, p, num_sms, err, err_len);
}
"""

# ----------------------------------------------------------------------------------------------------
# C++: torch binding (tensors -> raw pointers)
# ----------------------------------------------------------------------------------------------------
CPP_SM90 = r"""
#include <torch/extension.h>

extern "C" long long nvfp4_sm90_workspace_bytes(int num_sms);
extern "C" long long nvfp4_sm90_counter_count(int M, int N, int L);
extern "C" int nvfp4_sm90_launch(const void* a, const void* b, const void* sfa, const void* sfb, void* c, void* ws,
                                 int* counters, int M, int N, int K, int L, int num_sms, int mb, char* err,
                                 int err_len);

long long sm90_workspace_bytes(int64_t num_sms) { return nvfp4_sm90_workspace_bytes((int)num_sms); }
long long sm90_counter_count(int64_t M, int64_t N, int64_t L) { return nvfp4_sm90_counter_count((int)M, (int)N, (int)L); }

void sm90_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c,
               torch::Tensor ws, torch::Tensor counters, int64_t M, int64_t N, int64_t K, int64_t L, int64_t num_sms,
               int64_t mb) {
  char err[256] = {0};
  int r = nvfp4_sm90_launch(a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr(), ws.data_ptr(),
                            (int*)counters.data_ptr(), (int)M, (int)N, (int)K, (int)L, (int)num_sms, (int)mb, err, 256);
  TORCH_CHECK(r == 0, "nvfp4 sm90 gemm: ", err);
}
"""

_SM90 = None
_SM90_CACHE = {}  # device index -> (workspace, counters, num_sms)


def _sm90_module():
    global _SM90
    if _SM90 is None:
        from torch.utils.cpp_extension import load_inline

        _SM90 = load_inline(
            name="nvfp4_gemm_sm90_v3",
            cpp_sources=[CPP_SM90],
            cuda_sources=[CUDA_SM90],
            functions=["sm90_gemm", "sm90_workspace_bytes", "sm90_counter_count"],
            extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-lineinfo"],
            verbose=False,
        )
    return _SM90


def _strides_ok(x, want):
    """Strides match where they matter (dimensions of size 1 may carry any stride)."""
    return all(size == 1 or got == w for size, got, w in zip(x.shape, x.stride(), want))


def _blocked_strides(shape):
    # permuted scales (32, 4, rb, 4, cb, L): memory order L, rb, cb, 32, 4, 4 (batches outermost)
    _, _, rb, _, cb, _ = shape
    return (16, 4, cb * 512, 1, 512, rb * cb * 512)


_SM90_OK = {}  # validated (shapes, strides, dtypes, device) -> (M, N, K, L)


def _run_sm90(data: input_t) -> output_t:
    a, b, _sfa, _sfb, sfa_perm, sfb_perm, c = data
    key = (a.shape, a.stride(), b.shape, b.stride(), sfa_perm.shape, sfa_perm.stride(), sfb_perm.shape,
           sfb_perm.stride(), c.shape, c.stride(), a.dtype, b.dtype, sfa_perm.dtype, sfb_perm.dtype, c.dtype, c.device)
    dims = _SM90_OK.get(key)
    if dims is None:
        dims = _validate_sm90(a, b, sfa_perm, sfb_perm, c)
        _SM90_OK[key] = dims
    M, N, K, L = dims
    mod = _SM90 or _sm90_module()
    entry = _SM90_CACHE.get(c.device.index)
    if entry is None or entry[1].numel() < int(mod.sm90_counter_count(M, N, L)):
        entry = _sm90_buffers(mod, c.device, M, N, L)
    ws, cnt, num_sms = entry
    mod.sm90_gemm(a, b, sfa_perm, sfb_perm, c, ws, cnt, M, N, K, L, num_sms, 0)
    return c


def _sm90_buffers(mod, device, M, N, L):
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count
    ws = torch.empty(int(mod.sm90_workspace_bytes(num_sms)) // 4, dtype=torch.float32, device=device)
    need = int(mod.sm90_counter_count(M, N, L))
    cnt = torch.zeros(max(need, 4096), dtype=torch.int32, device=device)  # the kernel leaves it zero
    _SM90_CACHE[device.index] = (ws, cnt, num_sms)
    return _SM90_CACHE[device.index]


def _validate_sm90(a, b, sfa_perm, sfb_perm, c):
    if a.dim() != 3 or b.dim() != 3 or c.dim() != 3:
        raise ValueError("nvfp4 sm90 gemm: a, b, c must be 3-D ([rows, K/2, L], [M, N, L])")
    M, KH, L = a.shape
    N = b.shape[0]
    K = 2 * KH
    if K % 128 != 0:
        raise ValueError(f"nvfp4 sm90 gemm: K={K} is not supported (K must be a multiple of 128)")
    for name, x, rows in (("a", a, M), ("b", b, N)):
        if tuple(x.shape) != (rows, KH, L) or x.element_size() != 1:
            raise ValueError(f"{name}: expected packed fp4 {(rows, KH, L)}, got {x.dtype} {tuple(x.shape)}")
        if not _strides_ok(x, (KH, 1, rows * KH)):
            raise ValueError(f"{name}: expected strides {(KH, 1, rows * KH)} (K-major per batch), got {x.stride()}")
    if tuple(c.shape) != (M, N, L) or c.dtype != torch.float16 or not _strides_ok(c, (N, 1, M * N)):
        raise ValueError(f"c: expected float16 {(M, N, L)} with strides {(N, 1, M * N)}, "
                         f"got {c.dtype} {tuple(c.shape)} {c.stride()}")
    for name, sp, rows in (("sfa_permuted", sfa_perm, M), ("sfb_permuted", sfb_perm, N)):
        want_shape = (32, 4, (rows + 127) // 128, 4, (K + 63) // 64, L)
        if tuple(sp.shape) != want_shape or sp.element_size() != 1:
            raise ValueError(f"{name}: expected e4m3 {want_shape}, got {sp.dtype} {tuple(sp.shape)}")
        if not _strides_ok(sp, _blocked_strides(sp.shape)):
            raise ValueError(f"{name}: memory is not the blocked 128x4 layout (strides {sp.stride()})")
    for x in (a, b, sfa_perm, sfb_perm, c):
        if x.device != c.device:
            raise ValueError("nvfp4 sm90 gemm: all tensors must be on one CUDA device")
    return M, N, K, L


def _run_sm100(data: input_t) -> output_t:
    # Hook for the Blackwell (tcgen05, sm_100a) path, built in kernels/sm100/ on CUDA_COMMON.
    raise NotImplementedError("sm_100a path not built yet")


def custom_kernel(data: input_t) -> output_t:
    dev = data[0].device
    if dev.type != "cuda":
        raise ValueError("nvfp4 gemm: inputs must be CUDA tensors")
    major, _ = torch.cuda.get_device_capability(dev)
    if major == 9:
        return _run_sm90(data)
    if major >= 10:
        return _run_sm100(data)
    raise NotImplementedError(f"nvfp4 gemm: no kernel for compute capability {major}.x (needs 9.0 or 10.0+)")
