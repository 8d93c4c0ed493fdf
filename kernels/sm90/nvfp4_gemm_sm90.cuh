// The sm_90a kernel of submission.py (fp4 -> fp16 decode + wgmma) and its extern "C" launcher; compiled
// after kernels/common/nvfp4_common.cuh as one translation unit. kernels/generate.py copies this file, from
// the line after this header on, into submission.py's CUDA_SM90, with the bench-only NVFP4_PROFILE_MODE probe
// blocks resolved for mode 0 (bench/kernel/hopper_gemm.py --probes builds them from here); edit it here, then run
// the generator.
// ---- generated text begins on the next line
// target: sm_90a (wgmma, setmaxnreg)
#ifndef NVFP4_PROFILE_MODE
#define NVFP4_PROFILE_MODE 0   // bench bottleneck probes (wrong results): bit 1 skip A decode, 2 skip B decode,
                               // 4 skip the wgmmas, 8 skip the transform's loads/decode/stores,
                               // 16 every CTA exits after setup (launch cost), 32 no fixup and no C stores
                               // (with 32, ptxas drops the unused wgmmas: only meaningful with 4),
                               // 64 the producer loads no A (fp4 or scales), 128 no fp4 of B,
                               // 256 no cluster reduction (cluster split-K only)
#endif
#ifndef NVFP4_GROUP_STEPS
#define NVFP4_GROUP_STEPS 4   // k16 steps (wgmmas) per consumer group: 4 (two register buffers) or 2 (four)
#endif
#ifndef NVFP4_STAGES_MB2
#define NVFP4_STAGES_MB2 42   // raw stages * 10 + decoded-A buffers, 256-row tiles
#endif
#ifndef NVFP4_STAGES_MB1
#define NVFP4_STAGES_MB1 43   // the same for 128-row tiles
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
  // TMA ring depth (fp4 + scales; 5 or 6 for MB = 1 measured no faster) and decoded-A buffers, as RAW*10+ACT
  static constexpr int STAGES = MB == 2 ? NVFP4_STAGES_MB2 : NVFP4_STAGES_MB1;
  static constexpr int RAW_STAGES = STAGES / 10;
  static constexpr int ACT_STAGES = STAGES % 10;
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
  // cluster split-K: the buffer receiving the cluster's fp32 parts of this CTA's rows (C slots of 1/C of a
  // tile), over the stage buffers once the main loop is done (ClusterPart below)
  static constexpr int PART_BYTES = MB * 16 * 256 * 16;
  static_assert(MB == 1 || MB == 2, "MB");
  static_assert(RAW_STAGE_BYTES % 1024 == 0, "stage alignment");
  static_assert(SMEM_BYTES <= 232448, "shared memory");
  static_assert(PART_BYTES <= OFF_EPI, "cluster partial must fit in the stage buffers");
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
  int cluster;          // 1: split tiles are finished through ws/counters; C > 1: each tile is split evenly over
                        // the C CTAs of one cluster and reduced through distributed shared memory ...
  int groups;           // ... over G = groups clusters per tile (1 or 2), whose sums meet in ws (last one adds)
  Schedule sch;         // tiles: m_tiles = ceil(M/128), n_tiles = ceil(N/B_ROWS)
};

// e4m3 scale byte -> (s / 2, s / 2) fp16x2 (exact: e4m3's smallest subnormal 2^-9 -> 2^-10, an fp16 normal)
__device__ __forceinline__ uint32_t scale_x2(uint32_t byte) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(byte | (byte << 8)), __NV_E4M3);
  __half2 s = *reinterpret_cast<__half2*>(&h);
  s = __hmul2(s, __floats2half2_rn(0.5f, 0.5f));
  return *reinterpret_cast<uint32_t*>(&s);
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) {
  __half2 r = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}
