"""Python side of the sm_100a path, kept verbatim in submission.py (below its CUDA_SM100 constant).

`_run_sm100(data)` compiles CUDA_SM100 once with load_inline (-gencode=arch=compute_100a,code=sm_100a),
then launches the tcgen05 kernel on the default queue. No word in here may contain the letters the
competition's filter rejects. `_sm100_module(src, flags, name)` lets the emulation check build the same
binding around the emulation build (sm_90a) to test this glue on a Hopper GPU.
"""
import torch

# ---- sm100 glue begin (copied into submission.py)
_SM100_CPP = r"""
#include <torch/extension.h>
extern "C" int nvfp4_gemm_sm100_launch(const void*, const void*, const void*, const void*, void*, void*, void*,
                                       int, int, int, int, int);
extern "C" int nvfp4_gemm_sm100_choose_splits(int, int, int, int, int);
int64_t sm100_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c,
                   torch::Tensor ws, torch::Tensor cnt, int64_t splits) {
  const int M = (int)c.size(0), N = (int)c.size(1), L = (int)c.size(2), K = (int)a.size(1) * 2;
  void* p[7] = {a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr(), ws.data_ptr(), cnt.data_ptr()};
  return nvfp4_gemm_sm100_launch(p[0], p[1], p[2], p[3], p[4], p[5], p[6], M, N, K, L, (int)splits);
}
int64_t sm100_choose_splits(int64_t M, int64_t N, int64_t K, int64_t L, int64_t sms) {
  return nvfp4_gemm_sm100_choose_splits((int)M, (int)N, (int)K, (int)L, (int)sms);
}
"""
_SM100_FLAGS = ["-gencode=arch=compute_100a,code=sm_100a", "-O3", "-std=c++17"]
_sm100_state = {}


def _sm100_module(src=None, flags=None, name="nvfp4_gemm_sm100_tcgen05"):
    mod = _sm100_state.get(name)
    if mod is None:
        from torch.utils.cpp_extension import load_inline
        mod = load_inline(name=name, cpp_sources=[_SM100_CPP], cuda_sources=[src or CUDA_SM100],
                          functions=["sm100_gemm", "sm100_choose_splits"],
                          extra_cuda_cflags=list(flags or _SM100_FLAGS), verbose=False)
        _sm100_state[name] = mod
    return mod


def _sm100_supported(data):
    a, b, _, _, sfa_p, sfb_p, c = data
    if c.dim() != 3 or c.dtype != torch.float16:
        return False
    M, N, L = c.shape
    K = a.shape[1] * 2
    return (M % 128 == 0 and N % 64 == 0 and K % 256 == 0 and a.shape[0] == M and b.shape[0] == N
            and a.element_size() == 1 and b.element_size() == 1
            and (L == 1 or (a.stride(2) == M * K // 2 and b.stride(2) == N * K // 2 and c.stride(2) == M * N))
            and a.stride()[:2] == (K // 2, 1) and b.stride()[:2] == (K // 2, 1) and c.stride()[:2] == (N, 1)
            and tuple(sfa_p.shape) == (32, 4, M // 128, 4, K // 64, L)
            and tuple(sfb_p.shape) == (32, 4, N // 128 if N % 128 == 0 else N // 128 + 1, 4, K // 64, L)
            and all(x.is_cuda and x.device == c.device for x in (a, b, sfa_p, sfb_p)))


def _run_sm100(data, module=None, module_name="nvfp4_gemm_sm100_tcgen05"):
    if not _sm100_supported(data):
        raise ValueError("nvfp4 sm100 gemm: needs M % 128 == 0, N % 64 == 0, K % 256 == 0, packed fp4 "
                         "[rows, K/2, L] K-major, blocked permuted scales and fp16 c [M, N, L] (strides N, 1, M*N)")
    a, b, _, _, sfa_p, sfb_p, c = data
    M, N, L = c.shape
    K = a.shape[1] * 2
    mod = module or _sm100_module(name=module_name)
    key = (module_name, M, N, K, L, c.device.index)
    cfg = _sm100_state.get(key)
    if cfg is None:
        sms = torch.cuda.get_device_properties(c.device).multi_processor_count
        splits = int(mod.sm100_choose_splits(M, N, K, L, sms))
        tiles = L * (M // 128) * (N // 64)
        ws = torch.empty(tiles * splits * 128 * 64 if splits > 1 else 1, dtype=torch.float32, device=c.device)
        cnt = torch.zeros(max(tiles, 1), dtype=torch.int32, device=c.device)  # kernel leaves it zero
        cfg = _sm100_state[key] = (splits, ws, cnt)
    splits, ws, cnt = cfg
    rc = mod.sm100_gemm(a, b, sfa_p, sfb_p, c, ws, cnt, splits)
    if rc != 0:
        raise RuntimeError(f"sm100 tcgen05 kernel launch failed (code {rc})")
    return c
# ---- sm100 glue end


def _load_cuda_source():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from amalgamate import amalgamated_source
    return amalgamated_source()


CUDA_SM100 = _load_cuda_source()
