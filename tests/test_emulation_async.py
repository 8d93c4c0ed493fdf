"""The asynchronous tcgen05 emulation, on the CPU: what the rewriter adds so that the library can complete
operations late and name a missing wait, commit or barrier (the GPU half: bench/emulation/planted_check.sh).

- every mbarrier wait form calls __nvfp4emu_wait_failed when its phase is incomplete, then tries again;
- every bulk copy into shared memory is checked against the operations still queued (__nvfp4emu_smem_write);
- a tcgen05.ld is finished by tcgen05.wait::ld or by the first use of one of its registers
  (__nvfp4emu_ld_finished), so that the library can report tensor memory overwritten or freed while a load still
  reads it; the rewritten module still assembles for sm_90a;
- every barrier wait (bar.sync, barrier.cluster.wait, a completed mbarrier wait) and every arrival is noted for the
  library with plain atomics (never a call), so that it can tell a tcgen05.st that no barrier orders before another
  warp's MMA;
- each new error reads as one line naming the instruction and the missing step;
- each planted bug of tests/blackwell/planted.py still applies to the shipped submission.py.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from arena.blackwell import ptx_rewrite, ptx_text, runtime, toolchain
from arena.compile import find_tool
from tests.blackwell import planted
from tests.test_blackwell_emulation import MODULE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMS = os.path.join(ROOT, "tests", "blackwell", "async_forms.cu")
NVCC = find_tool("nvcc")


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """(sm_100a PTX, rewritten PTX, sites, ptxas result) of tests/blackwell/async_forms.cu."""
    if NVCC is None:
        pytest.skip("nvcc not found")
    tmp = tmp_path_factory.mktemp("async")
    env = toolchain.prepare(str(tmp / "toolchain"))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        ptx = tmp / "k.ptx"
        subprocess.run([NVCC, "-gencode=arch=compute_100a,code=compute_100a", "-ptx", "-O3", FORMS, "-o", str(ptx)],
                       check=True, capture_output=True, text=True, timeout=240)
        original = ptx.read_text()
        new, sites = ptx_rewrite.rewrite(original, toolchain.library_ptx())
        (tmp / "new.ptx").write_text(new)
        assembled = subprocess.run([toolchain.real_tool("ptxas"), "-arch=sm_90a", str(tmp / "new.ptx"),
                                    "-o", str(tmp / "new.cubin")], capture_output=True, text=True, timeout=240)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return original, new, sites, assembled


def _function(ptx: str, name: str) -> str:
    """The text of kernel `name` (C++-mangled) up to the next kernel."""
    start = re.search(rf"\.entry\s+_Z\d+{name}\w*", ptx).start()
    end = ptx.find(".entry", start + 10)
    return ptx[start:end if end > 0 else len(ptx)]


@pytest.mark.slow
def test_the_rewritten_module_assembles_for_sm90a(rewritten):
    _, _, _, assembled = rewritten
    assert assembled.returncode == 0, assembled.stderr[-2000:]


@pytest.mark.slow
def test_every_mbarrier_wait_completes_queued_operations_when_its_phase_is_incomplete(rewritten):
    original, new, _, _ = rewritten
    waits = len(re.findall(r"mbarrier\.(?:try_wait|test_wait)", original))
    assert waits == 3
    assert len(re.findall(r"call \(emu_ret\d+\), __nvfp4emu_wait_failed", new)) == waits
    # the wait is tried again after the queue ran: each original wait appears twice, the retry under the flag
    body = _function(new, "waits_and_copies")
    assert len(re.findall(r"@%emu_t\d+ mbarrier\.(?:try_wait|test_wait)", body)) == waits
    assert "cvta.to.shared.u64" in body                   # the generic-address wait is converted


@pytest.mark.slow
def test_every_bulk_copy_into_shared_memory_is_checked_against_queued_operations(rewritten):
    _, new, sites, _ = rewritten
    assert new.count("call __nvfp4emu_smem_write") == 2
    named = [s.instruction for s in sites if s.instruction.startswith("cp.async.bulk")]
    assert len(named) == 2 and any(".tensor.2d" in s for s in named)


@pytest.mark.slow
def test_a_load_is_finished_by_the_first_use_of_a_register_or_by_wait_ld(rewritten):
    _, new, sites, _ = rewritten
    for name in ("ld_unwaited", "ld_waited"):
        body = _function(new, name)
        site = next(s.number for s in sites if s.instruction.startswith("tcgen05.ld")
                    and f"%emu_ldp{s.number}" in body)
        flag = f"%emu_ldp{site}"
        set_at = body.index(f"setp.eq.u32 {flag}, 0, 0;")
        by_use = [m.start() for m in re.finditer(rf"st\.param\.b32 \[emu_ls\], {site}; @{re.escape(flag)} "
                                                 r"call __nvfp4emu_ld_finished", body)]
        by_wait = [m.start() for m in re.finditer(r"st\.param\.b32 \[emu_ls\], 0; call __nvfp4emu_ld_finished", body)]
        assert by_wait and min(by_wait) > set_at, name           # every wait::ld finishes the warp's loads
        if name == "ld_unwaited":                                  # the use before the wait finishes the load
            assert by_use and set_at < min(by_use) < min(by_wait)
        else:                                                      # the wait comes first
            assert not by_use or min(by_use) > min(by_wait)


@pytest.mark.parametrize("statement, reads", [
    ("add.s32 %r1, %r2, %r3;", {"%r2", "%r3"}),
    ("st.global.u32 [%rd1+4], %r5;", {"%rd1", "%r5"}),
    ("@%p1 mov.b64 %rd2, {%r1, %r2};", {"%r1", "%r2"}),
    ("ld.b32 %r1, [%emu_t3+8];", {"%emu_t3"}),
    ("selp.u32 %r4, 1, 0, %p2;", {"%p2"}),
])
def test_reads_are_the_operands_after_the_destination_or_all_of_a_store(statement, reads):
    assert ptx_text.reads(statement) == reads


SITES = {3: "tcgen05.ld.sync.aligned.32x32b.x32.b32 {...}, [%r9];",
         5: "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r1], ...;",
         7: "cp.async.bulk.tensor.2d.shared::cluster.global... [%r2], ...;"}


@pytest.mark.parametrize("record, words", [
    ([70, 5, 3, 2], "(warp 2) has not finished reading: that load was neither waited for"),
    ([63, 5, 3, 2], "this tcgen05.dealloc frees tensor-memory columns that"),
    ([64, 3, 120, 8], "reads tensor-memory columns 120..120+8 after this CTA freed them"),
    ([75, 3, 32, 8], "reads tensor-memory columns 32..32+8 that this CTA freed and another CTA has allocated since"),
    ([71, 3, 5, 0], "still writes: that operation was never committed"),
    ([71, 3, 5, 0x441], "commit arrives on the mbarrier at shared address 0x440, and no thread waited"),
    ([72, 3, 5, 0], "this tcgen05.dealloc frees tensor-memory columns that `tcgen05.mma"),
    ([73, 5, 1, 0x400], "the B operand of this instruction in shared memory (descriptor start 0x400) changed"),
    ([74, 7, 5, 0x441], "this copy writes shared memory that `tcgen05.mma"),
    ([66, 3, 5, 2], "this tcgen05.st (warp 2) writes tensor memory that `tcgen05.mma"),
    ([67, 5, 3, 1], "that warp 1 wrote with `tcgen05.ld"),
])
def test_each_async_error_is_one_line_naming_the_instruction_and_the_missing_step(record, words):
    line = runtime.describe(record + [1, 0, 0, 33], SITES)
    assert words in line and "\n" not in line
    assert f"at `{SITES[record[1]]}`" in line and "CTA (1,0,0) thread 33" in line
    if record[0] in (71, 72, 74):
        assert f"`{SITES[5]}`" in line
    if record[0] in (63, 70):
        assert f"`{SITES[3]}`" in line
    assert line.startswith("emulated tcgen05 warning: " if record[0] in (63, 64, 66, 67) else "emulated tcgen05: ")


@pytest.mark.parametrize("body, waited", [
    ("bar.sync 0;", [1]),
    ("barrier.sync.aligned 1, 64;", [1]),
    ("@%p1 bar.sync 0;", [1]),
    ("bar.red.popc.u32 %r2, 0, %p1;", [1]),
    ("barrier.cluster.wait.aligned;", [1]),
    ("bar.arrive 1, 64;", [0]),
    ("barrier.cluster.arrive.release.aligned;", [0]),
    ("mbarrier.arrive.shared::cta.b64 _, [%r1];", [0]),
    ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 128;", [0]),
    ("cp.async.mbarrier.arrive.noinc.shared.b64 [%r1];", [0]),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", [1]),
    ("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%r1], 0; selp.u32 %r2, 1, 0, p; }", [1]),
    ("bar.warp.sync -1;", []),
    ("fence.proxy.async.shared::cta;", []),
])
def test_every_barrier_wait_and_arrival_tells_the_library(body, waited):
    new, _ = ptx_rewrite.rewrite(MODULE.replace("BODY", body), ".version 8.7\n.target sm_90a\n.address_size 64\n")
    code = ptx_rewrite.strip_comments(new)
    operations = re.findall(r"(@!?%?\w+ )?red\.relaxed\.gpu\.global\.add\.u32 \[%emu_bd0\+28\], 1;", code)
    waits = re.findall(r"(@!?%?\w+ )?red\.relaxed\.gpu\.global\.max\.u32 \[%emu_bd0\+32\], %emu_b2;", code)
    assert [1 if i < len(waits) else 0 for i in range(len(operations))] == waited, code
    assert "call __nvfp4emu_barrier" not in code    # never a call: see barrier_note
    if body.startswith("@%p1 bar"):
        assert operations == ["@%p1 "] and waits == ["@%p1 "]
    if "try_wait" in body:   # a completed wait orders stores, whether or not its first try failed
        predicate = re.search(r"try_wait\S* (%?\w+),", body).group(1)
        assert operations == [f"@{predicate} "] and waits == [f"@{predicate} "], code


@pytest.mark.parametrize("bug", list(planted.BUGS))
def test_each_planted_bug_applies_to_the_shipped_submission_exactly_once(bug):
    shipped = open(os.path.join(ROOT, "submission.py")).read()
    variant = planted.planted(bug, shipped)
    assert variant != shipped
    with pytest.raises(ValueError, match="occurs 0 times"):     # planted twice: an anchor is gone
        planted.planted(bug, variant)


@pytest.mark.gpu
@pytest.mark.parametrize("order, warning", [("barrier", None),
                                            ("copy", "also writes, issued earlier with nothing completing it first")])
def test_a_store_over_an_earlier_uncommitted_copy_keeps_its_values(order, warning, hopper_gpu):
    """On a Hopper GPU (bench/emulation/st_order_check.py, tests/blackwell/st_scales.cu): thread 0 copies zeros into
    the scale-factor columns with tcgen05.cp and no commit, then every warp stores the real scale factors and a
    barrier precedes the MMA. A B200 has run the copy long before the stores; the emulation must not let the
    queued copy land after them (every row would come out zero)."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "st_order_check.py"), "--one",
                           order], capture_output=True, text=True, timeout=900, cwd=ROOT)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["right"] == [True] * 4 and not got["error"], got
    assert (warning in got["warning"]) if warning else not got["warning"], got


