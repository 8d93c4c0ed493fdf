// Decoders for the tcgen05 emulator, written from the PTX ISA text (tcgen05 instruction descriptor for
// .kind::mxf4nvf4, tcgen05 shared-memory descriptor and canonical K-major layouts, scale_vec::4X scale
// layout in tensor memory, e2m1 / ue4m3 number formats). Plain C++ so that the same functions run on the
// CPU (kernels/sm100/desc_selftest.cpp) and inside the emulation build on the GPU.
// Written independently of the encoders in tcgen05_desc.h: the tests check one against the other and
// both against documented values.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define T5E_HD __host__ __device__ __forceinline__
#else
#define T5E_HD inline
#endif

namespace t5emu {

// Error codes reported by the emulator (first error wins).
enum : uint32_t {
  kOk = 0,
  kErrIdescSparse = 1, kErrIdescAType, kErrIdescBType, kErrIdescTranspose, kErrIdescM, kErrIdescN,
  kErrIdescScaleType, kErrIdescSfId, kErrIdescK96, kErrIdescReserved,
  kErrSdescVersion = 20, kErrSdescSwizzle, kErrSdescBaseOffset, kErrSdescLboMode,
  kErrTmemRange = 40, kErrTmemLaneAccess, kErrTmemDoubleAlloc, kErrTmemNotAlloc, kErrTmemNCols,
  kErrSfbAlign, kErrCpLane, kErrDLane,
};

struct IDesc {
  uint32_t M, N;
  uint32_t atype, btype;
  uint32_t neg_a, neg_b, trans_a, trans_b;
  uint32_t scale_type;  // 0 UE4M3, 1 UE8M0
  uint32_t sfa_id, sfb_id, sparse, k96;
  uint32_t error;
};

// Instruction descriptor, table "Instruction descriptor format for .kind::mxf4 and .kind::mxf4nvf4".
T5E_HD IDesc decode_idesc_mxf4nvf4(uint32_t d) {
  IDesc r;
  const uint32_t reserved = (d & 0x3u) | ((d >> 3) & 1u) << 3 | ((d >> 6) & 1u) << 6 | ((d >> 12) & 1u) << 12 |
                            ((d >> 24) & 7u) << 24;
  r.sparse = (d >> 2) & 1u;
  r.sfb_id = (d >> 4) & 3u;
  r.atype = (d >> 7) & 7u;
  r.btype = (d >> 10) & 3u;
  r.neg_a = (d >> 13) & 1u;
  r.neg_b = (d >> 14) & 1u;
  r.trans_a = (d >> 15) & 1u;
  r.trans_b = (d >> 16) & 1u;
  r.N = ((d >> 17) & 0x3Fu) << 3;
  r.scale_type = (d >> 23) & 1u;
  r.M = ((d >> 27) & 3u) << 7;
  r.sfa_id = (d >> 29) & 3u;
  r.k96 = (d >> 31) & 1u;
  r.error = kOk;
  if (reserved) r.error = kErrIdescReserved;
  else if (r.sparse) r.error = kErrIdescSparse;
  else if (r.atype != 1u) r.error = kErrIdescAType;        // E2M1 = 1 for mxf4 / mxf4nvf4
  else if (r.btype != 1u) r.error = kErrIdescBType;
  else if (r.trans_a || r.trans_b) r.error = kErrIdescTranspose;  // only K-major is valid
  else if (r.M != 128u) r.error = kErrIdescM;                // cta_group::1: M = 128
  else if (r.N < 8u || r.N > 256u) r.error = kErrIdescN;
  else if (r.scale_type != 0u) r.error = kErrIdescScaleType; // this emulator: UE4M3 (NVFP4) only
  else if (r.sfa_id || r.sfb_id) r.error = kErrIdescSfId;    // must be 0 with block16 / scale_vec::4X
  else if (r.k96) r.error = kErrIdescK96;                    // K = 96 is sm_103a only
  return r;
}

struct SDesc {
  uint32_t start;       // byte address in the CTA's shared window
  uint32_t lbo, sbo;    // bytes
  uint32_t version;     // bits 46-48, must be 1
  uint32_t base_offset, lbo_mode, swizzle;
  uint32_t error;
};

// Shared-memory descriptor (tcgen05, 64 bit).
T5E_HD SDesc decode_smem_desc(uint64_t d) {
  SDesc r;
  r.start = (uint32_t)(d & 0x3FFFull) << 4;
  r.lbo = (uint32_t)((d >> 16) & 0x3FFFull) << 4;
  r.sbo = (uint32_t)((d >> 32) & 0x3FFFull) << 4;
  r.version = (uint32_t)((d >> 46) & 7ull);
  r.base_offset = (uint32_t)((d >> 49) & 7ull);
  r.lbo_mode = (uint32_t)((d >> 52) & 1ull);
  r.swizzle = (uint32_t)((d >> 61) & 7ull);
  r.error = kOk;
  if (r.version != 1u) r.error = kErrSdescVersion;
  else if (!(r.swizzle == 0u || r.swizzle == 2u || r.swizzle == 4u || r.swizzle == 6u)) r.error = kErrSdescSwizzle;
  else if (r.base_offset != 0u) r.error = kErrSdescBaseOffset;  // not modelled: kernels keep atoms aligned
  else if (r.lbo_mode != 0u) r.error = kErrSdescLboMode;        // not modelled
  return r;
}

// Swizzle span in bytes of a K-major swizzled layout (the row pitch inside one 8-row atom).
T5E_HD uint32_t swizzle_span(uint32_t sw) { return sw == 2u ? 128u : sw == 4u ? 64u : sw == 6u ? 32u : 16u; }

// Apply the address-based swizzle: 16-byte chunk bits [4..] XOR row-phase bits [7..]
// (128B: 3 bits, 64B: 2 bits, 32B: 1 bit), i.e. CuTe Swizzle<3,4,3> / <2,4,3> / <1,4,3>.
T5E_HD uint32_t apply_swizzle(uint32_t addr, uint32_t sw) {
  const uint32_t bits = sw == 2u ? 7u : sw == 4u ? 3u : sw == 6u ? 1u : 0u;
  return addr ^ (((addr >> 7) & bits) << 4);
}

// Shared address of the 16-byte chunk holding K-bytes [kbyte, kbyte+16) of row r of a K-major operand
// described by d (canonical layouts of the PTX "Shared memory matrix layout" section):
//  - swizzled: 8-row atoms, row pitch = swizzle span, atoms along M/N every SBO, swizzle on the address;
//  - no swizzle: core matrices of 8 rows x 16 bytes, next core matrix along K at LBO, along M/N at SBO.
T5E_HD uint32_t kmajor_chunk_addr(const SDesc& d, uint32_t r, uint32_t kbyte) {
  if (d.swizzle == 0u) return d.start + (r / 8u) * d.sbo + (r % 8u) * 16u + (kbyte / 16u) * d.lbo;
  const uint32_t span = swizzle_span(d.swizzle);
  const uint32_t lin = d.start + (r / 8u) * d.sbo + (r % 8u) * span + kbyte;
  return apply_swizzle(lin, d.swizzle);
}

// e2m1 (s e e m): +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}. Twice the magnitude fits in 4 bits: 0,1,2,3,4,6,8,12.
T5E_HD float e2m1_to_float(uint32_t code) {
  const float mag = (float)((0xC8643210u >> (4u * (code & 7u))) & 0xFu) * 0.5f;
  return (code & 8u) ? -mag : mag;
}
// ue4m3: 4 exponent bits (bias 7), 3 mantissa bits, subnormals; bit 7 is ignored (unsigned format).
T5E_HD float ue4m3_to_float(uint32_t byte) {
  const uint32_t e = (byte >> 3) & 0xFu, m = byte & 7u;
  if (e == 15u && m == 7u) { union { uint32_t u; float f; } n; n.u = 0x7FC00000u; return n.f; }
  if (e == 0u) return (float)m * (1.0f / 512.0f);  // m * 2^-9
  float v = 1.0f + (float)m * 0.125f;
  int sh = (int)e - 7;
  while (sh > 0) { v *= 2.0f; --sh; }
  while (sh < 0) { v *= 0.5f; ++sh; }
  return v;
}

// Tensor memory: 128 lanes x 512 columns of 32 bit; address = lane << 16 | column.
constexpr uint32_t kTmemLanes = 128, kTmemColsMax = 512;
T5E_HD uint32_t taddr_lane(uint32_t a) { return a >> 16; }
T5E_HD uint32_t taddr_col(uint32_t a) { return a & 0xFFFFu; }

// scale_vec::4X (block16) layout: scale of row r (of A, or of B's N rows), K-block j (0..3) of one
// K = 64 MMA is byte j of the cell (lane r % 32, column base + r / 32).
T5E_HD uint32_t sf4x_lane(uint32_t r) { return r % 32u; }
T5E_HD uint32_t sf4x_col(uint32_t base_col, uint32_t r) { return base_col + r / 32u; }

// tcgen05.cp .32x128b.warpx4: source row t (16 bytes, no swizzle) goes to lanes t, 32+t, 64+t, 96+t,
// columns col .. col+3 (32-bit word w of the row -> column col + w).
T5E_HD uint32_t cp32x128b_src_row_addr(const SDesc& d, uint32_t t) { return d.start + (t / 8u) * d.sbo + (t % 8u) * 16u; }

}  // namespace t5emu
