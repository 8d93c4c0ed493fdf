"""Our own CUTLASS look-alike nvfp4_gemm submission: a CUTLASS 4.x SM100 block-scaled GEMM, instantiated through
CUTLASS's public C++ API the way its example 72a documents it (CollectiveBuilder with
OpClassBlockScaledTensorOp, nv_float4_t<float_e2m1_t> operands with UE4M3 scale factors per 16 elements), with the
1-SM schedule KernelTmaWarpSpecialized1SmNvf4Sm100: TMA loads, tcgen05.mma .kind::mxf4nvf4, tensor memory, and
the persistent tile scheduler driven by cluster launch control (CLC). Built for sm_100a only.

The competition's data map onto CUTLASS's arguments without a copy:
- a [M, K/2, L] and b [N, K/2, L] (packed fp4, K-major, batch stride M*K/2 and N*K/2 bytes): A row-major (M x K)
  and B column-major (K x N), cutlass::make_cute_packed_stride over (M, K, L) and (N, K, L).
- sfa_permuted / sfb_permuted: their storage is a contiguous (L, ceil(MN/128), ceil(K/64), 32, 4, 4) buffer, the
  cuBLAS "blocked" layout per batch. CUTLASS's Sm1xxBlkScaledConfig::tile_atom_to_shape_SF{A,B} is the same
  layout: its atom ((32, 4), (16, 4)) : ((16, 4), (0, 1)) puts scale (row 32*r4 + r32, column c) at byte
  16*r32 + 4*r4 + c of a 512-byte atom, and tile_to_shape(..., Step<_2,_1,_3>) orders the atoms K-blocks
  fastest, then 128-row blocks, then batches. So the permuted tensors' data pointers are passed as they are.
- c [M, N, L] fp16 (row-major per batch, batch stride M*N): D, with alpha = 1 and beta = 0 (C = D, never read).

Under --emulate-blackwell on a Hopper GPU every CTA of the grid runs (the CLC cancel never succeeds), so each
persistent CTA does its first tile only; the grid covers every tile.
"""
import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

CUDA_SRC = r"""
#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/detail/sm100_blockscaled_layout.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

using namespace cute;

namespace nvfp4_lookalike {

using ElementA = cutlass::nv_float4_t<cutlass::float_e2m1_t>;   // e2m1 data, ue4m3 scale per 16 elements
using ElementB = cutlass::nv_float4_t<cutlass::float_e2m1_t>;
using LayoutA = cutlass::layout::RowMajor;                       // M x K, K contiguous
using LayoutB = cutlass::layout::ColumnMajor;                    // K x N, K contiguous
constexpr int AlignA = 32;                                       // 16 bytes of fp4
constexpr int AlignB = 32;
using ElementC = cutlass::half_t;
using ElementD = cutlass::half_t;
using LayoutC = cutlass::layout::RowMajor;
constexpr int AlignC = 8;
constexpr int AlignD = 8;
using ElementAccumulator = float;

using MmaTile = Shape<_128, _128, _256>;                         // one SM: M = 128 per MMA
using Cluster = Shape<_1, _1, _1>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp,
    MmaTile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
    ElementAccumulator, ElementAccumulator,
    ElementC, LayoutC, AlignC,
    ElementD, LayoutC, AlignD,
    cutlass::epilogue::TmaWarpSpecialized1Sm>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp,
    ElementA, LayoutA, AlignA,
    ElementB, LayoutB, AlignB,
    ElementAccumulator, MmaTile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecialized1SmNvf4Sm100>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue, void>;   // default: CLC scheduler
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

}  // namespace nvfp4_lookalike

void cutlass_nvfp4_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c,
                        int64_t m, int64_t n, int64_t k, int64_t l, int64_t stream_handle) {
  using namespace nvfp4_lookalike;
  using Config = typename Gemm::GemmKernel::CollectiveMainloop::Sm1xxBlkScaledConfig;
  const int M = (int)m, N = (int)n, K = (int)k, L = (int)l;
  auto stride_a = cutlass::make_cute_packed_stride(typename Gemm::GemmKernel::StrideA{}, {M, K, L});
  auto stride_b = cutlass::make_cute_packed_stride(typename Gemm::GemmKernel::StrideB{}, {N, K, L});
  auto stride_c = cutlass::make_cute_packed_stride(typename Gemm::GemmKernel::StrideC{}, {M, N, L});
  auto stride_d = cutlass::make_cute_packed_stride(typename Gemm::GemmKernel::StrideD{}, {M, N, L});
  auto layout_sfa = Config::tile_atom_to_shape_SFA(cute::make_shape(M, N, K, L));
  auto layout_sfb = Config::tile_atom_to_shape_SFB(cute::make_shape(M, N, K, L));
  auto* d = reinterpret_cast<ElementD*>(c.data_ptr());
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {M, N, K, L},
      {reinterpret_cast<typename ElementA::DataType*>(a.data_ptr()), stride_a,
       reinterpret_cast<typename ElementB::DataType*>(b.data_ptr()), stride_b,
       reinterpret_cast<typename ElementA::ScaleFactorType*>(sfa.data_ptr()), layout_sfa,
       reinterpret_cast<typename ElementB::ScaleFactorType*>(sfb.data_ptr()), layout_sfb},
      {{1.0f, 0.0f}, d, stride_c, d, stride_d}};
  Gemm gemm;
  TORCH_CHECK(gemm.can_implement(args) == cutlass::Status::kSuccess, "CUTLASS cannot run this shape: ",
              M, "x", N, "x", K, "x", L);
  auto workspace = torch::empty({(int64_t)Gemm::get_workspace_size(args)},
                                torch::dtype(torch::kUInt8).device(a.device()));
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);   // torch's current stream
  TORCH_CHECK(gemm.initialize(args, workspace.data_ptr(), stream) == cutlass::Status::kSuccess,
              "CUTLASS initialize failed");
  TORCH_CHECK(gemm.run(stream) == cutlass::Status::kSuccess, "CUTLASS run failed");
}
"""

CPP_SRC = ("void cutlass_nvfp4_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, "
           "torch::Tensor c, int64_t m, int64_t n, int64_t k, int64_t l, int64_t stream_handle);")

# CUTLASS's CMake builds with --expt-relaxed-constexpr (load_inline adds it too); sm_100a only.
FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_100a,code=sm_100a",
         "-DNDEBUG"]

_module = None


def _load():
    global _module
    if _module is None:
        _module = load_inline(name="cutlass_sm100_nvfp4_lookalike", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                              functions=["cutlass_nvfp4_gemm"], extra_cuda_cflags=FLAGS, verbose=False)
    return _module


def custom_kernel(data: input_t) -> output_t:
    a, b, _, _, sfa_permuted, sfb_permuted, c = data
    m, n, l = c.shape
    k = a.shape[1] * 2
    # the permuted scale tensors are views of contiguous (L, rb, cb, 32, 4, 4) buffers: pass their storage
    _load().cutlass_nvfp4_gemm(a, b, sfa_permuted, sfb_permuted, c, m, n, k, l,
                                torch.cuda.current_stream().cuda_stream)
    return c
