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
  * warpgroups 1, 2 (consumers): each decodes 64*MB B rows x 128 k straight into wgmma A fragments and
    issues wgmma.m64n128k16 (fp16 in, fp32 accumulators) in groups of 4; two fragment buffers let the decode
    of group i+1 run while group i is on the tensor cores (wait_group 1 before reusing a buffer: registers
    read by an RS wgmma must not be rewritten while it runs).
  * B tile height: MB = 2 (256 rows; setmaxnreg gives consumers 216 registers) halves the A-decode work per
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
// arrive only where pred holds, without a branch (a branch between RS wgmmas and their wait makes ptxas
// serialize them, warning C7513)
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n"
               :: "r"(smem_u32(bar)), "r"((uint32_t)pred) : "memory");
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
                               // 4 skip the wgmmas, 8 skip the transform's loads/decode/stores,
                               // 16 every CTA exits after setup (launch cost), 32 no fixup and no C stores
                               // (with 32, ptxas drops the unused wgmmas: only meaningful with 4)
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
  static constexpr int PRODUCER_REGS = 24, TRANSFORM_REGS = 56, CONSUMER_REGS = 216;  // setmaxnreg: 128*(24+56) + 256*216 = 64K
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
#if NVFP4_PROFILE_MODE & 16
  return;
#endif

  if (warp < 4) {
    // ------------------------------------------------------------------ transform: A tile -> fp16 smem
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(TRANSFORM_REGS));
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
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
    NVFP4_ITER_RANGE
    const int cw = (warp >> 2) - 1;            // consumer warpgroup: B rows 64*MB*cw .. of the tile
    const int ct = tid - 128 * (cw + 1);       // thread in warpgroup
    const int wq = ct >> 5;                    // warp in warpgroup
    const int g = lane >> 2, t = lane & 3;
    const int rw = 64 * MB * cw + 16 * wq + g; // row of block 0, half 0; block b half h: rw + 64*b + 8*h
    const uint32_t epi = sbase + OFF_EPI + cw * EPI_BYTES;
    float acc[MB][64];
    // Two fragment buffers of 4 k16 steps each. Groups of 4 wgmmas alternate between them, so the decode
    // of the next group runs while the previous one is on the tensor cores; wait_group<1> before a decode
    // guarantees the group that last read that buffer has finished (RS wgmma reads registers late).
    uint32_t frag[2][4][4];
    int act_pending = -1;   // act stage whose last wgmma group may still be running

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
        const uint64_t dbase = sw128_desc(act);   // k16 step ks: +32 B inside the atom, +ACT_ATOM_BYTES per atom

