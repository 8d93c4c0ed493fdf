// Software implementation of the tcgen05 wrappers of tcgen05_hw.cuh, written from the PTX ISA text, so
// that the unchanged sm_100a kernel runs on a Hopper GPU (build with -DNVFP4_TCGEN05_EMULATION for sm_90a).
//
// Model:
//  - Tensor memory: per CTA a slot of 128 lanes x 512 columns x 32 bit in a global pool (grabbed by
//    tcgen05.alloc with an atomic, freed by dealloc; alloc spins while every slot is taken, as the real
//    alloc blocks while columns are taken). Allocated columns are poisoned with a NaN pattern (TMEM is not
//    zeroed), accesses outside the allocation are errors.
//  - mma: decodes the instruction descriptor (kind::mxf4nvf4 table) and both shared-memory descriptors
//    (start, LBO, SBO, version bit, swizzle on the address), reads e2m1 data from shared memory and the
//    ue4m3 scales from emulated TMEM in the scale_vec::4X layout, accumulates D in fp32 in emulated TMEM.
//  - cp .32x128b.warpx4: 32 rows x 16 bytes from a no-swizzle descriptor into 4 columns of lanes
//    t, 32+t, 64+t, 96+t.
//  - ld .32x32b.x32: thread t reads lane (lane(taddr)+t); the warp may only touch lanes 32*(warp%4)..+31.
//  - The emulated operations are synchronous: commit = make the warp's writes visible, then one
//    mbarrier arrive; fences = CTA-scope memory fences; wait::ld = __syncwarp.
// Violations set a first-error code readable with nvfp4_sm100_emu_error() (the kernel keeps running).
// Every wrapper is called by all 32 lanes of a warp (same convention as tcgen05_hw.cuh).
#pragma once
#include <stdint.h>
#include <cuda_runtime.h>
#include "tcgen05_emu_decode.h"

namespace t5 {

constexpr int kEmuSlots = 264;  // >= resident CTAs (one CTA per SM for this kernel)
__device__ uint32_t g_t5emu_tmem[kEmuSlots][t5emu::kTmemLanes * t5emu::kTmemColsMax];
__device__ int g_t5emu_slot_busy[kEmuSlots];
__device__ uint32_t g_t5emu_error;
__device__ uint32_t g_t5emu_error_info;
__device__ uint32_t g_t5emu_dummy;
__shared__ uint32_t s_t5emu_slot;
__shared__ uint32_t s_t5emu_ncols;

__device__ __forceinline__ uint32_t t5emu_lane_id() { return threadIdx.x & 31u; }

__device__ __noinline__ void t5emu_fail(uint32_t code, uint32_t info) {
  if (atomicCAS(&g_t5emu_error, 0u, code) == 0u) g_t5emu_error_info = info;
}

__device__ __forceinline__ uint32_t* t5emu_cell(uint32_t lane, uint32_t col) {
  if (lane >= t5emu::kTmemLanes || col >= s_t5emu_ncols) {
    t5emu_fail(t5emu::kErrTmemRange, (lane << 16) | (col & 0xFFFFu));
    return &g_t5emu_dummy;
  }
  return &g_t5emu_tmem[s_t5emu_slot][lane * t5emu::kTmemColsMax + col];
}

__device__ __forceinline__ uint4 t5emu_lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

// ---------------------------------------------------------------- allocation
__device__ __forceinline__ void tmem_alloc(uint32_t* smem_dst, uint32_t ncols) {
  __syncwarp();
  if (t5emu_lane_id() == 0) {
    if (ncols < 32 || ncols > 512 || (ncols & (ncols - 1))) t5emu_fail(t5emu::kErrTmemNCols, ncols);
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    uint32_t slot = cta % kEmuSlots;
    while (atomicCAS(&g_t5emu_slot_busy[slot], 0, 1) != 0) slot = (slot + 1) % kEmuSlots;
    __threadfence();
    s_t5emu_slot = slot;
    s_t5emu_ncols = ncols > 512 ? 512 : ncols;
    *smem_dst = 0u;  // lane 0, column 0 of this CTA's tensor memory
  }
  __syncwarp();
  const uint32_t nc = s_t5emu_ncols;
  uint32_t* base = g_t5emu_tmem[s_t5emu_slot];
  for (uint32_t i = t5emu_lane_id(); i < t5emu::kTmemLanes * nc; i += 32)
    base[(i / nc) * t5emu::kTmemColsMax + (i % nc)] = 0xFFC0DEADu;  // NaN poison
  __threadfence_block();
  __syncwarp();
}
__device__ __forceinline__ void tmem_relinquish() { __syncwarp(); }
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  __syncwarp();
  if (t5emu_lane_id() == 0) {
    if (taddr != 0u || ncols != s_t5emu_ncols) t5emu_fail(t5emu::kErrTmemNotAlloc, taddr);
    __threadfence();
    atomicExch(&g_t5emu_slot_busy[s_t5emu_slot], 0);
  }
  __syncwarp();
}

