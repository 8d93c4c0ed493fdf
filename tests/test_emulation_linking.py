"""--emulate-blackwell's build links each module with the emulation library's cubin (assembled once per register
cap) instead of reassembling the library with every module.

- register_cap: the least any kernel of the module allows, as ptxas allots registers, rounded down to a cap the
  library is assembled for (nvlink refuses library code above a kernel's limit).
- The linked module declares the library's globals and functions `.extern` and makes its state array `.visible`.
- Real nvcc, ptxas and nvlink (slow): a 1024-thread kernel that calls the library builds and reports the
  registers as linked; a build that asks for relocatable code (`-rdc`) still gets the library merged.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from arena.blackwell import ptx_rewrite, toolchain
from arena.blackwell.ptx_rewrite import REGISTER_CAPS, register_cap, rewrite
from arena.compile import find_tool

NVCC = find_tool("nvcc")


def _module(directives: str = "", body: str = "ret;") -> str:
    return (".version 8.7\n.target sm_100a\n.address_size 64\n"
            f".visible .entry k(.param .u64 p)\n{directives}\n{{\n.reg .b32 %r<4>;\n{body}\n}}\n")


@pytest.mark.parametrize("directives, args, cap", [
    ("", [], 255),                                   # no bounds: as many as a thread may hold
    (".maxntid 128, 1, 1", [], 255),                 # 65536 / 128 = 512, above 255
    (".maxntid 384, 1, 1", [], 168),                 # 170, in whole multiples of 8
    (".maxntid 1024, 1, 1", [], 64),
    (".reqntid 32, 16, 2", [], 64),                  # the product of the three
    (".maxntid 256, 1, 1\n.minnctapersm 2", [], 128),
    (".maxntid 100, 1, 1", [], 255),                 # rounded up to whole warps: 128 threads
    (".maxnreg 100", [], 96),
    ("", ["-maxrregcount", "72"], 64),
    ("", ["--maxrregcount=40"], 32),
])
def test_the_register_cap_is_the_least_a_kernel_allows(directives, args, cap):
    assert register_cap(_module(directives), args) == cap
    assert cap in REGISTER_CAPS


def test_the_least_cap_over_every_kernel_of_the_module_wins():
    two = _module(".maxntid 128, 1, 1") + _module(".maxntid 512, 1, 1").split(".address_size 64\n", 1)[1]
    assert register_cap(two) == 128


LIBRARY = """.version 9.0
.target sm_90a
.address_size 64
.extern .global .align 4 .b8 __nvfp4emu_state[];
.visible .global .align 8 .b8 __nvfp4emu_queue[4096];
.visible .global .align 4 .u32 __nvfp4emu_tmap_count;
.func helper()
{
ret;
}
.visible .func  (.param .b32 func_retval0) __nvfp4emu_one(
\t.param .b32 __nvfp4emu_one_param_0
)
{
ret;
}
.visible .func __nvfp4emu_two(
\t.param .b64 __nvfp4emu_two_param_0
)
{
ret;
}
"""


def test_a_linked_module_declares_the_library_and_exports_its_state():
    module = _module(body="tcgen05.fence::before_thread_sync;\nret;").replace(
        ".address_size 64\n", ".address_size 64\n.global .align 4 .b8 __nvfp4emu_state[8320];\n")
    linked, _ = rewrite(module, LIBRARY, linked=True)
    code = ptx_rewrite.strip_comments(linked)
    assert re.search(r"^\.visible \.global \.align 4 \.b8 __nvfp4emu_state\[8320\];", code, re.M)
    assert code.count("__nvfp4emu_state[") == 1                 # moved, not copied
    assert ".extern .global .align 8 .b8 __nvfp4emu_queue[];" in code
    assert ".extern .global .align 4 .u32 __nvfp4emu_tmap_count;" in code
    assert re.search(r"\.extern \.func\s+\(\.param \.b32 func_retval0\) __nvfp4emu_one\(\s*\.param \.b32 "
                     r"__nvfp4emu_one_param_0\s*\);", code)
    assert re.search(r"\.extern \.func __nvfp4emu_two\(\s*\.param \.b64 __nvfp4emu_two_param_0\s*\);", code)
    assert "helper" not in code and "ret;\n}\n.visible .func" not in code    # no library body, no private function
    merged, _ = rewrite(module, LIBRARY)
    assert "__nvfp4emu_two(" in merged and ".extern .func" not in merged


def test_a_module_without_the_state_array_gets_a_visible_one():
    linked, _ = rewrite(_module(), LIBRARY, linked=True)
    assert re.search(rf"^\.visible \.global \.align 4 \.b8 __nvfp4emu_state\[{4 * ptx_rewrite.STATE_WORDS}\];",
                     linked, re.M)


LAUNCH_BOUNDED = r"""
#include <cstdint>
__global__ void __launch_bounds__(1024) wide(uint32_t *out) {
  __shared__ uint32_t slot;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(&slot)));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  __syncthreads();
  if (threadIdx.x < 32)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(slot));
  out[threadIdx.x] = slot;
}
"""


def _linked_by_hand(source, cubin) -> subprocess.CompletedProcess:
    """`source` rewritten, assembled alone and linked with the library assembled for 255 registers, as the shim
    does but with none of its fixes (no register cap, no window rounding): nvlink's result."""
    ptx = subprocess.run([NVCC, "-arch=sm_100a", "-ptx", "-O3", str(source), "-o", "-"], capture_output=True,
                         text=True, check=True, timeout=300).stdout
    rewritten, relocatable = cubin.with_suffix(".sm90a.ptx"), cubin.with_suffix(".rel.o")
    rewritten.write_text(rewrite(ptx, toolchain.library_ptx(), linked=True)[0])
    subprocess.run([toolchain.real_tool("ptxas"), "-arch=sm_90a", "-c", str(rewritten), "-o", str(relocatable)],
                   check=True, capture_output=True, timeout=300)
    return subprocess.run([toolchain.real_tool("nvlink"), "-arch=sm_90a", str(relocatable),
                           toolchain.library_cubin(255), "-o", str(cubin)], capture_output=True, text=True,
                          timeout=300)


