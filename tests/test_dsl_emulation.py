"""CuTe DSL and Triton under --emulate-blackwell, as far as a machine without a GPU can check
(arena/blackwell/cute_dsl.py, triton_target.py): each compiles our own kernel for sm_100 and the result that
would be loaded is an sm_90a cubin. Skipped without nvcc, nvidia-cutlass-dsl or triton."""
import os
import struct
import subprocess
import sys
import textwrap

import pytest

from arena.compile import find_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not found")
pytestmark = [needs_nvcc, pytest.mark.slow]      # each case builds the emulation library with nvcc


def _sm_of_cubin(blob: bytes) -> int:
    """The SM number in a CUDA ELF's e_flags (bits 8-15)."""
    assert blob[:4] == b"\x7fELF"
    return (struct.unpack("<I", blob[48:52])[0] >> 8) & 0xFF


def _run(script: str, tmp_path) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "tests", "blackwell"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_with_ptx_dump_replaces_the_users_path():
    from arena.blackwell.cute_dsl import with_ptx_dump
    pipeline = "builtin.module(cute-to-nvvm{cubin-format=bin dump-ptx-path='/x/y' cubin-chip=sm_100a})"
    assert with_ptx_dump(pipeline, "/t/kernel") == ("builtin.module(cute-to-nvvm{cubin-format=bin cubin-chip=sm_100a "
                                                    "dump-ptx-path='/t/kernel'})")


def test_cute_dsl_kernel_is_compiled_for_sm100a_and_embedded_as_sm90a(tmp_path):
    pytest.importorskip("cutlass.cute")
    out = _run("""
        import os, sys
        from arena.blackwell import cute_dsl, toolchain
        os.environ.update(toolchain.prepare())
        cute_dsl.install()
        from cutlass.base_dsl import compiler
        from cutlass._mlir import ir
        seen = []
        class Stop(Exception): pass
        def jit(self, module, *args, **kwargs):      # the JIT needs a GPU driver: stop there, read the module
            for op in module.body.operations:
                o = op.operation
                if o.name == "llvm.mlir.global" and "value" in o.attributes:
                    try:
                        blob = ir.StringAttr(o.attributes["value"]).value_bytes
                    except ValueError:
                        continue
                    if blob[:4] in (b"\\x7fELF", b"\\x50\\xed\\x55\\xba"):
                        seen.append(blob)
            raise Stop()
        compiler.Compiler.jit = jit
        import cute_dsl_tiny
        try:
            cute_dsl_tiny.compile_only()
        except Exception:
            pass
        print(os.environ["CUTE_DSL_ARCH"], len(seen), seen[0].hex() if seen else "")
    """, tmp_path)
    arch, count, blob = out.split()
    assert (arch, count) == ("sm_100a", "1")
    assert _sm_of_cubin(bytes.fromhex(blob)) == 90


def test_cute_dsl_nvfp4_gemm_lookalike_compiles_for_sm100a_and_the_rewriter_takes_its_tcgen05(tmp_path):
    """Our own CuTe DSL NVFP4 GEMM (tests/blackwell/cute_dsl_nvfp4_gemm.py: TMA, tcgen05.cp of the scale factors,
    tcgen05.mma .kind::mxf4nvf4, tcgen05.ld epilogue) through bench/emulation/dsl_precheck.py: compiled for
    sm_100a by the DSL, its PTX rewritten, an sm_90a cubin embedded."""
    pytest.importorskip("cutlass.cute")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "dsl_precheck.py"),
                           ".:" + os.path.join(ROOT, "tests", "blackwell", "cute_dsl_nvfp4_gemm.py")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compiles: sm_100a PTX rewritten, sm_90a cubin" in done.stdout, done.stdout


