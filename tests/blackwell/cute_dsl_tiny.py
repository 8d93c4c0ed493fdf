"""Our own smallest CuTe DSL program (no tcgen05): c = 2 * a over float32, one element per thread. The CPU
tests compile it through arena/blackwell/cute_dsl.py to check the hook itself: sm_100a PTX from the DSL, an
sm_90a cubin in the compiled module."""
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_ptr

THREADS = 128


@cute.kernel
def _double(a: cute.Tensor, c: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        c[i] = a[i] * cutlass.Float32(2.0)


@cute.jit
def double(a_ptr: cute.Pointer, c_ptr: cute.Pointer, n: cutlass.Int32):
    a = cute.make_tensor(a_ptr, cute.make_layout(n))
    c = cute.make_tensor(c_ptr, cute.make_layout(n))
    _double(a, c, n).launch(grid=[(n + THREADS - 1) // THREADS, 1, 1], block=[THREADS, 1, 1])


def compile_only():
    """Compile with placeholder addresses (no GPU needed up to the JIT)."""
    a = make_ptr(cutlass.Float32, 0, cute.AddressSpace.gmem, assumed_align=16)
    c = make_ptr(cutlass.Float32, 0, cute.AddressSpace.gmem, assumed_align=16)
    return cute.compile(double, a, c, cutlass.Int32(1))
