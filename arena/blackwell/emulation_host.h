// Force-included (nvcc -include) into every CUDA source built under --emulate-blackwell.
// Device side: the emulation library's error record, defined in the user's module so that the host side of
// the same extension can read it. Host side: __nvfp4emu_read_state copies the record out and clears it;
// arena/blackwell/runtime.py calls it through ctypes after each call of the submission.
#pragma once
#include <cuda_runtime.h>

__device__ unsigned int __nvfp4emu_state[16];

extern "C" __attribute__((weak, visibility("default"))) int __nvfp4emu_read_state(unsigned int* out) {
  unsigned int zero[16] = {0};
  cudaError_t e = cudaMemcpyFromSymbol(out, __nvfp4emu_state, sizeof(zero));
  if (e != cudaSuccess) return (int)e;
  return (int)cudaMemcpyToSymbol(__nvfp4emu_state, zero, sizeof(zero));
}
