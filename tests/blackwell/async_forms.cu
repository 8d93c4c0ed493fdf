// Our own sm_100a kernels for the asynchronous emulation's rewrite (tests/test_emulation_async.py): every
// form of mbarrier wait, bulk copies into shared memory, and a tcgen05.ld whose registers are read before
// (unwaited) and after (waited) its tcgen05.wait::ld. Compiled to PTX only; never run.
#include <stdint.h>

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void waits_and_copies(const uint8_t* src, uint32_t parity,
                                 uint64_t tmap, int* out) {
  __shared__ __align__(1024) uint8_t stage[2048];
  __shared__ __align__(8) uint64_t bar;
  uint32_t done = 0;
  asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done) : "r"(smem(&bar)), "r"(parity) : "memory");
  out[0] = done;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(smem(&bar)), "r"(parity) : "memory");
  out[1] = done;
  uint64_t generic = (uint64_t)&bar;
  asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.b64 p, [%1], 1;\n\tselp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done) : "l"(generic) : "memory");
  out[2] = done;
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1024, [%2];"
               :: "r"(smem(stage)), "l"(src), "r"(smem(&bar)) : "memory");
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %2}], [%3];"
               :: "r"(smem(stage + 1024)), "l"(tmap), "r"(0), "r"(smem(&bar)) : "memory");
}

__global__ void ld_unwaited(uint32_t taddr, float* out) {
  uint32_t r0, r1;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(taddr));
  out[threadIdx.x] = __uint_as_float(r0) + __uint_as_float(r1);   // no tcgen05.wait::ld: undefined values
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

__global__ void ld_waited(uint32_t taddr, float* out) {
  uint32_t r0, r1;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[threadIdx.x] = __uint_as_float(r0) + __uint_as_float(r1);
}
