// Translation unit for nvcc builds (sm_100a hardware path, or -DNVFP4_TCGEN05_EMULATION for sm_90a).
#include "nvfp4_gemm_sm100.cuh"