#pragma unroll
        for (int b = 0; b < MB; ++b) {
          // this thread's fp4 words of rows rw + 64b and rw + 64b + 8, and their scales
          uint4 x[2];
          uint32_t sb[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = rw + 64 * b + 8 * h;
            x[h] = lds128(st + RAW_B + r * 64 + t * 16);
            sb[h] = lds16(st + RAW_SB + (r >> 7) * SF_STAGE_BYTES + (t >> 1) * SF_BLOCK_BYTES +
                          sf_inblock_offset(r & 127, 2 * (t & 1)));
          }
          if (b == MB - 1) {   // everything of the raw stage is in registers
            __syncwarp();
            mbar_arrive_if(&raw_empty[s], lane == 0);
          }
#pragma unroll
          for (int kh = 0; kh < 2; ++kh) {       // k steps 4kh..4kh+3 = scale column kh of each row
            wgmma_wait<1>();                     // the group before the previous one is done: frag[kh] is free
            keep(frag[kh][0]); keep(frag[kh][1]); keep(frag[kh][2]); keep(frag[kh][3]);
            if (b == 0 && kh == 1) {             // ...and so is every group of the previous stage
              __syncwarp();
              mbar_arrive_if(&act_empty[act_pending < 0 ? 0 : act_pending], lane == 0 && act_pending >= 0);
            }
            const uint32_t a0 = scale_x2((sb[0] >> (8 * kh)) & 0xFF);
            const uint32_t a1 = scale_x2((sb[1] >> (8 * kh)) & 0xFF);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              const int q = 2 * kh + (kk >> 1);
              const uint32_t w0 = word(x[0], q), w1 = word(x[1], q);
#if NVFP4_PROFILE_MODE & 2
              frag[kh][kk][0] = w0 ^ a0; frag[kh][kk][1] = w1 ^ a1; frag[kh][kk][2] = w0 ^ kk; frag[kh][kk][3] = w1 ^ kk;
#else
              if ((kk & 1) == 0) decode_step<0>(frag[kh][kk], w0, w1, a0, a1);
              else decode_step<2>(frag[kh][kk], w0, w1, a0, a1);
#endif
            }
            if (b == 0 && kh == 0) mbar_wait(&act_full[as], (j / ACT_STAGES) & 1);
            wgmma_fence();
#if !(NVFP4_PROFILE_MODE & 4)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
              wgmma_m64n128k16_rs(acc[b], frag[kh][kk], dbase + (uint64_t)((kh * ACT_ATOM_BYTES + kk * 32) >> 4));
#endif
            wgmma_commit();
          }
        }
        act_pending = as;
      }
      wgmma_wait<0>();
#pragma unroll
      for (int b = 0; b < MB; ++b) keep_acc(acc[b]);
      __syncwarp();
      mbar_arrive_if(&act_empty[act_pending < 0 ? 0 : act_pending], lane == 0 && act_pending >= 0);
      act_pending = -1;
      // ---------------------------------------------------------------- epilogue of this tile
#if NVFP4_PROFILE_MODE & 32
      continue;
#endif
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
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
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

