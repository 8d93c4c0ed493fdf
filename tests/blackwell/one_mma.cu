// One tcgen05.mma of a chosen kind on a 128 x N x (32 bytes of K) tile, then D read back two ways
// (32x32b and 16x256b). Our own kernel for bench/emulation/blackwell_emulation_kinds.py (run under --emulate-blackwell's
// runtime on a Hopper GPU; written for sm_100a). Operands: K-major, no swizzle, core matrices of 8 rows x 16
// bytes: chunk c of row r at (r / 8) * 256 + c * 128 + (r % 8) * 16, so LBO = 128 and SBO = 256.
#include <torch/extension.h>
#include <stdint.h>

__device__ __forceinline__ uint64_t desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(256 >> 4) << 32) | (1ull << 46);
}

template <int KIND>
__global__ void one_mma(const uint8_t* a, const uint8_t* b, uint32_t* d32, uint32_t* d256, uint32_t idesc, int n) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint32_t slot;
  __shared__ __align__(8) uint64_t bar;
  uint8_t* sa = smem;
  uint8_t* sb = smem + 128 * 32;
  for (int i = threadIdx.x; i < 128 * 32; i += blockDim.x) {
    const int r = i / 32, byte = i % 32, c = byte / 16;
    sa[(r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = a[i];
  }
  for (int i = threadIdx.x; i < n * 32; i += blockDim.x) {
    const int r = i / 32, byte = i % 32, c = byte / 16;
    sb[(r / 8) * 256 + c * 128 + (r % 8) * 16 + byte % 16] = b[i];
  }
  const uint32_t bar_addr = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x < 32)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;"
                 ::"r"((uint32_t)__cvta_generic_to_shared(&slot)) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t t = slot;
  if (threadIdx.x == 0) {
    const uint64_t da = desc((uint32_t)__cvta_generic_to_shared(sa)), db = desc((uint32_t)__cvta_generic_to_shared(sb));
    if (KIND == 0) asm volatile("tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, 0;" ::"r"(t), "l"(da), "l"(db), "r"(idesc));
    if (KIND == 1) asm volatile("tcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, 0;" ::"r"(t), "l"(da), "l"(db), "r"(idesc));
    if (KIND == 2) asm volatile("tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, 0;" ::"r"(t), "l"(da), "l"(db), "r"(idesc));
    if (KIND == 3) asm volatile("tcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, 0;" ::"r"(t), "l"(da), "l"(db), "r"(idesc));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar_addr) : "memory");
  }
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(bar_addr) : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t w = threadIdx.x / 32, l = threadIdx.x % 32;
  for (int c0 = 0; c0 < n; c0 += 8) {   // 32x32b.x8: thread l = row 32w + l, columns c0 .. c0 + 7
    uint32_t r[8];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(t + ((32 * w) << 16) + c0));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    for (int j = 0; j < 8; ++j) d32[(32 * w + l) * n + c0 + j] = r[j];
  }
  for (int half = 0; half < 2; ++half) {  // 16x256b.x1: 16 lanes x 8 columns per instruction
    for (int c0 = 0; c0 < n; c0 += 8) {
      uint32_t r[4];
      const uint32_t lane0 = 32 * w + 16 * half;
      asm volatile("tcgen05.ld.sync.aligned.16x256b.x1.b32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(t + (lane0 << 16) + c0));
      asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
      for (int j = 0; j < 4; ++j) {
        const uint32_t row = lane0 + l / 4 + 8 * ((j / 2) % 2), col = c0 + j % 2 + 2 * (l % 4);
        d256[row * n + col] = r[j];
      }
    }
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
}

void run(torch::Tensor a, torch::Tensor b, torch::Tensor d32, torch::Tensor d256, int64_t kind, int64_t idesc) {
  const int n = (int)b.size(0);
  const int smem = 128 * 32 + n * 32;
  auto go = [&](auto kernel) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    kernel<<<1, 128, smem>>>(a.data_ptr<uint8_t>(), b.data_ptr<uint8_t>(), (uint32_t*)d32.data_ptr(),
                             (uint32_t*)d256.data_ptr(), (uint32_t)idesc, n);
  };
  if (kind == 0) go(one_mma<0>);
  if (kind == 1) go(one_mma<1>);
  if (kind == 2) go(one_mma<2>);
  if (kind == 3) go(one_mma<3>);
}
