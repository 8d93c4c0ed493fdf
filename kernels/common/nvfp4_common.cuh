// Shared by the sm_90a and sm_100a paths of submission.py: everything that is not the MMA (the split-K tile
// schedule, scale layouts, the tensor-map encoder). kernels/generate.py copies this file, from the line
// after this header on, into submission.py's CUDA_COMMON; edit it here, then run the generator.
// ---- generated text begins on the next line
#include <cuda.h>            // CUtensorMap and its enums (header only; the driver is reached at run time)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>

namespace nvfp4 {

// ---- problem tiling -------------------------------------------------------------------------------
[[maybe_unused]] constexpr int TILE_ROWS = 128;         // rows of A or B per tile = one row block of the blocked layout
constexpr int BK = 128;                 // k elements per pipeline stage
[[maybe_unused]] constexpr int BK_BYTES = BK / 2;       // fp4 bytes per row per stage (64)
constexpr int SF_BLOCK_BYTES = 512;     // one 128-row x 4-scale block of the blocked layout
[[maybe_unused]] constexpr int SF_STAGE_BYTES = (BK / 64) * SF_BLOCK_BYTES;  // scales of one tile per stage (1024)

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
// Each helper takes 32-bit shared-window addresses (computed once, no generic-to-shared conversion per call:
// in a kernel that may run in a cluster each conversion re-reads the CTA's rank) or pointers into shared
// memory, which it converts and passes on.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) { mbar_expect_tx(smem_u32(bar), bytes); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(bar)) : "memory");
}
// arrive only where pred holds, without a branch (a branch between RS wgmmas and their wait makes ptxas
// serialize them, warning C7513)
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool pred) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n"
               :: "r"(bar), "r"((uint32_t)pred) : "memory");
}
// Release a buffer that this warp read with plain shared-memory loads: `loaded` combines a word of each load's
// result, and the arrive's address goes through an operation on it, so the arrive issues only once the loads
// have returned. ptxas does not wait for outstanding loads before an mbarrier arrive: it issued the consumers'
// release of a raw stage with their last LDS.128 still in flight, and under load the next TMA overwrote those
// rows first (H100, 256-row tiles in clusters of 4 or 8: B rows 72-79 of a tile wrong in 5-43 % of calls).
__device__ __forceinline__ void mbar_arrive_after_loads(uint32_t bar, bool pred, uint32_t loaded) {
  uint32_t addr;   // == bar (min(bar, bar | x) is bar), computed where neither compiler can see it
  asm volatile("min.u32 %0, %1, %2;" : "=r"(addr) : "r"(bar), "r"(bar | loaded));
  mbar_arrive_if(addr, pred);
}
// wait until the phase with parity `parity` has completed
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\n"
      "bra LAB_WAIT;\n"
      "DONE:\n"
      "}\n" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) { mbar_wait(smem_u32(bar), parity); }
// 2-D tiled TMA load, completion counted in bytes on `bar`
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      :: "r"(dst), "l"((uint64_t)map), "r"(bar), "r"(x), "r"(y) : "memory");
}
// 1-D bulk copy global -> shared (bytes % 16 == 0, both addresses 16-byte aligned)
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      :: "r"(dst), "l"((uint64_t)src), "r"(bytes), "r"(bar) : "memory");
}
// L2 cache policies for the two loads below (CUTLASS's constants)
constexpr uint64_t kEvictFirst = 0x12F0000000000000ull, kEvictLast = 0x14F0000000000000ull;
// tma_load_2d and bulk_load with an L2 cache policy
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;"
      :: "r"(smem_u32(dst)), "l"((uint64_t)map), "r"(x), "r"(y), "r"(smem_u32(bar)), "l"(policy) : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
      :: "r"(smem_u32(dst)), "l"((uint64_t)src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy) : "memory");
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

// ---- thread-block clusters (split-K reduced through distributed shared memory) ---------------------------
// Every non-exited thread of the cluster arrives; the release / acquire pair orders shared-memory writes
// before the barrier with reads of them (from any CTA of the cluster) after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// the address of the same shared-memory location in CTA `rank` of this cluster
__device__ __forceinline__ uint32_t cluster_map(uint32_t saddr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(saddr), "r"(rank));
  return r;
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
