// UE8M0 (power-of-two scale factor) conversions through cuda_fp8.h: built for compute_100a, the header uses the
// sm_100 instructions cvt.{rz,rp}{.satfinite}.ue8m0x2.f32 (the .rp.satfinite form is what CUTLASS's SM100
// epilogues emit), cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2 and cvt.rn.bf16x2.ue8m0x2; on the host it uses NVIDIA's
// software conversion. Under --emulate-blackwell the device results must equal the host's bit for bit.
#include <cuda_fp8.h>
#include <torch/extension.h>

// mode: bit 0 round up (.rp, else .rz), bit 1 .satfinite
__host__ __device__ inline uint16_t ue8m0_of_f32(float2 x, int mode) {
  return __nv_cvt_float2_to_e8m0x2(x, (mode & 2) ? __NV_SATFINITE : __NV_NOSAT,
                                   (mode & 1) ? cudaRoundPosInf : cudaRoundZero);
}

__host__ __device__ inline uint16_t ue8m0_of_bf16x2(uint32_t pair, int mode) {
  __nv_bfloat162_raw r;
  r.x = (unsigned short)pair;
  r.y = (unsigned short)(pair >> 16);
  return __nv_cvt_bfloat162raw_to_e8m0x2(r, (mode & 2) ? __NV_SATFINITE : __NV_NOSAT,
                                         (mode & 1) ? cudaRoundPosInf : cudaRoundZero);
}

__host__ __device__ inline uint32_t bf16x2_of_ue8m0x2(uint32_t pair) {
  __nv_bfloat162_raw r = __nv_cvt_e8m0x2_to_bf162raw((__nv_fp8x2_storage_t)pair);
  return (uint32_t)r.x | (uint32_t)r.y << 16;
}

// element i of n: f32 pair i (x[2i] to the low byte) and bf16x2 word i, in all four modes; ue8m0x2 word i -> bf16x2
__host__ __device__ inline void convert_one(const float* x, const int32_t* words, int i, int16_t* from_f32,
                                            int16_t* from_bf16, int32_t* to_bf16) {
  for (int mode = 0; mode < 4; ++mode) {
    from_f32[4 * i + mode] = (int16_t)ue8m0_of_f32(make_float2(x[2 * i], x[2 * i + 1]), mode);
    from_bf16[4 * i + mode] = (int16_t)ue8m0_of_bf16x2((uint32_t)words[i], mode);
  }
  to_bf16[i] = (int32_t)bf16x2_of_ue8m0x2((uint32_t)words[i] & 0xFFFFu);
}

__global__ void convert_kernel(const float* x, const int32_t* words, int n, int16_t* from_f32, int16_t* from_bf16,
                               int32_t* to_bf16) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) convert_one(x, words, i, from_f32, from_bf16, to_bf16);
}

// x: 2n floats; words: n int32; from_f32, from_bf16: 4n int16; to_bf16: n int32. All on the device, or all on the host.
void convert(torch::Tensor x, torch::Tensor words, torch::Tensor from_f32, torch::Tensor from_bf16, torch::Tensor to_bf16) {
  int n = (int)words.numel();
  if (x.is_cuda()) {
    convert_kernel<<<(n + 127) / 128, 128>>>(x.data_ptr<float>(), words.data_ptr<int32_t>(), n,
                                             from_f32.data_ptr<int16_t>(), from_bf16.data_ptr<int16_t>(),
                                             to_bf16.data_ptr<int32_t>());
  } else {
    for (int i = 0; i < n; ++i)
      convert_one(x.data_ptr<float>(), words.data_ptr<int32_t>(), i, from_f32.data_ptr<int16_t>(),
                  from_bf16.data_ptr<int16_t>(), to_bf16.data_ptr<int32_t>());
  }
}
