// Every tcgen05 instruction form that --emulate-blackwell rewrites, in one sm_100a kernel (our own source,
// for tests/test_blackwell_emulation.py). The values are nonsense: this kernel is assembled, never run.
#include <stdint.h>
#include <cuda_runtime.h>

__global__ void every_tcgen05(uint32_t* out, uint64_t adesc, uint64_t bdesc, uint32_t idesc, int flag) {
  __shared__ uint32_t slot;
  __shared__ __align__(8) uint64_t bar;
  const uint32_t slot_addr = (uint32_t)__cvta_generic_to_shared(&slot);
  const uint32_t bar_addr = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;" ::"r"(slot_addr) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t t = slot;
  if (threadIdx.x == 0) {
    asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" ::"r"(t), "l"(adesc));
    asm volatile("tcgen05.cp.cta_group::1.4x256b [%0], %1;" ::"r"(t), "l"(adesc));
    asm volatile("tcgen05.cp.cta_group::1.128x128b [%0], %1;" ::"r"(t), "l"(adesc));
    asm volatile("tcgen05.cp.cta_group::1.64x128b.warpx2::02_13 [%0], %1;" ::"r"(t), "l"(adesc));
    asm volatile("tcgen05.cp.cta_group::1.64x128b.warpx2::01_23 [%0], %1;" ::"r"(t), "l"(adesc));
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(t + 128), "l"(bdesc));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n\t}"
                 ::"r"(t), "r"(t + 64), "l"(bdesc), "r"(idesc), "r"(flag));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag), "r"(t + 128), "r"(t + 132));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag), "r"(t + 128), "r"(t + 132));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag), "r"(t + 128), "r"(t + 132));
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::2X [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                 ::"r"(t), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(flag), "r"(t + 128), "r"(t + 132));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar_addr) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [%0];" ::"l"(&bar) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                 ::"r"(bar_addr), "h"((uint16_t)1) : "memory");
  }
  const uint32_t lane_base = (threadIdx.x / 32 % 4) * 32;
  uint32_t r[8];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(t + (lane_base << 16)));
  asm volatile("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%0, %1}, [%2];" : "=r"(r[2]), "=r"(r[3]) : "r"(t + (lane_base << 16)));
  asm volatile("tcgen05.ld.sync.aligned.16x128b.x1.b32 {%0, %1}, [%2];" : "=r"(r[4]), "=r"(r[5]) : "r"(t + (lane_base << 16)));
  asm volatile("tcgen05.ld.sync.aligned.16x256b.x1.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[6]), "=r"(r[7]), "=r"(r[0]), "=r"(r[1]) : "r"(t + ((lane_base + 16) << 16)));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" ::"r"(t + (lane_base << 16) + 8), "r"(r[2]) : "memory");
  asm volatile("tcgen05.st.sync.aligned.16x256b.x1.b32 [%0], {%1, %2, %3, %4};"
               ::"r"(t + (lane_base << 16) + 16), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]) : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  out[threadIdx.x] = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
}