def test_triton_dot_scaled_kernel_is_compiled_for_cuda100_through_the_shim(tmp_path):
    pytest.importorskip("triton")
    out = _run("""
        import os, re
        from arena.blackwell import toolchain, triton_target
        os.environ.update(toolchain.prepare())
        triton_target.install()
        import triton
        from triton.backends.nvidia.driver import CudaDriver
        import triton_lookalike as T
        target = CudaDriver.get_current_target(None)
        sig = {"a_ptr": "*u8", "b_ptr": "*u8", "sfa_ptr": "*fp8e4nv", "sfb_ptr": "*fp8e4nv", "c_ptr": "*fp16"}
        for name in ("M N K sa_m sa_k sa_l sb_n sb_k sb_l ssa_m ssa_k ssa_l ssb_n ssb_k ssb_l sc_m sc_n sc_l").split():
            sig[name] = "i32"
        consts = dict(BM=128, BN=128, BK=128, VEC=16)
        sig.update({c: "constexpr" for c in consts})
        k = triton.compile(triton.compiler.ASTSource(fn=T._gemm, signature=sig, constexprs=consts), target=target)
        ptx = k.asm["ptx"]
        print(target.arch, re.search(r"\\.target (\\S+)", ptx).group(1),
              "tcgen05.mma" in ptx and "kind::mxf4nvf4" in ptx, k.asm["cubin"][:64].hex())
    """, tmp_path)
    arch, ptx_target, block_scaled, head = out.split()
    assert (arch, ptx_target, block_scaled) == ("100", "sm_100a", "True")
    assert _sm_of_cubin(bytes.fromhex(head)) == 90


def test_the_kept_cubins_of_a_pipeline_are_found_at_its_dump_path(tmp_path):
    """--keep-cubin writes `<dump-cubin-path>.<chip>.cubin`; the hook overwrites what it finds there."""
    from arena.blackwell.cute_dsl import kept_cubins
    (tmp_path / "k.sm_100a.cubin").write_bytes(b"\x7fELF")
    (tmp_path / "other.sm_100a.cubin").write_bytes(b"\x7fELF")
    pipeline = f"builtin.module(cute-to-nvvm{{cubin-chip=sm_100a dump-cubin-path='{tmp_path}/k'}})"
    assert kept_cubins(pipeline) == [str(tmp_path / "k.sm_100a.cubin")]
    assert kept_cubins("builtin.module(cute-to-nvvm{cubin-chip=sm_100a})") == []


def test_a_kept_cubin_is_the_emulations_sm90a_one(tmp_path):
    """cutlass.utils.HardwareInfo (the persistent GEMMs' occupancy query) compiles an empty kernel with
    --keep-cubin and loads `compiled.artifacts.CUBIN` itself: an sm_100a cubin there failed every case of four
    public persistent kernels with CUDA_ERROR_INVALID_HANDLE on a Hopper GPU."""
    pytest.importorskip("cutlass.cute")
    out = _run(f"""
        import glob, os
        from arena.blackwell import cute_dsl, toolchain
        os.environ.update(toolchain.prepare())
        cute_dsl.install()
        from cutlass.base_dsl import compiler
        class Stop(Exception): pass
        def jit(self, module, *args, **kwargs):      # the JIT needs a GPU driver: stop there
            raise Stop()
        compiler.Compiler.jit = jit
        import cutlass, cutlass.cute as cute, cute_dsl_tiny
        from cutlass.cute.runtime import make_ptr
        a = make_ptr(cutlass.Float32, 0, cute.AddressSpace.gmem, assumed_align=16)
        try:
            cute.compile(cute_dsl_tiny.double, a, a, cutlass.Int32(1), options="--keep-cubin --dump-dir={tmp_path}")
        except Exception:
            pass
        kept = glob.glob("{tmp_path}/*.cubin")
        print(len(kept), open(kept[0], "rb").read().hex() if kept else "")
    """, tmp_path)
    count, blob = out.split()
    assert count == "1"
    assert _sm_of_cubin(bytes.fromhex(blob)) == 90


