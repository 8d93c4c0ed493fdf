// Cluster launch control (CLC) in the forms CUTLASS's SM100 persistent schedulers use, through inline asm: a
// persistent loop that asks for a not-yet-started cluster after each tile. Built for compute_100a to PTX by
// tests/test_blackwell_emulation.py, rewritten, and assembled for sm_90a; run by bench/emulation/clc_check.py
// (the `tiles` launcher below). A cancel succeeds while some cluster has not started, and that cluster never runs:
// every tile is done exactly once (tiles[i] == 1), by far fewer CTAs than the grid holds when one CTA fits an SM.
#include <cstdint>
#ifndef CLC_KERNELS_ONLY   // the CPU tests build the kernels alone
#include <torch/extension.h>
#endif

__device__ inline uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ inline void try_cancel(uint32_t response, uint32_t barrier, bool multicast) {
  if (multicast)
    asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
                 ".multicast::cluster::all.b128 [%0], [%1];" :: "r"(response), "r"(barrier) : "memory");
  else
    asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
                 :: "r"(response), "r"(barrier) : "memory");
}

__device__ inline void try_cancel_generic(void* response, uint64_t* barrier) {
  asm volatile("clusterlaunchcontrol.try_cancel.async.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "l"(response), "l"(barrier) : "memory");
}

// (is canceled, first ctaid x, y, z), as CUTLASS decodes a response.
__device__ inline uint4 query(uint32_t response) {
  uint4 out;
  asm volatile("{\n\t.reg .pred p1;\n\t.reg .b128 clc_result;\n\t"
               "ld.shared.b128 clc_result, [%4];\n\t"
               "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p1, clc_result;\n\t"
               "selp.u32 %3, 1, 0, p1;\n\t"
               "@p1 clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%0, %1, %2, _}, clc_result;\n\t"
               "}\n"
               : "=r"(out.y), "=r"(out.z), "=r"(out.w), "=r"(out.x) : "r"(response) : "memory");
  return out;
}

__device__ inline uint32_t first_ctaid_x(uint32_t response) {
  uint32_t x;
  asm volatile("{\n\t.reg .b128 r;\n\tld.shared.b128 r, [%1];\n\t"
               "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %0, r;\n\t}\n"
               : "=r"(x) : "r"(response) : "memory");
  return x;
}

__device__ inline void expect(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(barrier), "r"(bytes) : "memory");
}

__device__ inline void wait(uint32_t barrier, uint32_t phase) {
  asm volatile("{\n\t.reg .pred done;\n\tWAIT_%=:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t@!done bra WAIT_%=;\n\t}\n"
               :: "r"(barrier), "r"(phase) : "memory");
}

// One thread per CTA; launched with a cluster of `multicast ? 2 : 1` CTAs along x. started[0] counts the CTAs that
// ran, started[1] holds the highest blockIdx.x among them.
extern "C" __global__ void clc_tiles(uint32_t* tiles, int multicast, uint32_t* started) {
  __shared__ alignas(16) uint4 response;
  __shared__ alignas(8) uint64_t barrier;
  atomicAdd(&started[0], 1u);
  atomicMax(&started[1], blockIdx.x);
  uint32_t r = smem(&response), b = smem(&barrier);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
  asm volatile("barrier.cluster.arrive.release; barrier.cluster.wait.acquire;" ::: "memory");
  uint32_t tile = blockIdx.x, phase = 0, rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  for (;;) {
    atomicAdd(&tiles[tile], 1u);
    expect(b, 16);
    if (!multicast || rank == 0) try_cancel(r, b, multicast);
    wait(b, phase);
    phase ^= 1;
    uint4 answer = query(r);
    // the next try_cancel rewrites every CTA's response: the cluster's CTAs have all read this one first
    if (multicast) asm volatile("barrier.cluster.arrive.release; barrier.cluster.wait.acquire;" ::: "memory");
    if (!answer.x) break;
    tile = answer.y + rank;
  }
  asm volatile("barrier.cluster.arrive.release; barrier.cluster.wait.acquire;" ::: "memory");
}

// The generic-address form and the single-coordinate query, assembled only.
extern "C" __global__ void clc_generic(uint32_t* out) {
  __shared__ alignas(16) uint4 response;
  __shared__ alignas(8) uint64_t barrier;
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&barrier)));
  expect(smem(&barrier), 16);
  try_cancel_generic(&response, &barrier);
  wait(smem(&barrier), 0);
  out[blockIdx.x] = first_ctaid_x(smem(&response));
}

#ifndef CLC_KERNELS_ONLY
// `ctas` CTAs in clusters of 1 (2 with multicast), each with 200 KB of dynamic shared memory: one CTA per SM.
void tiles(torch::Tensor tiles, torch::Tensor started, int64_t ctas, int64_t multicast) {
  const int shared = 200 * 1024;
  cudaFuncSetAttribute(clc_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)ctas);
  config.blockDim = dim3(1);
  config.dynamicSmemBytes = shared;
  cudaLaunchAttribute cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = multicast ? 2 : 1;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  TORCH_CHECK(cudaLaunchKernelEx(&config, clc_tiles, (uint32_t*)tiles.data_ptr<int32_t>(), (int)multicast,
                                 (uint32_t*)started.data_ptr<int32_t>()) == cudaSuccess, "launch failed");
}
#endif