def _build(env, source, tmp_path, *flags) -> subprocess.CompletedProcess:
    path = tmp_path / "wide.cu"
    path.write_text(source)
    return subprocess.run([env["PYTORCH_NVCC"], "-arch=sm_100a", "-O3", "-Xptxas", "-v", *flags, "-c", str(path),
                           "-o", str(tmp_path / "wide.o")], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_1024_thread_kernel_links_with_the_library_within_64_registers(emulation_env, tmp_path):
    """The library assembled for 255 registers is refused by nvlink for a kernel of 1024 threads ("entry function
    with max regcount of 64 calls function with regcount of 235"): the build takes the cap's cubin, and ptxas's
    report gives the registers as linked."""
    done = _build(emulation_env, LAUNCH_BOUNDED, tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-1500:]
    used = [int(n) for n in re.findall(r"Used (\d+) registers", done.stdout + done.stderr)]
    assert used and max(used) <= 64, used
    assert os.path.exists(os.path.join(emulation_env[toolchain.WORKDIR_ENV], "library.r64.cubin"))
    # Without the cap: the same module against the library assembled for 255 registers
    refused = _linked_by_hand(tmp_path / "wide.cu", tmp_path / "x.cubin")
    assert refused.returncode != 0 and "regcount" in refused.stderr + refused.stdout


@pytest.mark.slow
def test_a_relocatable_build_gets_the_library_merged(emulation_env, tmp_path):
    done = _build(emulation_env, LAUNCH_BOUNDED, tmp_path, "-rdc=true")
    assert done.returncode == 0, (done.stdout + done.stderr)[-1500:]
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    symbols = subprocess.run([cuobjdump, "-elf", str(tmp_path / "wide.o")], capture_output=True, text=True).stdout
    assert "__nvfp4emu_alloc" in symbols


ALIGNED_WINDOW = r"""
#include <cstdint>
__global__ void windowed(uint32_t *out) {
  extern __shared__ __align__(1024) uint8_t window[];
  __shared__ uint32_t slot;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(&slot)));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  __syncthreads();
  window[threadIdx.x] = (uint8_t)slot;
  __syncthreads();
  if (threadIdx.x < 32)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(slot));
  out[threadIdx.x] = (uint32_t)(uintptr_t)window + window[threadIdx.x ^ 1];
}
"""


def _shared_sections(cubin) -> list[tuple[str, int, int]]:
    """(name, size, alignment) of each kernel's static shared section, read from the ELF's section headers."""
    import struct
    elf = cubin.read_bytes()
    offset, = struct.unpack_from("<Q", elf, 0x28)
    size, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    names_at, = struct.unpack_from("<Q", elf, offset + names * size + 24)
    found = []
    for i in range(count):
        name_at, = struct.unpack_from("<I", elf, offset + i * size)
        name = elf[names_at + name_at:elf.index(0, names_at + name_at)].decode()
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            found.append((name, *struct.unpack_from("<Q", elf, offset + i * size + 32),
                          *struct.unpack_from("<Q", elf, offset + i * size + 48)))
    return found


@pytest.mark.slow
def test_the_dynamic_window_keeps_its_declared_alignment_after_linking(emulation_env, tmp_path):
    """`extern __shared__ __align__(1024)`: ptxas alone ends the static section on 1024 bytes, so the window (where
    TMA writes 128-byte-swizzled boxes) starts aligned; nvlink ends it on 16 (0x470 in a public GEMM: its TMA
    faulted with a misaligned address). The linked cubin's sections are rounded up as ptxas rounds them."""
    source = tmp_path / "windowed.cu"
    source.write_text(ALIGNED_WINDOW)
    cubin = tmp_path / "windowed.cubin"
    done = subprocess.run([emulation_env["PYTORCH_NVCC"], "-arch=sm_100a", "-O3", "-cubin", str(source), "-o",
                           str(cubin)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-1500:]
    sections = _shared_sections(cubin)
    assert sections, "no static shared section"
    for name, size, alignment in sections:
        assert size % 1024 == 0 and alignment >= 1024, (name, hex(size), alignment)
    # The same module linked without the rounding: the section ends off the window's alignment
    assert _linked_by_hand(source, tmp_path / "plain.cubin").returncode == 0
    assert any(size % 1024 for _, size, _ in _shared_sections(tmp_path / "plain.cubin"))


def test_the_window_alignment_is_the_largest_declared():
    from arena.blackwell.shared_window import dynamic_shared_alignment
    assert dynamic_shared_alignment(".extern .shared .align 16 .b8 a[];\n.extern .shared .align 1024 .b8 b[];") == 1024
    assert dynamic_shared_alignment("// .extern .shared .align 1024 .b8 a[];\n.shared .align 1024 .b8 s[64];") == 16


def test_reads_of_an_over_aligned_window_are_rounded_and_other_uses_keep_the_merge():
    from arena.blackwell.shared_window import align_window_references
    module = ".extern .shared .align 1024 .b8 w[];\nmov.u32 %r1, w;\n@%p1 cvta.shared.u64 %rd1, w;\n"
    rounded = align_window_references(module)
    assert "add.u32 %emu_window, %emu_window, 1023; and.b32 %emu_window, %emu_window, 0xfffffc00; " \
           "mov.b32 %r1, %emu_window;" in rounded
    assert "@%p1 and.b64 %emu_window, %emu_window, 0xfffffffffffffc00; @%p1 cvta.shared.u64 %rd1, %emu_window;" \
           in rounded
    # a shared load or store at an address operand (CuTe DSL's form) takes the rounded address in a register
    operands = align_window_references(module + "\tld.shared.u32 \t%r2, [w+120];\n"
                                                "@%p2 st.shared.v2.u32 [w-8], {%r1, %r2};\n")
    assert "and.b32 %emu_window_at, %emu_window_at, 0xfffffc00; " \
           "ld.shared.u32 \t%r2, [%emu_window_at+120]; }" in operands
    assert "@%p2 st.shared.v2.u32 [%emu_window_at-8], {%r1, %r2}; }" in operands
    # any other instruction at such an address (the emulation rewrites some), or a labelled line: merged
    assert align_window_references(module + "mbarrier.try_wait.parity.shared.b64 %p1, [w+16], %r1;\n") is None
    assert align_window_references(module + "L1: ld.shared.u32 %r2, [w+16];\n") is None
    plain = ".extern .shared .align 16 .b8 w[];\nld.shared.u32 %r2, [w+16];\n"
    assert align_window_references(plain) == plain


@pytest.mark.slow
def test_the_ptxas_shim_links_only_where_asked(emulation_env, tmp_path):
    """The ptxas shim links a module with the library's cubin where NVFP4EMU_LINK asks (the nvcc shim and CuTe
    DSL's hook set it; Triton, which runs the shim itself, does not) and merges the library otherwise."""
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    source = tmp_path / "wide.cu"
    source.write_text(LAUNCH_BOUNDED)
    ptx = tmp_path / "wide.ptx"
    subprocess.run([NVCC, "-arch=sm_100a", "-ptx", "-O3", str(source), "-o", str(ptx)], check=True,
                   capture_output=True, timeout=300)
    shim = os.path.join(emulation_env[toolchain.WORKDIR_ENV], "shims", "ptxas")
    bindings: dict[str, bool] = {}
    for how, extra in (("merged", {}), ("linked", {toolchain.LINK_ENV: "1"})):
        env = {k: v for k, v in os.environ.items() if k != toolchain.LINK_ENV}
        out = tmp_path / f"{how}.cubin"
        done = subprocess.run([shim, "-arch=sm_100a", str(ptx), "-o", str(out)], env={**env, **extra},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-1000:]
        listing = subprocess.run([cuobjdump, "-elf", str(out)], capture_output=True, text=True).stdout
        # linked: the library's functions keep sections of their own; merged: ptxas folds them into the kernel's
        bindings[how] = ".text.__nvfp4emu_alloc" in listing
    assert bindings == {"merged": False, "linked": True}, bindings


@pytest.mark.slow
def test_a_failed_link_falls_back_to_the_merged_build(tmp_path, monkeypatch):
    """A library cubin nvlink cannot read (here: garbage in place of the 64-register one): the module still
    builds, with the library merged, and the build says why in one line."""
    if NVCC is None:
        pytest.skip("nvcc not found")
    env = toolchain.prepare(str(tmp_path / "emu"))
    work = env[toolchain.WORKDIR_ENV]
    with open(os.path.join(work, "library.r64.cubin"), "wb") as f:
        f.write(b"not a cubin")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    source = tmp_path / "wide.cu"
    source.write_text(LAUNCH_BOUNDED)
    done = subprocess.run([env["PYTORCH_NVCC"], "-arch=sm_100a", "-O3", "-cubin", str(source), "-o",
                           str(tmp_path / "wide.cubin")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-1500:]
    notes = [x for x in done.stderr.splitlines() if "the linked emulation build did not work" in x]
    assert len(notes) == 1 and "nvlink" in notes[0], done.stderr[-1500:]
    assert (tmp_path / "wide.cubin").stat().st_size > 0