def test_a_tvm_ffi_kernels_library_handle_is_within_the_jits_reach(tmp_path):
    """A CuTe DSL kernel compiled with --enable-tvm-ffi keeps its loaded library in a private global of its host
    module, which the JIT's raw_lookup cannot find (it looks up `_mlir_<name>` only). The compile hook adds an
    accessor: the JIT, built as the DSL builds it (its own runtime library; a stand-in libcuda.so.1 here, where no
    driver is), returns the global's address through it. Skipped without CuTe DSL, apache-tvm-ffi or a C compiler."""
    pytest.importorskip("cutlass.cute")
    pytest.importorskip("tvm_ffi")
    if find_tool("gcc") is None and find_tool("cc") is None:
        pytest.skip("no C compiler for the stand-in libcuda.so.1")
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "s.c").write_text("int nvfp4emu_stand_in(void) { return 0; }\n")
    subprocess.run([find_tool("gcc") or find_tool("cc"), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(stub / "libcuda.so.1"), str(stub / "s.c")], check=True)
    source = open(os.path.join(ROOT, "tests", "blackwell", "cute_dsl_nvfp4_gemm.py")).read()
    plain = "cute.compile(_gemm, *_pointers(), (0, 0, 0, 0))"
    (tmp_path / "tvm_ffi_gemm.py").write_text(source.replace(plain, plain[:-1] + ', options="--enable-tvm-ffi")'))
    os.environ["LD_LIBRARY_PATH"] = f"{stub}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}"
    try:
        out = _run(f"""
            import ctypes, os, sys
            sys.path.insert(0, {str(tmp_path)!r})
            from arena.blackwell import cute_dsl, toolchain
            os.environ.update(toolchain.prepare())
            cute_dsl.install()
            from cutlass.base_dsl import compiler
            from cutlass._mlir.execution_engine import ExecutionEngine
            class Stop(Exception): pass
            def jit(self, module, opt_level=2, shared_libs=()):
                engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=list(shared_libs))
                states = cute_dsl.library_state_symbols(module)
                direct = [engine.raw_lookup(s) for s in states]
                accessor = engine.raw_lookup("nvfp4emu_library_state_0")
                address = ctypes.CFUNCTYPE(ctypes.c_void_p)(accessor)() if accessor else 0
                with open({str(tmp_path / "seen.txt")!r}, "w") as seen:     # the DSL holds stdout while it compiles
                    seen.write(f"{{len(states)}} {{direct}} {{bool(accessor)}} {{bool(address)}} "
                               f"{{ctypes.c_uint64.from_address(address).value if address else -1}}")
                raise Stop()
            compiler.Compiler.jit = jit
            import tvm_ffi_gemm
            try:
                tvm_ffi_gemm.compile_only()
            except Exception as raised:
                if "Stop" not in repr(raised) and not isinstance(getattr(raised, "cause", None), Stop):
                    raise
        """, tmp_path)
    finally:
        os.environ["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"].split(os.pathsep, 1)[1]
    # one state global; not found directly; found through the accessor, holding no handle before any call
    seen = (tmp_path / "seen.txt").read_text() if (tmp_path / "seen.txt").exists() else out
    assert seen.split() == ["1", "[0]", "True", "True", "0"], seen


def test_the_same_ptx_is_assembled_once(tmp_path):
    """An autotuner compiles cutlass.utils.HardwareInfo's empty kernel once per configuration: the same PTX, read
    from another folder each time, goes through the ptxas shim once and gives the same cubin; the memo keeps only
    the newest (cubins with the library linked in are large)."""
    out = _run("""
        import os, subprocess
        from arena.blackwell import cute_dsl, toolchain
        os.environ.update(toolchain.prepare())
        ptx = ".version 8.7\\n.target sm_100a\\n.address_size 64\\n.visible .entry empty()\\n{\\n\\tret;\\n}\\n"
        calls = []
        real = subprocess.run
        def counted(*args, **kwargs):
            calls.append(args[0])
            return real(*args, **kwargs)
        cute_dsl.subprocess.run = counted
        blobs = []
        for folder, tail in (("a", b"\\0"), ("b", b""), ("c", b"")):
            os.makedirs(folder)
            with open(f"{folder}/kernel.sm_100a.ptx", "wb") as f:
                f.write(ptx.encode() + tail)
            blobs.append(cute_dsl.assemble_for_sm90a(f"{folder}/kernel.sm_100a.ptx")[0])
        with open("c/kernel.sm_100a.ptx", "w") as f:
            f.write(ptx.replace("empty", "other"))
        blobs.append(cute_dsl.assemble_for_sm90a("c/kernel.sm_100a.ptx")[0])
        first = len(calls)
        cute_dsl._ASSEMBLED_KEPT = 1            # the memo keeps the newest few: a third PTX pushes the first out
        with open("c/kernel.sm_100a.ptx", "w") as f:
            f.write(ptx.replace("empty", "third"))
        cute_dsl.assemble_for_sm90a("c/kernel.sm_100a.ptx")
        with open("c/kernel.sm_100a.ptx", "w") as f:
            f.write(ptx)
        again = cute_dsl.assemble_for_sm90a("c/kernel.sm_100a.ptx")[0]
        print(first, len(calls), blobs[0] == blobs[1] == blobs[2] == again, blobs[0] != blobs[3], blobs[0][:4].hex())
    """, tmp_path)
    assert out.split() == ["2", "4", "True", "True", "7f454c46"]