// ---------------------------------------------------------------- tcgen05.cp .32x128b.warpx4
__device__ __forceinline__ void umma_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
  __syncwarp();
  const t5emu::SDesc d = t5emu::decode_smem_desc(sdesc);
  const uint32_t t = t5emu_lane_id();
  if (d.error) t5emu_fail(d.error, (uint32_t)(sdesc >> 32));
  else if (d.swizzle != 0u) t5emu_fail(t5emu::kErrSdescSwizzle, d.swizzle);  // scale atoms: no swizzle
  else if (t5emu::taddr_lane(taddr) != 0u) t5emu_fail(t5emu::kErrCpLane, taddr);
  else {
    const uint4 v = t5emu_lds128(t5emu::cp32x128b_src_row_addr(d, t));
    const uint32_t col = t5emu::taddr_col(taddr);
#pragma unroll
    for (uint32_t q = 0; q < 4; ++q) {
      *t5emu_cell(32u * q + t, col + 0) = v.x;
      *t5emu_cell(32u * q + t, col + 1) = v.y;
      *t5emu_cell(32u * q + t, col + 2) = v.z;
      *t5emu_cell(32u * q + t, col + 3) = v.w;
    }
  }
  __threadfence_block();
  __syncwarp();
}

// ---------------------------------------------------------------- tcgen05.mma kind::mxf4nvf4 block16
__device__ __forceinline__ void t5emu_unpack32(uint4 lo, uint4 hi, float (&v)[64], bool neg) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int nib = 0; nib < 8; ++nib) {  // byte b = nib/2; element 2b = low nibble, 2b+1 = high
      const float x = t5emu::e2m1_to_float((w[i] >> (4 * nib)) & 0xFu);
      v[8 * i + nib] = neg ? -x : x;
    }
}

