// One NVFP4 MMA (kind::mxf4nvf4, block16, 128 x 128 x 64) whose scale factors every warp writes into its own lane
// quarter with tcgen05.st, in four orders of the warps (bench/emulation/st_order_check.py runs it under
// --emulate-blackwell's runtime on a Hopper GPU; written for sm_100a):
//   0 barrier    every warp stores, tcgen05.wait::st, then a CTA barrier, then thread 0 issues the MMA (correct)
//   1 late       warps 1-3 store 200 us late, thread 0 issues after its own tcgen05.wait::st alone: the MMA reads
//                quarters 1-3 before their stores (a B200 gets rows 32-127 wrong)
//   2 early      thread 0 waits 200 us, then issues after its own tcgen05.wait::st alone: the stores came first
//                (right values; no barrier orders them)
//   3 mbarrier   warps 1-3 store, tcgen05.wait::st, then arrive on an mbarrier thread 0 waits on (correct)
//   4 copy       thread 0 first copies zeros (tcgen05.cp, no commit) into the scale-factor columns, a CTA barrier,
//                then every warp stores the real ones and a CTA barrier precedes the MMA: a B200 has run the copy
//                long before the stores, so the stores' values stand (correct; no wait completes the copy first)
// Operands: K-major, no swizzle, core matrices of 8 rows x 16 bytes (LBO = 128, SBO = 256). Scale factors: row r's
// four e4m3 bytes (K blocks 0-3) in column base + r / 32, lane r % 32 of every quarter.
#include <torch/extension.h>
#include <stdint.h>

__device__ __forceinline__ uint64_t desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(256 >> 4) << 32) | (1ull << 46);
}

__device__ __forceinline__ void pause_us(uint32_t us) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 1000ull * us);
}

__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

__global__ void st_scales(const uint8_t* a, const uint8_t* b, const uint32_t* sfa, const uint32_t* sfb, float* d,
                          int mode) {
  __shared__ __align__(1024) uint8_t sa[128 * 32];
  __shared__ __align__(1024) uint8_t sb[128 * 32];
  __shared__ __align__(1024) uint8_t zeros[1024];
  __shared__ uint32_t slot;
  __shared__ __align__(8) uint64_t bars[2];
  for (int i = threadIdx.x; i < 128 * 32; i += blockDim.x) {
    const int r = i / 32, byte = i % 32, c = byte / 16, at = (r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16;
    sa[at] = a[i];
    sb[at] = b[i];
  }
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) zeros[i] = 0;
  const uint32_t done_bar = (uint32_t)__cvta_generic_to_shared(&bars[0]);
  const uint32_t stored_bar = (uint32_t)__cvta_generic_to_shared(&bars[1]);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(done_bar));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 3;" ::"r"(stored_bar));
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x < 32)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;"
                 ::"r"((uint32_t)__cvta_generic_to_shared(&slot)) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t t = slot, t_sfa = t + 128, t_sfb = t + 132;
  const uint32_t w = threadIdx.x / 32, l = threadIdx.x % 32;

  if (mode == 1 && w != 0) pause_us(200);
  if (mode == 4 && threadIdx.x == 0) {   // 32 rows x 16 bytes of zeros to every quarter: 4 columns each
    const uint64_t dz = desc((uint32_t)__cvta_generic_to_shared(zeros));
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(t_sfa), "l"(dz) : "memory");
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(t_sfb), "l"(dz) : "memory");
  }
  if (mode == 4) __syncthreads();      // the copies are issued before any warp stores (else a B200 races too)
  // 32x32b.x4: lane l of this warp's quarter, columns base .. base + 3 = rows l, 32 + l, 64 + l, 96 + l
  asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};"
               ::"r"(t_sfa + ((32 * w) << 16)), "r"(sfa[l]), "r"(sfa[32 + l]), "r"(sfa[64 + l]), "r"(sfa[96 + l]) : "memory");
  asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};"
               ::"r"(t_sfb + ((32 * w) << 16)), "r"(sfb[l]), "r"(sfb[32 + l]), "r"(sfb[64 + l]), "r"(sfb[96 + l]) : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  if (mode == 0 || mode == 4) {
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  }
  if (mode == 3 && w != 0 && l == 0) {
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(stored_bar) : "memory");
  }
  if (threadIdx.x == 0) {
    if (mode == 2) pause_us(200);
    if (mode == 3) {
      wait_parity(stored_bar, 0);
      asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    }
    // idesc: sfb_id 0, A/B E2M1, N >> 3 at bit 17, scale type UE4M3 (bit 23 = 0), M >> 7 at bit 27
    const uint32_t idesc = (1u << 7) | (1u << 10) | ((128u >> 3) << 17) | ((128u >> 7) << 27);
    const uint64_t da = desc((uint32_t)__cvta_generic_to_shared(sa)), db = desc((uint32_t)__cvta_generic_to_shared(sb));
    asm volatile("tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%4], [%5], 0;"
                 ::"r"(t), "l"(da), "l"(db), "r"(idesc), "r"(t_sfa), "r"(t_sfb) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(done_bar) : "memory");
  }
  wait_parity(done_bar, 0);
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  for (int c0 = 0; c0 < 128; c0 += 8) {   // 32x32b.x8: thread l = row 32w + l, columns c0 .. c0 + 7
    uint32_t r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(t + ((32 * w) << 16) + c0));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int j = 0; j < 8; ++j) d[(32 * w + l) * 128 + c0 + j] = __uint_as_float(r[j]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
}

void run(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor d, int64_t mode) {
  st_scales<<<1, 128>>>(a.data_ptr<uint8_t>(), b.data_ptr<uint8_t>(), (const uint32_t*)sfa.data_ptr(),
                        (const uint32_t*)sfb.data_ptr(), d.data_ptr<float>(), (int)mode);
}
