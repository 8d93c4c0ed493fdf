// Does the width of a TMA box change how fast a K-major fp4 operand streams in? Reads a [rows x row_bytes]
// byte matrix (an NVFP4 B operand) once, every CTA of a 132-CTA grid taking an equal run of (128-row tile,
// k-chunk) pieces through a ring of mbarrier-tracked stages, nothing computed. Boxes 64 B wide (128 k, the
// shipped kernel's stage) or 128 B wide (256 k), same bytes in flight. Cold L2 before every run (a 128 MB
// memset), CUDA events, median of 15. Build and run: nvcc -O3 -arch=sm_90a tma_box_width.cu -o t && ./t
#include <stdio.h>

#include "micro_common.cuh"

// stage = 128 rows x box_bytes; iterations = tiles * (row_bytes / box_bytes)
__global__ void __launch_bounds__(160, 1) stream_kernel(const __grid_constant__ CUtensorMap map, int tiles, int chunks,
                                                        int stages, int box_bytes, unsigned long long* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* base = smem + ((1024 - (su(smem) & 1023)) & 1023);
  uint64_t* full = (uint64_t*)(base + stages * 128 * box_bytes);
  uint64_t* empty = full + stages;
  const long long total = (long long)tiles * chunks;
  const long long b0 = blockIdx.x * total / gridDim.x, b1 = (blockIdx.x + 1) * total / gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 4;" :: "r"(su(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 4) {
    if (lane == 0) {
      for (long long it = b0; it < b1; ++it) {
        const int j = (int)(it - b0), s = j % stages;
        mbar_wait(su(&empty[s]), ((j / stages) & 1) ^ 1);
        const int tile = (int)(it / chunks), ch = (int)(it % chunks);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su(&full[s])), "r"(128 * box_bytes));
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                     :: "r"(su(base + s * 128 * box_bytes)), "l"((uint64_t)&map), "r"(su(&full[s])), "r"(ch * box_bytes),
                        "r"(tile * 128) : "memory");
      }
    }
  } else {
    unsigned long long acc = 0;
    for (long long it = b0; it < b1; ++it) {
      const int j = (int)(it - b0), s = j % stages;
      mbar_wait(su(&full[s]), (j / stages) & 1);
      acc += *(volatile uint32_t*)(base + s * 128 * box_bytes + threadIdx.x * 4);   // touch the stage
      __syncwarp();
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(su(&empty[s])) : "memory");
    }
    if (acc == 0x123456789ull) *sink = acc;
  }
}

int main() {
  const EncodeTiled enc = encode_tiled();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  void* flush;
  cudaMalloc(&flush, 128 << 20);
  unsigned long long* sink;
  cudaMalloc(&sink, 8);
  struct Shape { int rows, row_bytes; const char* name; } shapes[] = {
      {7168, 8192, "B of 128x7168x16384"}, {4096, 3584, "B of 128x4096x7168"}, {7168, 1024, "B of 128x7168x2048"}};
  struct Var { int box, stages, swz; } vars[] = {{64, 4, 0}, {64, 8, 0}, {128, 4, 0}, {128, 4, 1}, {128, 2, 1}};
  printf("%-22s %-28s %9s %9s\n", "operand", "box / stages / swizzle", "us", "GB/s");
  for (auto& sh : shapes) {
    void* buf;
    cudaMalloc(&buf, (size_t)sh.rows * sh.row_bytes);
    cudaMemset(buf, 1, (size_t)sh.rows * sh.row_bytes);
    for (auto& v : vars) {
      CUtensorMap map;
      cuuint64_t dims[2] = {(cuuint64_t)sh.row_bytes, (cuuint64_t)sh.rows}, str[1] = {(cuuint64_t)sh.row_bytes};
      cuuint32_t box[2] = {(cuuint32_t)v.box, 128}, es[2] = {1, 1};
      CUresult r = enc(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, buf, dims, str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       v.swz ? (v.box == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B) : CU_TENSOR_MAP_SWIZZLE_NONE,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); continue; }
      const int smem = v.stages * 128 * v.box + 1024 + 256;
      cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      const float us = median_us(16, [&](int rep) { cudaMemsetAsync(flush, rep, 128 << 20); }, [&] {
        stream_kernel<<<sms, 160, smem>>>(map, sh.rows / 128, sh.row_bytes / v.box, v.stages, v.box, sink);
      });
      cudaError_t err = cudaGetLastError();
      char what[64];
      snprintf(what, sizeof what, "%d B x 128 rows / %d / %s", v.box, v.stages, v.swz ? "yes" : "no");
      printf("%-22s %-28s %9.1f %9.0f %s\n", sh.name, what, us, (double)sh.rows * sh.row_bytes / us / 1e3,
             err == cudaSuccess ? "" : cudaGetErrorString(err));
    }
    cudaFree(buf);
  }
  return 0;
}
