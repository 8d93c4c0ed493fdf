// FP4 (e2m1) conversions through cuda_fp4.h: built for compute_100a, the header uses the sm_100 instructions
// cvt.rn.satfinite.e2m1x2.f32 and cvt.rn.f16x2.e2m1x2; on the host it uses NVIDIA's software conversion.
// Under --emulate-blackwell the device results must equal the host's bit for bit.
#include <cuda_fp4.h>
#include <cuda_fp16.h>
#include <torch/extension.h>

__host__ __device__ inline void convert_one(const float* x, int i, int16_t* to_fp4, int32_t* from_fp4) {
  float2 pair = make_float2(x[2 * i], x[2 * i + 1]);
  to_fp4[i] = (int16_t)__nv_cvt_float2_to_fp4x2(pair, __NV_E2M1, cudaRoundNearest);
  if (i < 256) {
    __half2_raw h = __nv_cvt_fp4x2_to_halfraw2((__nv_fp4x2_storage_t)i, __NV_E2M1);
    from_fp4[i] = (int32_t)((uint32_t)h.x | ((uint32_t)h.y << 16));
  }
}

__global__ void convert_kernel(const float* x, int n, int16_t* to_fp4, int32_t* from_fp4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) convert_one(x, i, to_fp4, from_fp4);
}

// x: 2n floats (n >= 256); to_fp4: n int16; from_fp4: 256 int32. All on the device, or all on the host.
void convert(torch::Tensor x, torch::Tensor to_fp4, torch::Tensor from_fp4) {
  int n = (int)(x.numel() / 2);
  if (x.is_cuda()) {
    convert_kernel<<<(n + 127) / 128, 128>>>(x.data_ptr<float>(), n, to_fp4.data_ptr<int16_t>(), from_fp4.data_ptr<int32_t>());
  } else {
    for (int i = 0; i < n; ++i) convert_one(x.data_ptr<float>(), i, to_fp4.data_ptr<int16_t>(), from_fp4.data_ptr<int32_t>());
  }
}