// four e4m3 bytes -> two fp16x2 (one F2FP each on sm_90)
__device__ __forceinline__ uint32_t e4m3x2_lo(uint32_t b) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(r) : "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t e4m3x2_hi(uint32_t b) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(r) : "r"(b));
  return r;
}
// (a & 0x1C1C1C1C) | (b & ~0x1C1C1C1C) in one LOP3
__device__ __forceinline__ uint32_t sel_1c(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, 0x1C1C1C1C, 0xE4;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// One 32-bit word of fp4 (nibbles 0-7) -> four fp16x2 of value * s * 2^-7, s2 = scale_x2(s); exact.
// e2m1 "s e e m" placed as the e4m3 byte "s 0 0 e e m 0 0" is value * 2^-6 exactly (code 1 = 0.5 becomes the
// e4m3 subnormal 2^-7), and sm_90 converts e4m3 pairs to fp16 in one instruction. The odd nibbles' bytes are
// w >> 2 under 0x1C1C1C1C with their signs already at bit 7; the even nibbles' are w << 2 under the same
// mask with the signs moved up by 4; one LOP3 merges each, as the sign words are zero outside the sign bits.
// Pairs (lane 0, lane 1): p[0] = nibbles (0, 2), p[1] = (4, 6), p[2] = (1, 3), p[3] = (5, 7).
__device__ __forceinline__ void dec8(uint32_t w, uint32_t s2, uint32_t (&p)[4]) {
  const uint32_t sg = w & 0x88888888u;
  const uint32_t even = sel_1c(w << 2, sg << 4), odd = sel_1c(w >> 2, sg);
  p[0] = hmul2_u32(e4m3x2_lo(even), s2);
  p[1] = hmul2_u32(e4m3x2_hi(even), s2);
  p[2] = hmul2_u32(e4m3x2_lo(odd), s2);
  p[3] = hmul2_u32(e4m3x2_hi(odd), s2);
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
// logical k = 16*(2q + (n&1)) + 2t + 8*(n>>2) + ((n>>1)&1): pair j of dec8 (j = 2*(n&1) + (n>>2)) holds
// k16 step 2q + (j>>1), columns 2t + 8*(j&1) and +1. Then the 4 threads of a quad (t = 0..3) each need
// exactly one 16-byte chunk of a row per stage, and every fp16 pair comes from one word.

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

// the two k16 steps of one word of one m64 block: fragments of rows g (word w0) and g+8 (w1)
__device__ __forceinline__ void decode_steps(uint32_t (&f0)[4], uint32_t (&f1)[4], uint32_t w0, uint32_t w1,
                                             uint32_t s0, uint32_t s1) {
  uint32_t p[4], q[4];
  dec8(w0, s0, p);
  dec8(w1, s1, q);
  f0[0] = p[0]; f0[1] = q[0]; f0[2] = p[1]; f0[3] = q[1];
  f1[0] = p[2]; f1[1] = q[2]; f1[2] = p[3]; f1[3] = q[3];
}

// One A row of one 128-k stage -> fp16 (value * scale * 2^-7) in the K permutation, as wgmma's shared
// operand wants it: v = the row's 64 fp4 bytes in memory order, sc0 / sc1 = its scale bytes 0-3 / 4-7.
// store(atom, chunk, o0..o3) gets 16-byte chunk `chunk` (0-7) of 64-k atom `atom` (0-1) of the row, unswizzled.
template <typename Store>
__device__ __forceinline__ void decode_a_row(const uint4 (&v)[4], uint32_t sc0, uint32_t sc1, Store store) {
  uint32_t sc[4];                      // the scales of one half (ks 0-3: scale bytes 0, 2, 4, 6; ks 4-7: 1, 3, 5, 7)
#pragma unroll
  for (int ks = 0; ks < 8; ks += 2) {  // two k16 steps: word q of every chunk
    if ((ks & 3) == 0)
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int b = 2 * t + (ks >> 2);
        sc[t] = scale_x2(((b < 4 ? sc0 : sc1) >> (8 * (b & 3))) & 0xFF);
      }
    const int q = ks >> 1;             // word inside each 16-byte chunk
    uint32_t o[4][4];                  // o[t][j]: pair j of chunk t's word
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#if NVFP4_PROFILE_MODE & 1
#pragma unroll
      for (int j = 0; j < 4; ++j) o[t][j] = word(v[t], q) ^ sc[t] ^ j;
#else
      dec8(word(v[t], q), sc[t], o[t]);
#endif
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)        // step ks + (j >> 1), slots 0-7 / 8-15 (j & 1)
      store(ks >> 2, 2 * ((ks + (j >> 1)) & 3) + (j & 1), o[0][j], o[1][j], o[2][j], o[3][j]);
  }
}