__device__ __noinline__ void umma_mma_mxf4nvf4(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                               uint32_t sfa_tmem, uint32_t sfb_tmem, uint32_t enable_input_d) {
  __syncwarp();
  const t5emu::IDesc id = t5emu::decode_idesc_mxf4nvf4(idesc);
  const t5emu::SDesc da = t5emu::decode_smem_desc(a_desc), db = t5emu::decode_smem_desc(b_desc);
  bool ok = true;
  if (id.error) { t5emu_fail(id.error, idesc); ok = false; }
  else if (da.error) { t5emu_fail(da.error, (uint32_t)(a_desc >> 32)); ok = false; }
  else if (db.error) { t5emu_fail(db.error, (uint32_t)(b_desc >> 32)); ok = false; }
  else if (t5emu::taddr_lane(d_tmem) != 0u) { t5emu_fail(t5emu::kErrDLane, d_tmem); ok = false; }
  else if (t5emu::taddr_lane(sfa_tmem) != 0u || t5emu::taddr_lane(sfb_tmem) != 0u) { t5emu_fail(t5emu::kErrTmemLaneAccess, sfa_tmem); ok = false; }
  else if (t5emu::taddr_col(sfb_tmem) & 1u) { t5emu_fail(t5emu::kErrSfbAlign, sfb_tmem); ok = false; }  // seen on B200, not in the ISA
  if (ok) {
    const uint32_t dcol = t5emu::taddr_col(d_tmem), acol = t5emu::taddr_col(sfa_tmem), bcol = t5emu::taddr_col(sfb_tmem);
    for (uint32_t n = t5emu_lane_id(); n < id.N; n += 32) {
      float bv[64];
      t5emu_unpack32(t5emu_lds128(t5emu::kmajor_chunk_addr(db, n, 0)), t5emu_lds128(t5emu::kmajor_chunk_addr(db, n, 16)),
                     bv, id.neg_b != 0u);
      const uint32_t sbw = *t5emu_cell(t5emu::sf4x_lane(n), t5emu::sf4x_col(bcol, n));
      for (uint32_t m = 0; m < id.M; ++m) {
        float av[64];
        t5emu_unpack32(t5emu_lds128(t5emu::kmajor_chunk_addr(da, m, 0)), t5emu_lds128(t5emu::kmajor_chunk_addr(da, m, 16)),
                       av, id.neg_a != 0u);
        const uint32_t saw = *t5emu_cell(t5emu::sf4x_lane(m), t5emu::sf4x_col(acol, m));
        uint32_t* dc = t5emu_cell(m, dcol + n);
        float acc = enable_input_d ? __uint_as_float(*dc) : 0.0f;
#pragma unroll
        for (int blk = 0; blk < 4; ++blk) {
          float s = 0.0f;
#pragma unroll
          for (int e = 0; e < 16; ++e) s = fmaf(av[16 * blk + e], bv[16 * blk + e], s);
          const float sc = t5emu::ue4m3_to_float((saw >> (8 * blk)) & 0xFFu) * t5emu::ue4m3_to_float((sbw >> (8 * blk)) & 0xFFu);
          acc = fmaf(s, sc, acc);
        }
        *dc = __float_as_uint(acc);
      }
    }
  }
  __threadfence_block();
  __syncwarp();
}

// ---------------------------------------------------------------- commit / ld / fences
__device__ __forceinline__ void umma_commit(uint64_t* mbar) {
  __syncwarp();
  __threadfence_block();
  if (t5emu_lane_id() == 0) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(mbar);
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
  }
  __syncwarp();
}

__device__ __forceinline__ void tmem_ld_32x32b_x32(uint32_t taddr, uint32_t (&r)[32]) {
  __syncwarp();
  const uint32_t lane0 = t5emu::taddr_lane(taddr), col = t5emu::taddr_col(taddr);
  const uint32_t w = (threadIdx.x / 32u) % 4u;
  if (lane0 != 32u * w) t5emu_fail(t5emu::kErrTmemLaneAccess, taddr);
#pragma unroll
  for (int j = 0; j < 32; ++j) r[j] = *t5emu_cell(lane0 + t5emu_lane_id(), col + j);
}
__device__ __forceinline__ void tmem_wait_ld() { __syncwarp(); }
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() { __threadfence_block(); }
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() { __threadfence_block(); }

}  // namespace t5

// Host: read and clear the emulator's first error (0 = none); *info gets the offending value.
extern "C" unsigned nvfp4_sm100_emu_error(unsigned* info) {
  unsigned e = 0, i = 0, z = 0;
  if (cudaMemcpyFromSymbol(&e, t5::g_t5emu_error, sizeof(e)) != cudaSuccess) return 0xFFFFFFFFu;
  cudaMemcpyFromSymbol(&i, t5::g_t5emu_error_info, sizeof(i));
  cudaMemcpyToSymbol(t5::g_t5emu_error, &z, sizeof(z));
  if (info) *info = i;
  return e;
}
