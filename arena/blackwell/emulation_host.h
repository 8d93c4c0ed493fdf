// Force-included (nvcc -include) into every CUDA source built under --emulate-blackwell.
// - Device side: the emulation library's error record, defined in the user's module so that the host side
//   of the same extension can read it; __nvfp4emu_read_state copies it out and clears it (called by
//   arena/blackwell/runtime.py through ctypes after each call of the submission).
// - Host side: tensor maps of packed FP4 (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B) cannot be encoded on a
//   Hopper GPU (the driver returns CUDA_ERROR_INVALID_VALUE). The same bytes as UINT8, with the inner
//   dimension and box halved, can: strides are in bytes either way and the swizzle acts on 16-byte chunks.
//   cuTensorMapEncodeTiled, and the entry points handed out for it, take that detour. The kernel still gives
//   the innermost coordinate in 4-bit elements: each such map's bytes are registered in __nvfp4emu_state, and
//   the rewritten TMA instructions halve that coordinate for a registered map (__nvfp4emu_tma_coord).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <string.h>

// Words 0-15: the error record. Word 16: how many packed-FP4 maps are registered; word 17: the synchronous mode;
// words 18-31: the work counts of a call; from word 32, 64 of them
// (32 words each, the CUtensorMap's bytes). Sizes shared with tcgen05_library.cu and ptx_rewrite.py.
#define NVFP4EMU_STATE_WORDS (32 + 64 * 32)
__device__ unsigned int __nvfp4emu_state[NVFP4EMU_STATE_WORDS];

extern "C" __attribute__((weak, visibility("default"))) int __nvfp4emu_read_state(unsigned int* out) {
  unsigned int zero[16] = {0};
  cudaError_t e = cudaMemcpyFromSymbol(out, __nvfp4emu_state, sizeof(zero));
  if (e != cudaSuccess) return (int)e;
  return (int)cudaMemcpyToSymbol(__nvfp4emu_state, zero, sizeof(zero));
}

// Words 18-31: the work counts of the last call (tcgen05_library.cu, EMU_COUNT_*), for the B200 time model; copied
// out and cleared.
extern "C" __attribute__((weak, visibility("default"))) int __nvfp4emu_read_counts(unsigned int* out) {
  unsigned int zero[14] = {0};
  cudaError_t e = cudaMemcpyFromSymbol(out, __nvfp4emu_state, sizeof(zero), 18 * sizeof(unsigned int));
  if (e != cudaSuccess) return (int)e;
  return (int)cudaMemcpyToSymbol(__nvfp4emu_state, zero, sizeof(zero), 18 * sizeof(unsigned int));
}

// Word 17 = 1: the library completes each tcgen05 operation at issue (the synchronous model), for comparison.
extern "C" __attribute__((weak, visibility("default"))) int __nvfp4emu_set_synchronous(unsigned int on) {
  return (int)cudaMemcpyToSymbol(__nvfp4emu_state, &on, sizeof(on), 17 * sizeof(unsigned int));
}

typedef CUresult (*__nvfp4emu_encode_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                         const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                         CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);

static inline __nvfp4emu_encode_fn __nvfp4emu_real_encode() {
  static __nvfp4emu_encode_fn fn = 0;
  if (!fn) {
    void* p = 0;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      fn = (__nvfp4emu_encode_fn)p;
  }
  return fn;
}

// Remember a re-encoded map on the device (a ring of 64; the same bytes are registered once).
static void __nvfp4emu_register_u4_map(const CUtensorMap* map) {
  static unsigned int known[64][32];
  static unsigned int count = 0;
  for (unsigned int i = 0; i < (count < 64 ? count : 64); ++i)
    if (memcmp(known[i], map, 128) == 0) return;
  const unsigned int slot = count % 64;
  memcpy(known[slot], map, 128);
  ++count;
  const unsigned int registered = count < 64 ? count : 64;
  cudaMemcpyToSymbol(__nvfp4emu_state, known[slot], 128, (32 + 32 * slot) * sizeof(unsigned int));
  cudaMemcpyToSymbol(__nvfp4emu_state, &registered, sizeof(registered), 16 * sizeof(unsigned int));
}

static CUresult __nvfp4emu_encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                        const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                        const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                                        CUtensorMapFloatOOBfill fill) {
  __nvfp4emu_encode_fn real = __nvfp4emu_real_encode();
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && rank >= 1 && rank <= 5 && dims[0] % 2 == 0 &&
      box[0] % 2 == 0 && element_strides[0] == 1) {
    cuuint64_t bytes_dims[5];
    cuuint32_t bytes_box[5];
    for (cuuint32_t i = 0; i < rank; ++i) { bytes_dims[i] = dims[i]; bytes_box[i] = box[i]; }
    bytes_dims[0] /= 2;
    bytes_box[0] /= 2;
    CUresult r = real(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, rank, address, bytes_dims, strides, bytes_box,
                      element_strides, interleave, swizzle, promotion, fill);
    if (r == CUDA_SUCCESS) __nvfp4emu_register_u4_map(map);
    return r;
  }
  return real(map, type, rank, address, dims, strides, box, element_strides, interleave, swizzle, promotion, fill);
}

// The entry points hand out the detour for cuTensorMapEncodeTiled. CUTLASS 4.x looks its driver functions up by
// a name stringified after macro expansion (CUTLASS_CUDA_DRIVER_WRAPPER_DECL), so under the #define below it asks
// for "__nvfp4emu_encode_tiled": that name means cuTensorMapEncodeTiled too.
static inline cudaError_t __nvfp4emu_entry_point_by_version(const char* symbol, void** fn, unsigned int version,
                                                            unsigned long long flags,
                                                            cudaDriverEntryPointQueryResult* status = 0) {
  const bool encode = strcmp(symbol, "cuTensorMapEncodeTiled") == 0 || strcmp(symbol, "__nvfp4emu_encode_tiled") == 0;
  cudaDriverEntryPointQueryResult found;
  cudaError_t e = cudaGetDriverEntryPointByVersion(encode ? "cuTensorMapEncodeTiled" : symbol, fn, version, flags, &found);
  if (status) *status = found;
  if (e == cudaSuccess && found == cudaDriverEntryPointSuccess && encode) *fn = (void*)&__nvfp4emu_encode_tiled;
  return e;
}

static inline cudaError_t __nvfp4emu_entry_point(const char* symbol, void** fn, unsigned long long flags,
                                                 cudaDriverEntryPointQueryResult* status = 0) {
  return __nvfp4emu_entry_point_by_version(symbol, fn, 12000, flags, status);
}

#undef cudaGetDriverEntryPoint
#undef cudaGetDriverEntryPointByVersion
#define cuTensorMapEncodeTiled __nvfp4emu_encode_tiled
#define cudaGetDriverEntryPoint __nvfp4emu_entry_point
#define cudaGetDriverEntryPointByVersion __nvfp4emu_entry_point_by_version