// One m64 block of C, staged in `epi` as fp16 [A row][64 B rows] (EPI_LD halves per row): A rows m0 ..
// m0+ROWS-1 (rows of C) x B rows n0 .. n0+63 (columns), as 16-byte coalesced stores, bounds-checked.
template <int ROWS>
__device__ __forceinline__ void store_epi(const Params& p, uint32_t epi, int ct, int m0, int n0, int l) {
#pragma unroll
  for (int pass = 0; pass < ROWS / 16; ++pass) {
    const int idx = pass * 128 + ct;
    const int r = idx >> 3, ch = idx & 7;
    const int m = m0 + r, n = n0 + ch * 8;
    if (m < p.M && n < p.N) {
      const uint4 val = lds128(epi + (r * EPI_LD + ch * 8) * 2);
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
}
__device__ __forceinline__ void sts_half(uint32_t addr, float v) {
  asm volatile("st.shared.u16 [%0], %1;" :: "r"(addr), "h"(__half_as_ushort(__float2half_rn(v * 16384.f))) : "memory");
}

// Cluster split-K as a reduce-scatter. CTA q of the cluster sums A rows [q*128/C, (q+1)*128/C) of the tile.
// Every consumer thread sends the float4s of its accumulator fragment that fall in CTA q's rows (n8 blocks
// jj in [q*16/C, (q+1)*16/C): registers 4jj..4jj+3 are one float4) straight into slot `rank` of CTA q's
// buffer, at [slot][b][jj - q*16/C][thread] (a warp's store is 512 contiguous bytes, conflict-free).
// Stores to another CTA's shared memory are posted: the scalar version of this (one 4-byte store per value
// into an [m][n] layout) and the version reading every part remotely (a round trip per load) were slower.
template <int MB, int C>
struct ClusterPart {
  static constexpr int JPO = 16 / C;                       // n8 blocks (8 A rows) owned per CTA
  static constexpr uint32_t SLOT = MB * JPO * 256 * 16;    // bytes from one sender
  static_assert(C * SLOT == Cfg<MB>::PART_BYTES, "receive buffer");
};
template <int MB, int C>
__device__ __forceinline__ void scatter_part(const float (&acc)[MB][64], uint32_t part, int lt, uint32_t rank) {
  using P = ClusterPart<MB, C>;
#pragma unroll
  for (int q = 0; q < C; ++q) {
    const uint32_t dst = cluster_map(part + rank * P::SLOT + 16 * lt, (uint32_t)q);
#pragma unroll
    for (int b = 0; b < MB; ++b)
#pragma unroll
      for (int jo = 0; jo < P::JPO; ++jo) {
        const int jj = q * P::JPO + jo;
        asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};"
                     :: "r"(dst + (b * P::JPO + jo) * 4096), "f"(acc[b][4 * jj]), "f"(acc[b][4 * jj + 1]),
                        "f"(acc[b][4 * jj + 2]), "f"(acc[b][4 * jj + 3]) : "memory");
      }
  }
}
__device__ __forceinline__ void add4(float4& s, const float4& u) {
  s.x += u.x; s.y += u.y; s.z += u.z; s.w += u.w;
}
__device__ __forceinline__ float4 lds_f4(uint32_t addr) {
  const uint4 v = lds128(addr);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}
// This CTA's rows: the C slots summed in rank order from zero (the same order everywhere: deterministic);
// sum[b * JPO + jo] belongs to this thread's fragment registers 4jj..4jj+3 of block b, jj = rank*JPO + jo.
template <int MB, int C>
__device__ __forceinline__ void sum_slots(uint32_t part, int lt, float4 (&sum)[MB * 16 / C]) {
  using P = ClusterPart<MB, C>;
  float4 v[C][MB * P::JPO];
#pragma unroll
  for (int q = 0; q < C; ++q)
#pragma unroll
    for (int i = 0; i < MB * P::JPO; ++i) v[q][i] = lds_f4(part + q * P::SLOT + i * 4096 + 16 * lt);
#pragma unroll
  for (int i = 0; i < MB * P::JPO; ++i) {
    sum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int q = 0; q < C; ++q) add4(sum[i], v[q][i]);
  }
}