// Internal linkage on purpose: a function-local static in a template is one process-wide (GNU unique)
// symbol, so a second build of this file loaded in the same process would skip the attribute for its kernel.
static bool g_smem_attr_done[3] = {false, false, false};

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
  if (!g_smem_attr_done[MBV]) {
    cudaError_t e = cudaFuncSetAttribute(gemm_kernel<MBV>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) {
      snprintf(err, err_len, "cudaFuncSetAttribute: %s", cudaGetErrorString(e));
      return 3;
    }
    g_smem_attr_done[MBV] = true;
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


# ==== sm100 (tcgen05, B200) begin: generated by kernels/sm100/integrate.py, edit kernels/sm100/ instead
# The sm_100a kernel: TMA -> smem, tcgen05.cp scale atoms -> TMEM, tcgen05.mma kind::mxf4nvf4
# block16, tcgen05.ld epilogue. Verified only by compile/SASS checks and by an emulation build on an
# H100 (docs/blackwell_kernel.md); it has NOT run on Blackwell hardware.
CUDA_SM100 = r"""// NVFP4 block-scaled GEMM for sm_100a (B200): C[M,N,L] (fp16) = (A * SFA) x (B * SFB)^T.
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
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
// ---- begin tcgen05_desc.h
// tcgen05 descriptor encoders for the NVFP4 (kind::mxf4nvf4, block16) GEMM.
//
// Plain C++ (host and device), no CUDA or torch headers: the kernel, the emulation build and the
// host-only unit test (kernels/sm100/desc_selftest.cpp) all include this one file.
// Bit layouts: PTX ISA "Instruction descriptor" (kind::mxf4 / kind::mxf4nvf4 table) and
// "Shared memory descriptor" (tcgen05); see shared/research/tcgen05.md sections 1-3.
#include <stdint.h>

#if defined(__CUDACC__)
#define T5_HD __host__ __device__ __forceinline__
#else
#define T5_HD inline
#endif

namespace t5 {

// ---- instruction descriptor (32 bit), kind::mxf4nvf4 -----------------------------------------
// bits 4-5 SFB id, 7-9 atype (E2M1 = 1), 10-11 btype (E2M1 = 1), 13/14 negate A/B,
// 15/16 transpose A/B (must be 0 for mxf4nvf4), 17-22 N>>3, 23 scale type (UE4M3 = 0),
// 27-28 M>>7, 29-30 SFA id, 31 K size (0 = K 64 dense).
enum : uint32_t { kFmtE2M1 = 1u, kScaleUE4M3 = 0u, kScaleUE8M0 = 1u };

T5_HD constexpr uint32_t make_idesc_mxf4nvf4(uint32_t M, uint32_t N, uint32_t scale_type = kScaleUE4M3,
                                              uint32_t sfa_id = 0, uint32_t sfb_id = 0) {
  return ((sfb_id & 3u) << 4) | (kFmtE2M1 << 7) | (kFmtE2M1 << 10) | (((N >> 3) & 0x3Fu) << 17) |
         ((scale_type & 1u) << 23) | (((M >> 7) & 3u) << 27) | ((sfa_id & 3u) << 29);
}

// ---- shared-memory matrix descriptor (64 bit, sm_100) ------------------------------------------
// bits 0-13 start>>4, 16-29 LBO>>4, 32-45 SBO>>4, 46-48 fixed 0b001, 49-51 base offset,
// 52 LBO mode, 61-63 swizzle (0 none, 1 128B/32B-atom, 2 128B, 4 64B, 6 32B).
enum : uint32_t { kSwizzleNone = 0u, kSwizzle128B_Base32B = 1u, kSwizzle128B = 2u, kSwizzle64B = 4u,
                  kSwizzle32B = 6u };

T5_HD constexpr uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                        uint32_t swizzle, uint32_t base_offset = 0, uint32_t lbo_mode = 0) {
  return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 46) |
         ((uint64_t)(base_offset & 7u) << 49) | ((uint64_t)(lbo_mode & 1u) << 52) |
         ((uint64_t)(swizzle & 7u) << 61);
}

// A/B operand tile: K-major, SWIZZLE_128B, 8-row x 128-byte atoms stacked every 1024 bytes.
// LBO is unused for swizzled K-major layouts; 16 bytes (encoded 1) is written, as CUTLASS does.
constexpr uint32_t kOperandSBO = 1024u;
T5_HD constexpr uint64_t make_operand_desc_kmajor_sw128(uint32_t smem_addr) {
  return make_smem_desc(smem_addr, 16u, kOperandSBO, kSwizzle128B);
}

// Scale-factor source for tcgen05.cp 32x128b.warpx4: one 512-byte atom = 32 rows x 16 bytes,
// no swizzle, core matrices of 8 rows x 16 bytes stacked every 128 bytes (SBO), LBO 0.
constexpr uint32_t kSfAtomBytes = 512u;
T5_HD constexpr uint64_t make_sf_desc(uint32_t smem_addr) { return make_smem_desc(smem_addr, 0u, 128u, kSwizzleNone); }

// ---- tensor-memory addresses: bits 31-16 lane, 15-0 column --------------------------------------
T5_HD constexpr uint32_t tmem_addr(uint32_t base, uint32_t lane, uint32_t col) { return base + (lane << 16) + col; }
T5_HD constexpr uint32_t tmem_lane(uint32_t a) { return a >> 16; }
T5_HD constexpr uint32_t tmem_col(uint32_t a) { return a & 0xFFFFu; }

// ---- kernel tiling constants (shared with the launcher and the tests) ---------------------------
constexpr int kBlockM = 128;        // MMA M (rows of A per CTA)
constexpr int kBlockN = 64;         // MMA N (rows of B per CTA)
constexpr int kBlockK = 256;        // fp4 elements per pipeline stage = 128 bytes = one swizzle row
constexpr int kMmaK = 64;           // fp4 elements per tcgen05.mma (32 bytes)
constexpr int kStages = 6;
constexpr int kSfColsPerStage = 32; // 16 TMEM columns SFA (4 per MMA) + 16 SFB
constexpr int kAccCols = kBlockN;   // fp32 accumulator: one column per output column
constexpr int kTmemCols = 256;      // power of two >= kAccCols + kStages * kSfColsPerStage
static_assert(kAccCols + kStages * kSfColsPerStage <= kTmemCols, "TMEM budget");
constexpr int kStageABytes = kBlockM * kBlockK / 2;         // 16384
constexpr int kStageBBytes = kBlockN * kBlockK / 2;         // 8192
constexpr int kStageSFABytes = (kBlockK / 64) * 512;        // 2048: 4 atoms of 128 rows x 4 scales
constexpr int kStageSFBBytes = (kBlockK / 64) * 512;        // 2048: the whole 128-row atom group
constexpr int kStageBytes = kStageABytes + kStageBBytes + kStageSFABytes + kStageSFBBytes;
static_assert(kStageABytes % 1024 == 0 && kStageBBytes % 1024 == 0 && kStageBytes % 1024 == 0, "1024-B atoms");

// TMEM column of the scale factors used by MMA j (0..3) of pipeline stage s, relative to the base.
T5_HD constexpr uint32_t sfa_col(int s, int j) { return (uint32_t)(kAccCols + s * kSfColsPerStage + 4 * j); }
// SFB: the full 128-row atom lands in 4 columns (rows 32c..32c+31 in column c); an N = 64 tile
// whose rows start at n0 uses the two columns starting at (n0 % 128) / 32 (even: 8-byte aligned).
T5_HD constexpr uint32_t sfb_cp_col(int s, int j) { return (uint32_t)(kAccCols + s * kSfColsPerStage + 16 + 4 * j); }
T5_HD constexpr uint32_t sfb_col(int s, int j, int n0) { return sfb_cp_col(s, j) + (uint32_t)((n0 % 128) / 32); }

}  // namespace t5
// ---- end tcgen05_desc.h
#ifdef NVFP4_TCGEN05_EMULATION
#include "tcgen05_emulation.cuh"
#else
// ---- begin tcgen05_hw.cuh
// Thin named wrappers around each tcgen05 instruction the NVFP4 kernel uses (sm_100a hardware path).
// tcgen05_emulation.cuh provides the same functions in software (built with -DNVFP4_TCGEN05_EMULATION).
//
// Calling convention (both builds): every wrapper is called by ALL 32 lanes of one warp.
//  - alloc / dealloc / relinquish / ld / wait::ld are .sync.aligned warp instructions;
//  - mma / cp / commit are issued by lane 0 only here (one issuing thread, as the ISA expects);
//    the emulation uses the whole warp to do the arithmetic.
// PTX forms: shared/research/tcgen05.md sections 0, 3.2, 5.
#include <stdint.h>

namespace t5 {

__device__ __forceinline__ bool t5_lane0() { return (threadIdx.x & 31) == 0; }

// Allocate ncols TMEM columns (power of two, 32..512); the TMEM base address is written to *smem_dst.
__device__ __forceinline__ void tmem_alloc(uint32_t* smem_dst, uint32_t ncols) {
  uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem_dst);
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(dst), "r"(ncols) : "memory");
}
__device__ __forceinline__ void tmem_relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

// Copy one 512-byte scale atom (32 rows x 128 bit) from smem into 4 TMEM columns, multicast to the
// four 32-lane sub-partitions (.32x128b.warpx4).
__device__ __forceinline__ void umma_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
  if (t5_lane0()) asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(sdesc) : "memory");
}

// D[tmem] (+)= (A * SFA) x (B * SFB)^T, NVFP4 (e2m1 data, ue4m3 scales, 16-element blocks), K = 64.
__device__ __forceinline__ void umma_mma_mxf4nvf4(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                                  uint32_t sfa_tmem, uint32_t sfb_tmem, uint32_t enable_input_d) {
  if (t5_lane0()) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
        ::"r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(enable_input_d), "r"(sfa_tmem), "r"(sfb_tmem)
        : "memory");
  }
}

// One arrive on the mbarrier once every prior tcgen05 async op of the issuing thread has completed.
__device__ __forceinline__ void umma_commit(uint64_t* mbar) {
  if (t5_lane0()) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(mbar);
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(a) : "memory");
  }
}

// Thread t of the warp reads TMEM lane (lane(taddr) + t), columns col(taddr) .. +31.
__device__ __forceinline__ void tmem_ld_32x32b_x32(uint32_t taddr, uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
        "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]),
        "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]),
        "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
}
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

}  // namespace t5
// ---- end tcgen05_hw.cuh
#endif

namespace nvfp4_sm100 {
using namespace t5;

constexpr int kThreads = 128;
constexpr int kSmemBytes = kStages * kStageBytes + 1024 /*align*/ + 256 /*barriers*/;

// ---------------------------------------------------------------- mbarrier / TMA (sm_90 and sm_100)
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
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
// L2 cache policies (CUTLASS's constants): A and SFA are re-read by every CTA of a row of tiles, B and SFB
// are read once.
constexpr uint64_t kEvictFirst = 0x12F0000000000000ull, kEvictLast = 0x14F0000000000000ull;
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulk_load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                             uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1], %2, [%3], %4;"
               ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy) : "memory");
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
        mbar_arrive_expect_tx(&full_bar[s], kStageBytes);
        tma_load_2d(st, &tmap_a, kb * (kBlockK / 2), l * p.M + m0, &full_bar[s], kEvictLast);
        tma_load_2d(st + kStageABytes, &tmap_b, kb * (kBlockK / 2), l * p.N + n0, &full_bar[s], kEvictFirst);
        bulk_load_1d(st + kStageABytes + kStageBBytes, sfa_src + (size_t)kb * kStageSFABytes, kStageSFABytes,
                     &full_bar[s], kEvictLast);
        // SFB atoms of a 128-row group are shared by the two N = 64 tiles of the group
        bulk_load_1d(st + kStageABytes + kStageBBytes + kStageSFABytes, sfb_src + (size_t)kb * kStageSFBBytes,
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
typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn get_encode_fn() {
  static EncodeTiledFn fn = nullptr;
  if (!fn) {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q) ==
            cudaSuccess && q == cudaDriverEntryPointSuccess)
      fn = (EncodeTiledFn)ptr;
  }
  return fn;
}

// Packed fp4 operand [rows_total][K/2 bytes] as UINT8 (16U4 maps cannot be encoded on Hopper; the
// bytes and the 128B swizzle are the same), box = 128 bytes (256 fp4) x box_rows, SWIZZLE_128B.
static int encode_operand_map(CUtensorMap* map, const void* ptr, int rows_total, int K, int box_rows) {
  EncodeTiledFn fn = get_encode_fn();
  if (!fn) return 1001;
  cuuint64_t dims[2] = {(cuuint64_t)(K / 2), (cuuint64_t)rows_total};
  cuuint64_t strides[1] = {(cuuint64_t)(K / 2)};
  cuuint32_t box[2] = {(cuuint32_t)(kBlockK / 2), (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : 1002;
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
"""

_SM100_CPP = r"""
#include <torch/extension.h>
extern "C" int nvfp4_gemm_sm100_launch(const void*, const void*, const void*, const void*, void*, void*, void*,
                                       int, int, int, int, int);
extern "C" int nvfp4_gemm_sm100_choose_splits(int, int, int, int, int);
int64_t sm100_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c,
                   torch::Tensor ws, torch::Tensor cnt, int64_t splits) {
  const int M = (int)c.size(0), N = (int)c.size(1), L = (int)c.size(2), K = (int)a.size(1) * 2;
  void* p[7] = {a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr(), ws.data_ptr(), cnt.data_ptr()};
  return nvfp4_gemm_sm100_launch(p[0], p[1], p[2], p[3], p[4], p[5], p[6], M, N, K, L, (int)splits);
}
int64_t sm100_choose_splits(int64_t M, int64_t N, int64_t K, int64_t L, int64_t sms) {
  return nvfp4_gemm_sm100_choose_splits((int)M, (int)N, (int)K, (int)L, (int)sms);
}
"""
_SM100_FLAGS = ["-gencode=arch=compute_100a,code=sm_100a", "-O3", "-std=c++17"]
_sm100_state = {}


def _sm100_module(src=None, flags=None, name="nvfp4_gemm_sm100_tcgen05"):
    mod = _sm100_state.get(name)
    if mod is None:
        from torch.utils.cpp_extension import load_inline
        mod = load_inline(name=name, cpp_sources=[_SM100_CPP], cuda_sources=[src or CUDA_SM100],
                          functions=["sm100_gemm", "sm100_choose_splits"],
                          extra_cuda_cflags=list(flags or _SM100_FLAGS), verbose=False)
        _sm100_state[name] = mod
    return mod


def _sm100_supported(data):
    a, b, _, _, sfa_p, sfb_p, c = data
    if c.dim() != 3 or c.dtype != torch.float16:
        return False
    M, N, L = c.shape
    K = a.shape[1] * 2
    return (M % 128 == 0 and N % 64 == 0 and K % 256 == 0 and a.shape[0] == M and b.shape[0] == N
            and a.element_size() == 1 and b.element_size() == 1
            and (L == 1 or (a.stride(2) == M * K // 2 and b.stride(2) == N * K // 2 and c.stride(2) == M * N))
            and a.stride()[:2] == (K // 2, 1) and b.stride()[:2] == (K // 2, 1) and c.stride()[:2] == (N, 1)
            and tuple(sfa_p.shape) == (32, 4, M // 128, 4, K // 64, L)
            and tuple(sfb_p.shape) == (32, 4, N // 128 if N % 128 == 0 else N // 128 + 1, 4, K // 64, L)
            and all(x.is_cuda and x.device == c.device for x in (a, b, sfa_p, sfb_p)))


def _run_sm100(data, module=None, module_name="nvfp4_gemm_sm100_tcgen05"):
    if not _sm100_supported(data):
        raise ValueError("nvfp4 sm100 gemm: needs M % 128 == 0, N % 64 == 0, K % 256 == 0, packed fp4 "
                         "[rows, K/2, L] K-major, blocked permuted scales and fp16 c [M, N, L] (strides N, 1, M*N)")
    a, b, _, _, sfa_p, sfb_p, c = data
    M, N, L = c.shape
    K = a.shape[1] * 2
    mod = module or _sm100_module(name=module_name)
    key = (module_name, M, N, K, L, c.device.index)
    cfg = _sm100_state.get(key)
    if cfg is None:
        sms = torch.cuda.get_device_properties(c.device).multi_processor_count
        splits = int(mod.sm100_choose_splits(M, N, K, L, sms))
        tiles = L * (M // 128) * (N // 64)
        ws = torch.empty(tiles * splits * 128 * 64 if splits > 1 else 1, dtype=torch.float32, device=c.device)
        cnt = torch.zeros(max(tiles, 1), dtype=torch.int32, device=c.device)  # kernel leaves it zero
        cfg = _sm100_state[key] = (splits, ws, cnt)
    splits, ws, cnt = cfg
    rc = mod.sm100_gemm(a, b, sfa_p, sfb_p, c, ws, cnt, splits)
    if rc != 0:
        raise RuntimeError(f"sm100 tcgen05 kernel launch failed (code {rc})")
    return c
# ==== sm100 (tcgen05, B200) end


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
