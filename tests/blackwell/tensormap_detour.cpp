// Host-only check of emulation_host.h's tensor-map detour (tests/test_tcgen05_isa_rules.py), built with the
// host compiler and a stand-in for the CUDA runtime: the stand-in hands out a recording encoder for
// "cuTensorMapEncodeTiled" and nothing for any other name, as the driver does.
// Each line printed: "<caller> rc=<CUresult> type=<data type the encoder got> dim0=<> box0=<>" for a packed-FP4
// map (16U4_ALIGN8B, dim0 256, box0 128), and for CUTLASS's lookup also a FLOAT16 map with the same numbers.
// Callers: the direct call, the runtime's entry point by name, and the lookup of CUTLASS 4.x's
// CUTLASS_CUDA_DRIVER_WRAPPER_DECL (cutlass/cuda_host_adapter.hpp), whose name string is stringified
// after macro expansion; with WITH_CUTLASS the real header is included, else a copy of its two macros' shape.
#include <cstdio>
#include <cstring>
#ifdef WITH_CUTLASS
#include <cutlass/cuda_host_adapter.hpp>
#define CUTLASS_STYLE_ENCODE cutlass::call_cuTensorMapEncodeTiled
#else
#define STRINGIFY_AS_CUTLASS(tok) #tok
#define WRAPPER_AS_CUTLASS(func, ver)                                                                     \
  template <typename... Args> CUresult call_##func(Args... args) {                                        \
    cudaDriverEntryPointQueryResult status;                                                               \
    void* pfn = nullptr;                                                                                  \
    cudaError_t err = cudaGetDriverEntryPointByVersion(STRINGIFY_AS_CUTLASS(func), &pfn, ver,             \
                                                       cudaEnableDefault, &status);                       \
    if (status != cudaDriverEntryPointSuccess || err != cudaSuccess) return CUDA_ERROR_UNKNOWN;            \
    return reinterpret_cast<CUresult (*)(Args...)>(pfn)(args...);                                         \
  }
WRAPPER_AS_CUTLASS(cuTensorMapEncodeTiled, 12000)
#define CUTLASS_STYLE_ENCODE call_cuTensorMapEncodeTiled
#endif

// The stand-in runtime (the names emulation_host.h redirects are restored for these definitions).
#pragma push_macro("cudaGetDriverEntryPointByVersion")
#undef cudaGetDriverEntryPointByVersion
static CUresult recording_encoder(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t, void*, const cuuint64_t* dims,
                                  const cuuint64_t*, const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  memset(map, 0, sizeof(*map));
  map->opaque[0] = type;
  map->opaque[1] = dims[0];
  map->opaque[2] = box[0];
  return CUDA_SUCCESS;
}
extern "C" cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                                        cudaDriverEntryPointQueryResult* status) {
  const bool known = strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
  *fn = known ? (void*)&recording_encoder : nullptr;
  if (status) *status = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpyToSymbol(const void*, const void*, size_t, size_t, cudaMemcpyKind) { return cudaSuccess; }
extern "C" cudaError_t cudaMemcpyFromSymbol(void*, const void*, size_t, size_t, cudaMemcpyKind) { return cudaSuccess; }
#pragma pop_macro("cudaGetDriverEntryPointByVersion")

template <typename Encode>
static void report(const char* caller, Encode encode, CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {256, 64}, strides[1] = {128};
  const cuuint32_t box[2] = {128, 32}, element_strides[2] = {1, 1};
  const CUresult rc = encode(&map, type, 2, (void*)0x1000, dims, strides, box,
                             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) memset(&map, 0, sizeof(map));
  printf("%s rc=%d type=%llu dim0=%llu box0=%llu\n", caller, (int)rc, map.opaque[0], map.opaque[1], map.opaque[2]);
}

int main() {
  report("direct", [](auto... a) { return cuTensorMapEncodeTiled(a...); });
  report("entry_point", [](auto... a) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status);
    return reinterpret_cast<decltype(&recording_encoder)>(fn)(a...);
  });
  report("cutlass_wrapper", [](auto... a) { return CUTLASS_STYLE_ENCODE(a...); });
  report("cutlass_wrapper_f16", [](auto... a) { return CUTLASS_STYLE_ENCODE(a...); }, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  return 0;
}