__device__ __forceinline__ float comp(const float4& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}
// After the cluster barrier that publishes every slot (consumer threads): this CTA's rows of the tile summed
// and stored as C; with G = 2 clusters per tile the sums go to ws instead and the last of the two groups to
// arrive (a counter per tile and rank, the fixup's release/acquire pattern) adds them in group order and stores.
template <int MB, int C>
__device__ __forceinline__ void cluster_finish(const Params& p, uint32_t part, uint32_t epi, int* fix_flag,
                                               int cta, int cw, int ct, int wq, int g, int t) {
  using P = ClusterPart<MB, C>;
  constexpr int B_ROWS = 64 * NUM_CWG * MB, N4 = MB * P::JPO, ROWS = TILE_ROWS / C;
  const int lt = 128 * cw + ct, G = p.groups;
  const int rank = (int)cluster_rank();
  const int tile = cta / (C * G), grp = (cta / C) % G;
  int l, nt, mt;
  p.sch.decode(tile, l, nt, mt);
  float4 sum[N4];
  sum_slots<MB, C>(part, lt, sum);
  if (G > 1) {
    // this (tile, group, rank)'s sums, [i][thread]: coalesced; the two groups of one (tile, rank) C units apart
    constexpr int UNIT = N4 * 256;
    float4* const mine = p.ws + ((size_t)(tile * G + grp) * C + rank) * UNIT;
#pragma unroll
    for (int i = 0; i < N4; ++i) mine[i * 256 + lt] = sum[i];
    named_bar_sync(3, 256);   // every consumer thread's sums are in ws (released by the fence in fixup_arrive)
    if (lt == 0) fix_flag[0] = fixup_arrive(&p.counters[tile * C + rank]);
    named_bar_sync(3, 256);
    if (fix_flag[0] != G - 1) return;
    const float4* const first = p.ws + ((size_t)tile * G * C + rank) * UNIT;
    float4 u[N4], w[N4];   // G == 2 here: both groups' sums loaded at once, then added in group order
#pragma unroll
    for (int i = 0; i < N4; ++i) {
      u[i] = __ldcg(first + i * 256 + lt);
      w[i] = __ldcg(first + (size_t)C * UNIT + i * 256 + lt);
    }
#pragma unroll
    for (int i = 0; i < N4; ++i) {
      sum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      add4(sum[i], u[i]);
      add4(sum[i], w[i]);
    }
    if (lt == 0) p.counters[tile * C + rank] = 0;   // ready for the next call
  }
#pragma unroll
  for (int b = 0; b < MB; ++b) {
#pragma unroll
    for (int jo = 0; jo < P::JPO; ++jo)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sts_half(epi + ((8 * jo + 2 * t + (e & 1)) * EPI_LD + 16 * wq + g + 8 * (e >> 1)) * 2,
                 comp(sum[b * P::JPO + jo], e));
    named_bar_sync(1 + cw, 128);
    store_epi<ROWS>(p, epi, ct, mt * TILE_ROWS + rank * ROWS, nt * B_ROWS + 64 * MB * cw + 64 * b, l);
    named_bar_sync(1 + cw, 128);
  }
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
      mbar_arrive_after_loads(smem_u32(&raw_empty[s]), lane == 0, v[0].x | v[1].x | v[2].x | v[3].x | sc0 | sc1);
      mbar_wait(&act_empty[as], ((j / ACT_STAGES) & 1) ^ 1);
      const uint32_t act = sbase + OFF_ACT + as * ACT_STAGE_BYTES;
      decode_a_row(v, sc0, sc1, [&](int atom, int chunk, uint32_t o0, uint32_t o1, uint32_t o2, uint32_t o3) {
        sts128(act + atom * ACT_ATOM_BYTES + r * 128 + ((chunk ^ (r & 7)) << 4), o0, o1, o2, o3);
      });
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
    // NBUF fragment buffers of GS k16 steps each (32 registers either way). Groups of GS wgmmas cycle
    // through them, so the decode of the next group runs while earlier ones are on the tensor cores;
    // wait_group<NBUF-1> before a decode guarantees the group that last read that buffer has finished (RS
    // wgmma reads registers late).
    constexpr int GS = NVFP4_GROUP_STEPS, NBUF = 8 / GS;
    static_assert(GS == 2 || GS == 4, "wgmma group size");
    uint32_t frag[NBUF][GS][4];
    int act_pending = -1;   // act stage whose last wgmma group may still be running
    // barriers as 32-bit shared addresses (8 bytes each), computed once
    const uint32_t raw_full_u = smem_u32(raw_full), raw_empty_u = raw_full_u + 8 * RAW_STAGES;
    const uint32_t act_full_u = raw_empty_u + 8 * RAW_STAGES, act_empty_u = act_full_u + 8 * ACT_STAGES;
    int s = 0, as = 0;             // raw and act stage of the next k-block ...
    uint32_t ph = 0, aph = 0;      // ... and the parity of their current round

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

      for (int kq = (int)(seg_end - it); kq > 0; --kq) {
        mbar_wait(raw_full_u + 8 * s, ph);
        const uint32_t st = sbase + OFF_RAW + s * RAW_STAGE_BYTES;
        const uint32_t act = sbase + OFF_ACT + as * ACT_STAGE_BYTES;
        // k16 step ks: +32 B inside the atom, +ACT_ATOM_BYTES per atom. Broadcast from lane 0 so that ptxas
        // knows the address is warp-uniform and keeps the descriptors in uniform registers (measured 1-4 %
        // faster than converting each one with R2UR)
        const uint64_t dbase = sw128_desc(__shfl_sync(0xffffffffu, act, 0));

        uint32_t loaded = 0;   // a word of every load from the raw stage (see mbar_arrive_after_loads)
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
            loaded |= x[h].x | sb[h];
          }
          if (b == MB - 1) {   // everything of the raw stage is in registers
            __syncwarp();
            mbar_arrive_after_loads(raw_empty_u + 8 * s, lane == 0, loaded);
          }
          uint32_t a0 = 0, a1 = 0;               // this scale column's scales (fp16x2, halved)
#pragma unroll
          for (int gi = 0; gi < NBUF; ++gi) {    // group gi: k16 steps GS*gi .. GS*gi+GS-1, buffer frag[gi]
            wgmma_wait<NBUF - 1>();              // the group that last read frag[gi] (NBUF groups ago) is done
#pragma unroll
            for (int kk = 0; kk < GS; ++kk) keep(frag[gi][kk]);
            if (b == 0 && gi == NBUF - 1) {      // ...and so is every group of the previous stage
              __syncwarp();
              mbar_arrive_if(act_empty_u + 8 * (act_pending < 0 ? 0 : act_pending), lane == 0 && act_pending >= 0);
            }
            const int kh = GS * gi / 4;          // scale column of these steps
            if (GS * gi % 4 == 0) {
              a0 = scale_x2((sb[0] >> (8 * kh)) & 0xFF);
              a1 = scale_x2((sb[1] >> (8 * kh)) & 0xFF);
            }
#pragma unroll
            for (int kk = 0; kk < GS; ++kk) {
              const int kq = (GS * gi + kk) % 4;   // step inside the scale column
              const int q = 2 * kh + (kq >> 1);
              const uint32_t w0 = word(x[0], q), w1 = word(x[1], q);
#if NVFP4_PROFILE_MODE & 2
              frag[gi][kk][0] = w0 ^ a0; frag[gi][kk][1] = w1 ^ a1; frag[gi][kk][2] = w0 ^ kq; frag[gi][kk][3] = w1 ^ kq;
#else
              if ((kq & 1) == 0) decode_steps(frag[gi][kk], frag[gi][(kk + 1) % GS], w0, w1, a0, a1);   // steps kq, kq+1
#endif
            }
            if (b == 0 && gi == 0) mbar_wait(act_full_u + 8 * as, aph);
            wgmma_fence();
#if !(NVFP4_PROFILE_MODE & 4)
#pragma unroll
            for (int kk = 0; kk < GS; ++kk) {
              const int kq = (GS * gi + kk) % 4;
              wgmma_m64n128k16_rs(acc[b], frag[gi][kk], dbase + (uint64_t)((kh * ACT_ATOM_BYTES + kq * 32) >> 4));
            }
#endif
            wgmma_commit();
          }
        }
        act_pending = as;
        if (++s == RAW_STAGES) { s = 0; ph ^= 1; }
        if (++as == ACT_STAGES) { as = 0; aph ^= 1; }
      }
      it = seg_end;
      wgmma_wait<0>();
