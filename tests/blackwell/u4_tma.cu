// A packed-FP4 tensor map (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B) as Blackwell kernels use it: the host encodes
// it in 4-bit elements, the kernel loads a box at an innermost coordinate counted in 4-bit elements, with
// sm_100's TMA spelling (.cta_group::1). Under --emulate-blackwell the map is encoded as UINT8 and the
// coordinate halved; the box must hold the same bytes as the source.
#include <cuda.h>
#include <torch/extension.h>

constexpr int BOX_ELEMENTS = 128, BOX_ROWS = 16, BOX_BYTES = BOX_ELEMENTS / 2 * BOX_ROWS;

__global__ void load_box(const __grid_constant__ CUtensorMap map, int c0, int c1, uint8_t* out) {
  __shared__ alignas(128) uint8_t tile[BOX_BYTES];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t dst = (uint32_t)__cvta_generic_to_shared(tile), mbar = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(mbar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(mbar), "r"(BOX_BYTES) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes.cta_group::1 "
                 "[%0], [%1, {%2, %3}], [%4];" :: "r"(dst), "l"(&map), "r"(c0), "r"(c1), "r"(mbar) : "memory");
    asm volatile("{\n .reg .pred done;\n wait:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
                 " @!done bra wait;\n}" :: "r"(mbar) : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < BOX_BYTES; i += blockDim.x) out[i] = tile[i];
}

// src: (rows, bytes) uint8 on the GPU, 2 FP4 per byte; out: BOX_BYTES uint8. c0 counts 4-bit elements.
void load(torch::Tensor src, int64_t c0, int64_t c1, torch::Tensor out) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)src.size(1) * 2, (cuuint64_t)src.size(0)};
  const cuuint64_t strides[1] = {(cuuint64_t)src.stride(0)};
  const cuuint32_t box[2] = {BOX_ELEMENTS, BOX_ROWS}, element_strides[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 2, src.data_ptr(), dims, strides, box,
                                      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled (16U4_ALIGN8B) failed: ", (int)r);
  load_box<<<1, 128>>>(map, (int)c0, (int)c1, out.data_ptr<uint8_t>());
}
