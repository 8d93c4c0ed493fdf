"""Our own Triton NVFP4 GEMM for the nvfp4_gemm task (CI look-alike of a Triton submission): `tl.dot_scaled`
of e2m1 operands with their e4m3 scales, one 128x128 tile of C per program, K in steps of 128. Written for
sm_100 (tcgen05 block-scaled MMA); under `--emulate-blackwell` it is compiled for cuda:100 and its tcgen05
instructions are emulated."""
import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 128
SCALE_BLOCK = 16        # NVFP4: one e4m3 scale per 16 elements along K


@triton.jit
def _gemm(a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr, M, N, K,
          sa_m, sa_k, sa_l, sb_n, sb_k, sb_l, ssa_m, ssa_k, ssa_l, ssb_n, ssb_k, ssb_l, sc_m, sc_n, sc_l,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, VEC: tl.constexpr):
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    rows_in, cols_in = tl.minimum(rows, M - 1), tl.minimum(cols, N - 1)     # scale rows past the edge: the last
    half = tl.arange(0, BK // 2)            # packed bytes: two e2m1 values each, the first in the low nibble
    groups = tl.arange(0, BK // VEC)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + batch * sa_l + rows[:, None] * sa_m + (k0 // 2 + half)[None, :] * sa_k,
                    mask=rows[:, None] < M, other=0)
        b = tl.load(b_ptr + batch * sb_l + cols[None, :] * sb_n + (k0 // 2 + half)[:, None] * sb_k,
                    mask=cols[None, :] < N, other=0)
        sa = tl.load(sfa_ptr + batch * ssa_l + rows_in[:, None] * ssa_m + (k0 // VEC + groups)[None, :] * ssa_k)
        sb = tl.load(sfb_ptr + batch * ssb_l + cols_in[:, None] * ssb_n + (k0 // VEC + groups)[None, :] * ssb_k)
        acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc)
    c = acc.to(tl.float16)
    tl.store(c_ptr + batch * sc_l + rows[:, None] * sc_m + cols[None, :] * sc_n, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def launch(a, b, sfa, sfb, c):
    """a (M, K/2, L) and b (N, K/2, L) as uint8, sfa/sfb (., K/16, L) as float8_e4m3fn, c (M, N, L) fp16."""
    m, n, l = c.shape
    k = a.shape[1] * 2
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N), l)
    _gemm[grid](a, b, sfa, sfb, c, m, n, k, *a.stride(), *b.stride(), *sfa.stride(), *sfb.stride(), *c.stride(),
                BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, VEC=SCALE_BLOCK)
    return c


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    return launch(a.view(torch.uint8), b.view(torch.uint8), sfa, sfb, c)