#pragma unroll
      for (int b = 0; b < MB; ++b) keep_acc(acc[b]);
      __syncwarp();
      mbar_arrive_if(act_empty_u + 8 * (act_pending < 0 ? 0 : act_pending), lane == 0 && act_pending >= 0);
      act_pending = -1;
      // ---------------------------------------------------------------- epilogue of this tile
#if NVFP4_PROFILE_MODE & 32
      continue;
#endif
      int l, nt, mt;
      sch.decode(tile, l, nt, mt);
      const bool whole = seg_begin == tile * nk && seg_end == (tile + 1) * nk;
      bool finish = true;
      if (p.cluster > 1) {
        // cluster split-K: once every CTA of the cluster is past its main loop (the stage buffers, which
        // receive the parts, are free everywhere), this CTA's fragments go to the CTAs that sum them
#if !(NVFP4_PROFILE_MODE & 256)
        cluster_sync();
        const uint32_t part = sbase + OFF_RAW, rank = cluster_rank();
        if (p.cluster == 2) scatter_part<MB, 2>(acc, part, 128 * cw + ct, rank);
        else if (p.cluster == 4) scatter_part<MB, 4>(acc, part, 128 * cw + ct, rank);
        else scatter_part<MB, 8>(acc, part, 128 * cw + ct, rank);
#endif
        finish = false;
      } else if (!whole) {
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
            for (int e = 0; e < 4; ++e)
              sts_half(epi + ((8 * jj + 2 * t + (e & 1)) * EPI_LD + 16 * wq + g + 8 * (e >> 1)) * 2, acc[b][4 * jj + e]);
          named_bar_sync(1 + cw, 128);
          store_epi<TILE_ROWS>(p, epi, ct, mt * TILE_ROWS, nt * B_ROWS + 64 * MB * cw + 64 * b, l);
          named_bar_sync(1 + cw, 128);
        }
      }
    }
    if (p.cluster > 1) {
      // The producer and transform threads never arrive: the cluster barrier stops waiting for them once they exit.
#if NVFP4_PROFILE_MODE & 256
      return;
#endif
      cluster_sync();   // every slot written (release / acquire at cluster scope); no remote access after this
      const uint32_t part = sbase + OFF_RAW;
      if (p.cluster == 2) cluster_finish<MB, 2>(p, part, epi, fix_flag, cta, cw, ct, wq, g, t);
      else if (p.cluster == 4) cluster_finish<MB, 4>(p, part, epi, fix_flag, cta, cw, ct, wq, g, t);
      else cluster_finish<MB, 8>(p, part, epi, fix_flag, cta, cw, ct, wq, g, t);
    }
  } else {
    // ------------------------------------------------------------------ producer: TMA + bulk copies
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
    if (warp == PRODUCER_WARP && lane == 0) {
      NVFP4_ITER_RANGE
      prefetch_tensormap(&map_a);
      prefetch_tensormap(&map_b);
#if NVFP4_PROFILE_MODE & 64
      constexpr bool LOAD_A = false;
#else
      constexpr bool LOAD_A = true;
#endif
#if NVFP4_PROFILE_MODE & 128
      constexpr bool LOAD_B = false;
#else
      constexpr bool LOAD_B = true;
#endif
      // One thread issues every load, so its per-stage work is kept small: the tile's coordinates are
      // recomputed only when the k-block index wraps (64-bit divisions once per tile, not per stage), and
      // stage, parity and barrier addresses are counted incrementally (the loads-only probe of
      // 2304x4608x7168 went from 123 to 100 us with this).
      const uint32_t raw_full_u = smem_u32(raw_full), raw_empty_u = raw_full_u + 8 * RAW_STAGES;
      const uint32_t st0 = sbase + OFF_RAW;
      long long tile = it_begin / nk;
      int kb = (int)(it_begin % nk);
      int row_b = 0, row_a = 0, nsb = 0, tx_bytes = 0;
      const uint8_t *sfb_tile = nullptr, *sfa_tile = nullptr;   // scale blocks (first row block, column 0)
      auto start_tile = [&]() {
        int l, nt, mt;
        sch.decode(tile, l, nt, mt);
        const int rb0 = (nt * B_ROWS) >> 7;                      // first 128-row scale block of this B tile
        const int rb_last = (nt * B_ROWS + B_ROWS - 1) >> 7;
        nsb = (rb_last < p.b_row_blocks ? rb_last : p.b_row_blocks - 1) - rb0 + 1;  // never past the end
        row_b = l * p.N + nt * B_ROWS;
        row_a = l * p.M + mt * TILE_ROWS;
        sfb_tile = p.sfb + l * p.sfb_batch + sf_block_offset(rb0, 0, p.kb64);
        sfa_tile = p.sfa + l * p.sfa_batch + sf_block_offset(mt, 0, p.kb64);
        tx_bytes = (LOAD_B ? B_ROWS * BK_BYTES : 0) + nsb * SF_STAGE_BYTES +
                   (LOAD_A ? TILE_ROWS * BK_BYTES + SF_STAGE_BYTES : 0);
      };
      start_tile();
      int s = 0;
      uint32_t ph = 0;
      const size_t sfb_row_block = (size_t)p.kb64 * SF_BLOCK_BYTES;   // bytes between row blocks
      for (int left = (int)(it_end - it_begin); left > 0; --left) {
        mbar_wait(raw_empty_u + 8 * s, ph ^ 1);
        const uint32_t st = st0 + s * RAW_STAGE_BYTES, full = raw_full_u + 8 * s;
        mbar_expect_tx(full, tx_bytes);
        if (LOAD_B) tma_load_2d(st + RAW_B, &map_b, full, kb * BK_BYTES, row_b);
        if (LOAD_A) tma_load_2d(st + RAW_A, &map_a, full, kb * BK_BYTES, row_a);
        const size_t col = (size_t)kb * SF_STAGE_BYTES;   // scale columns 2kb, 2kb+1 of a row block
        for (int i = 0; i < nsb; ++i)
          bulk_load(st + RAW_SB + i * SF_STAGE_BYTES, sfb_tile + i * sfb_row_block + col, SF_STAGE_BYTES, full);
        if (LOAD_A) bulk_load(st + RAW_SA, sfa_tile + col, SF_STAGE_BYTES, full);
        if (++s == RAW_STAGES) { s = 0; ph ^= 1; }
        if (++kb == nk && left > 1) { kb = 0; ++tile; start_tile(); }
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
// A cluster split may give a CTA this many times the k-blocks the balanced split over all
// SMs would (it saves that split's serial fixup).
constexpr double CLUSTER_MAX_EXTRA = 1.25;

inline int choose_mb(int M, int N, int K, int L, int num_sms) {
  const long long iters = (long long)((M + 127) / 128) * ((N + 255) / 256) * L * (K / BK);
  return iters >= (long long)MB2_MIN_KBLOCKS_PER_SM * num_sms ? 2 : 1;
}

template <int MBV> int max_active_clusters(int size);

// B tile height and split per shape (mb, cluster, groups out). The balanced split over all SMs is the default;
// a cluster split is taken when the balanced one would split tiles (its fixup is serial at the end of the
// kernel) and all G clusters of C CTAs of every tile fit on the GPU at once with at most CLUSTER_MAX_EXTRA
// times its k-blocks per CTA: the fewest k-blocks per CTA wins, then one group rather than two.
inline void choose_config(int M, int N, int K, int L, int num_sms, int& mb, int& cluster, int& groups) {
  cluster = 1;
  groups = 1;
  if (mb == 0) mb = choose_mb(M, N, K, L, num_sms);
  const int nk = K / BK;
  const long long tiles = (long long)((M + 127) / 128) * ((N + 64 * NUM_CWG * mb - 1) / (64 * NUM_CWG * mb)) * L;
  const double balanced = (double)(tiles * nk) / num_sms;   // k-blocks per SM of the balanced split
  if (balanced >= nk) return;                               // whole tiles per SM: little to fix up
  int best = 0;
  for (int g = 1; g <= 2; ++g)
    for (int c = 2; c <= 8; c *= 2) {
      if (nk < c * g) continue;
      const int fit = mb == 2 ? max_active_clusters<2>(c) : max_active_clusters<1>(c);
      if (tiles * g > fit) continue;
      const int per_cta = (nk + c * g - 1) / (c * g);
      if (per_cta > balanced * CLUSTER_MAX_EXTRA || (best && per_cta >= best)) continue;
      best = per_cta;
      cluster = c;
      groups = g;
    }
}

// Internal linkage on purpose: a function-local static in a template is one process-wide (GNU unique)
// symbol, so a second build of this file loaded in the same process would skip the attribute for its kernel.
static bool g_smem_attr_done[3] = {false, false, false};

template <int MBV>
int set_smem_attr(char* err, int err_len) {
  if (!g_smem_attr_done[MBV]) {
    cudaError_t e =
        cudaFuncSetAttribute(gemm_kernel<MBV>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg<MBV>::SMEM_BYTES);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(gemm_kernel<MBV>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) {
      snprintf(err, err_len, "cudaFuncSetAttribute: %s", cudaGetErrorString(e));
      return 3;
    }
    g_smem_attr_done[MBV] = true;
  }
  return 0;
}

// How many clusters of `size` CTAs of gemm_kernel<MBV> fit on the GPU at once (0 if none or on error);
// cached per (MB, size) since it depends only on the device and the kernel.
static int g_max_clusters[3][17];
template <int MBV>
int max_active_clusters(int size) {
  if (size < 1 || size > 16) return 0;
  int& cached = g_max_clusters[MBV][size];
  if (cached == 0) {
    char err[128];
    if (set_smem_attr<MBV>(err, sizeof err) != 0) return 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(size, 1, 1);
    cfg.blockDim = dim3(THREADS, 1, 1);
    cfg.dynamicSmemBytes = Cfg<MBV>::SMEM_BYTES;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = size; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, gemm_kernel<MBV>, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      n = -1;   // remembered: this size cannot be launched
    }
    cached = n;
  }
  return cached < 0 ? 0 : cached;
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
  // cluster split-K: C*G CTAs per tile, CTA tile*C*G + i owns k-blocks [i*nk/(C*G), (i+1)*nk/(C*G))
  // (Schedule::begin); i = C*group + rank
  s.grid = p.cluster > 1 ? s.tiles() * p.cluster * p.groups : (int)(s.total < num_sms ? s.total : num_sms);
  if (p.cluster > 1 && p.groups > 1) {   // the groups' sums and counters must fit the caller's buffers
    const long long ws_need = (long long)s.tiles() * p.groups * TILE_ROWS * B_ROWS * 4;
    const long long counters_have = (long long)((M + 127) / 128) * ((N + 127) / 128) * L * NUM_CWG;
    if (ws_need > (long long)2 * num_sms * NUM_CWG * Cfg<2>::WS_FLOAT4_PER_UNIT * 16 ||
        (long long)s.tiles() * p.cluster > counters_have) {
      snprintf(err, err_len, "cluster split %d x %d groups: %lld tiles need more workspace or counters than "
               "the launcher provides", p.cluster, p.groups, (long long)s.tiles());
      return 5;
    }
  }

  CUtensorMap map_a, map_b;
  int r = make_fp4_map(&map_a, a, (uint64_t)L * M, (uint64_t)K / 2, TILE_ROWS, BK_BYTES, CU_TENSOR_MAP_SWIZZLE_64B);
  if (r == 0) r = make_fp4_map(&map_b, b, (uint64_t)L * N, (uint64_t)K / 2, B_ROWS, BK_BYTES, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (r != 0) {
    snprintf(err, err_len, "cuTensorMapEncodeTiled failed (%d) for M=%d N=%d K=%d L=%d", r, M, N, K, L);
    return 2;
  }
  if (int r3 = set_smem_attr<MBV>(err, err_len)) return r3;
  cudaError_t e;
  if (p.cluster > 1) {
    cudaLaunchConfig_t cfg = {};   // zeroed: the default (legacy) queue 0
    cfg.gridDim = dim3(s.grid, 1, 1);
    cfg.blockDim = dim3(THREADS, 1, 1);
    cfg.dynamicSmemBytes = SMEM_BYTES;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = p.cluster; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    e = cudaLaunchKernelEx(&cfg, gemm_kernel<MBV>, p, map_a, map_b);
    if (e == cudaSuccess) e = cudaGetLastError();
  } else {
    gemm_kernel<MBV><<<s.grid, THREADS, SMEM_BYTES>>>(p, map_a, map_b);   // default (legacy) queue 0
    e = cudaGetLastError();
  }
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
// cluster: 0 = choose per shape, 1 = split tiles finished through ws/counters, C = 2, 4 or 8: every tile split
// evenly over the C CTAs of a thread-block cluster, or over `groups` (1 or 2) such clusters (needs
// K/128 >= C * groups); groups is ignored unless cluster > 1.
extern "C" long long nvfp4_sm90_workspace_bytes(int num_sms) {
  using namespace nvfp4::sm90;
  return (long long)2 * num_sms * NUM_CWG * Cfg<2>::WS_FLOAT4_PER_UNIT * 16;   // the larger of the two configs
}
// How many clusters of `size` CTAs fit on the GPU at once for B tiles of 64 * 2 * mb rows (0: none).
extern "C" int nvfp4_sm90_max_clusters(int mb, int size) {
  using namespace nvfp4::sm90;
  return mb == 2 ? max_active_clusters<2>(size) : max_active_clusters<1>(size);
}
extern "C" long long nvfp4_sm90_counter_count(int M, int N, int L) {
  return (long long)((M + 127) / 128) * ((N + 127) / 128) * L * nvfp4::sm90::NUM_CWG;  // 128-row tiles: the most
}
extern "C" int nvfp4_sm90_launch(const void* a, const void* b, const void* sfa, const void* sfb, void* c, void* ws,
                                 int* counters, int M, int N, int K, int L, int num_sms, int mb, int cluster,
                                 int groups, char* err, int err_len) {
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
  if (cluster == 0) {
    choose_config(M, N, K, L, num_sms, mb, cluster, groups);
  } else if (cluster > 1) {
    if (mb == 0) mb = 2;
    if ((cluster != 2 && cluster != 4 && cluster != 8) || groups < 1 || groups > 2 || K / BK < cluster * groups) {
      snprintf(err, err_len, "cluster split of %d x %d groups needs C = 2, 4 or 8, 1 <= G <= 2 and K/128 >= C*G "
               "(K=%d)", cluster, groups, K);
      return 1;
    }
  } else {
    groups = 1;
  }
  if (mb == 0) mb = choose_mb(M, N, K, L, num_sms);
  p.cluster = cluster;
  p.groups = groups;
  return mb == 2 ? launch<2>(a, b, p, num_sms, err, err_len) : launch<1>(a, b, p, num_sms, err, err_len);
}
