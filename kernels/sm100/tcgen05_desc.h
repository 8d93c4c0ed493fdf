// tcgen05 descriptor encoders for the NVFP4 (kind::mxf4nvf4, block16) GEMM.
//
// Plain C++ (host and device), no CUDA or torch headers: the kernel, the emulation build and the
// host-only unit test (kernels/sm100/desc_selftest.cpp) all include this one file.
// Bit layouts: PTX ISA "Instruction descriptor" (kind::mxf4 / kind::mxf4nvf4 table) and
// "Shared memory descriptor" (tcgen05); see shared/research/tcgen05.md sections 1-3.
#pragma once
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