def _alloc_check(kernel: str) -> dict:
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "alloc_check.py"), kernel],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_a_kernel_that_takes_column_0_without_reading_alloc_runs_as_on_a_b200(hopper_gpu):
    """On a Hopper GPU (bench/emulation/alloc_check.py, tests/blackwell/tmem_base_zero.cu): one CTA per SM,
    256 columns each, column 0 used and freed without reading tcgen05.alloc's result. Every CTA must read its own
    values back with no emulation error: a CTA that starts while its predecessor's columns are in their grace
    waits for column 0 instead of taking 256."""
    got = _alloc_check("base_zero")
    assert got["right"] == got["ctas"] and not got["error"], got


@pytest.mark.gpu
def test_cta_s_that_each_hold_columns_and_wait_for_more_are_named_a_deadlock_and_the_call_ends(hopper_gpu):
    """tests/blackwell/alloc_deadlock.cu: 8 CTAs per SM each allocate 256 columns, then 32 more. Two of them hold
    all 512 and wait for more, which a B200 never serves (jIab-b's gemv @fe09570 allocates 128, 128, 32 and 32
    per CTA, and its B200 run timed out). The emulation must say so in one line and let the call end; without
    the second alloc the CTAs only wait for each other's columns, and none is named."""
    got = _alloc_check("deadlock")
    assert "can never be served" in got["error"] and "deadlock" in got["error"] and "\n" not in got["error"], got
    waits = _alloc_check("waits")
    assert waits["right"] == waits["ctas"] and not waits["error"], waits
