// Thin named wrappers around each tcgen05 instruction the NVFP4 kernel uses (sm_100a hardware path).
// tcgen05_emulation.cuh provides the same functions in software (built with -DNVFP4_TCGEN05_EMULATION).
//
// Calling convention (both builds): every wrapper is called by ALL 32 lanes of one warp.
//  - alloc / dealloc / relinquish / ld / wait::ld are .sync.aligned warp instructions;
//  - mma / cp / commit are issued by lane 0 only here (one issuing thread, as the ISA expects);
//    the emulation uses the whole warp to do the arithmetic.
// PTX forms: shared/research/tcgen05.md sections 0, 3.2, 5.
#pragma once
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
