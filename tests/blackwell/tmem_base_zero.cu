// A kernel that runs one CTA per SM and takes its tensor memory to start at column 0 without reading what
// tcgen05.alloc returned, as public GEMMs do that passed on B200s (which hand out the lowest free columns).
// bench/emulation/tmem_base_check.py runs it under --emulate-blackwell's runtime on a Hopper GPU; written for
// sm_100a. Each CTA allocates 256 columns, every warp stores blockIdx.x + warp into column 0 of its lane quarter,
// loads it back, and the CTA frees column 0; out[blockIdx.x] counts the lanes that read their own value (128).
#include <torch/extension.h>
#include <stdint.h>

constexpr int kThreads = 128;
constexpr int kSharedBytes = 200 * 1024;   // one CTA per SM on a B200 and on a Hopper GPU

__global__ void __launch_bounds__(kThreads) base_zero(int* out) {
  extern __shared__ __align__(16) uint8_t window[];
  __shared__ uint32_t slot;
  const int warp = threadIdx.x / 32;
  window[threadIdx.x] = 0;
  if (warp == 0)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;"
                 ::"r"((uint32_t)__cvta_generic_to_shared(&slot)) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t column0 = (uint32_t)(warp * 32) << 16;   // lane quarter of this warp, column 0: alloc not read
  const uint32_t value = blockIdx.x + warp;
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" ::"r"(column0), "r"(value) : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  uint32_t got;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(got) : "r"(column0) : "memory");
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  if (got == value) atomicAdd(&out[blockIdx.x], 1);
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" ::"r"(0u) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
}

void run(torch::Tensor out) {
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == torch::kInt32 && out.is_contiguous());
  cudaFuncSetAttribute(base_zero, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  base_zero<<<(unsigned)out.numel(), kThreads, kSharedBytes>>>(out.data_ptr<int>());
}
