// tcgen05.alloc under contention, written for sm_100a; bench/emulation/alloc_check.py runs it under
// --emulate-blackwell's runtime on a Hopper GPU. Small CTAs, many per SM. Each CTA's warp 0 allocates 256 columns,
// waits `hold_us` microseconds (so that every CTA resident on the SM has asked for its first columns), then, with
// `second` > 0, allocates `second` more, as public kernels do that take a CTA's columns in several allocs. Two
// CTAs of an SM then hold all 512 columns and both wait for more: a deadlock, on a B200 as under emulation (the
// emulation names it and lets the call end). With `second` = 0 the CTAs only wait for each other's columns, which
// come free: no error. Every CTA's warps store blockIdx.x + warp into their lane quarter of the first allocation,
// load it back and count the lanes that read their own value into out[blockIdx.x] (128 when right).
#include <torch/extension.h>
#include <stdint.h>

constexpr int kThreads = 128;

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kThreads) contended_alloc(int* out, uint32_t second, uint32_t hold_us) {
  __shared__ uint32_t slots[2];
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;"
                 ::"r"((uint32_t)__cvta_generic_to_shared(&slots[0])) : "memory");
    const uint64_t t0 = now_ns();
    while (now_ns() - t0 < 1000ull * hold_us) __nanosleep(1000);
    if (second)
      asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
                   ::"r"((uint32_t)__cvta_generic_to_shared(&slots[1])), "r"(second) : "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t cell = slots[0] + ((uint32_t)(warp * 32) << 16);
  const uint32_t value = blockIdx.x + warp;
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" ::"r"(cell), "r"(value) : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  uint32_t got;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(got) : "r"(cell) : "memory");
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  if (got == value) atomicAdd(&out[blockIdx.x], 1);
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(slots[0]) : "memory");
    if (second) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(slots[1]), "r"(second) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
}

void run(torch::Tensor out, int64_t second, int64_t hold_us) {
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == torch::kInt32 && out.is_contiguous());
  contended_alloc<<<(unsigned)out.numel(), kThreads>>>(out.data_ptr<int>(), (uint32_t)second, (uint32_t)hold_us);
}
