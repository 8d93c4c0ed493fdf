"""Rewrite a module's sm_100a PTX so that it assembles for sm_90a: every tcgen05 instruction becomes a call
of the emulation library (tcgen05_library.cu, merged into the module or declared for nvlink) or plain loads and
stores.

Pure text in, text out: no GPU, no nvcc. `rewrite(ptx, library_ptx)` returns the new PTX and one `Site` per
rewritten instruction (the library reports errors by site number). Anything it cannot emulate raises
`CannotEmulate` with one line naming the instruction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from arena.blackwell import ptx_sm100
from arena.blackwell.ptx_text import (  # noqa: F401  (CannotEmulate, strip_comments: the module's contract)
    CannotEmulate, Emitter, function_bodies, reads, register_widths, split_operands, strip_comments)

TARGET = "sm_90a"
STATE_SYMBOL = "__nvfp4emu_state"
STATE_WORDS = 32 + 64 * 32          # as NVFP4EMU_STATE_WORDS in emulation_host.h

# Codes shared with tcgen05_library.cu.
MMA_KINDS = {"f16": 0, "tf32": 1, "f8f6f4": 2, "i8": 3, "mxf8f6f4": 4, "mxf4": 5, "mxf4nvf4": 6}
LD_SHAPES = {"32x32b": 0, "16x64b": 1, "16x128b": 2, "16x256b": 3}
LD_REGS_PER_REPEAT = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4}
CP_SHAPES = {"128x256b": 0, "4x256b": 1, "128x128b": 2, "64x128b.warpx2::02_13": 3,
             "64x128b.warpx2::01_23": 4, "32x128b.warpx4": 5}
TMEM_COLUMNS = 512
LD_MARK = "//@emu-ld"              # after a rewritten tcgen05.ld: its site and destination registers
WAIT_LD_MARK = "//@emu-wait-ld"    # a tcgen05.wait::ld


@dataclass
class Site:
    number: int
    line: int          # line of the instruction in the PTX given to `rewrite`
    instruction: str   # its text, whitespace collapsed


_TARGET = re.compile(r"^(\s*\.target\s+)(sm_1\d\d[af]?)\b", re.M)
_STATEMENT = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>tcgen05\.[\w:.]+)(?P<args>[^;{}]*(?:\{[^}]*\}[^;{}]*)*);")
_BULK_CTA_GROUP = re.compile(r"\b(cp\.async\.bulk\.[\w:.]*?)\.cta_group::(\d)")
_TMA = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>(?:cp\.async\.bulk|cp\.reduce\.async\.bulk|"
                  r"cp\.async\.bulk\.prefetch)\.tensor\.[\w:.]+)(?P<args>[^;{}]*\[\s*(?P<map>[%\w$]+)\s*,\s*"
                  r"\{\s*(?P<c0>[^,}\s]+)(?P<rest>[^}]*)\}\s*\][^;]*);")
_MBAR_WAIT = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>mbarrier\.(?:try_wait|test_wait)\b[\w:.]*)\s+"
                        r"(?P<args>[^;]*);")
# Barrier operations a warp's tcgen05.st is ordered by (noted for the library by barrier_note): waits (a CTA barrier, a
# cluster barrier's wait) and arrivals (the non-blocking halves, mbarrier arrivals). bar.warp.sync orders nothing
# across warps.
_BARRIER_WAIT = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?<![\w.$%])(?P<op>(?:bar|barrier)(?:\.cta)?\.(?:sync|red)\b[\w:.]*|"
                           r"barrier\.cluster\.wait\b[\w:.]*)(?P<args>[^;]*);")
_ARRIVE = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?<![\w.$%])(?P<op>(?:bar|barrier)(?:\.cta)?\.arrive\b[\w:.]*|"
                     r"barrier\.cluster\.arrive\b[\w:.]*|(?:cp\.async\.)?mbarrier\.arrive(?:_drop)?\b[\w:.]*)"
                     r"(?P<args>[^;]*);")
_BULK_TO_SHARED = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>cp\.async\.bulk\.(?:tensor\.\w+\.)?"
                             r"shared::(?:cluster|cta)\.global\b[\w:.]*)\s+(?P<dst>\[[^\]]*\])")


def _qualifiers(op: str) -> list[str]:
    return op.split(".")[2:]


def _pair(quals: list[str]) -> bool:
    """.cta_group::2: the instruction acts for the CTA pair (the library's `2` functions)."""
    return "cta_group::2" in quals


def _rewrite_one(op: str, operands: list[str], e: Emitter, site: int, instruction: str) -> str:
    verb = op.split(".")[1].split("::")[0]
    quals = _qualifiers(op)
    if "aligned" in quals and verb in ("alloc", "dealloc", "ld", "st"):
        # .sync.aligned: the whole warp executes it together. A call is not an aligned instruction, so
        # ptxas need not reconverge the warp first: make it (what the hardware instruction implies).
        e.body.append(f"{e.guard}bar.warp.sync -1;")
    two = "2" if _pair(quals) else ""
    if verb == "alloc":
        dst = e.shared_address(operands[0])
        e.call(f"__nvfp4emu_alloc{two}", [(str(site), 32), (dst, 32), (e.value(operands[1], 32), 32)])
    elif verb == "dealloc":
        e.call(f"__nvfp4emu_dealloc{two}", [(str(site), 32), (e.value(operands[0], 32), 32),
                                            (e.value(operands[1], 32), 32)])
    elif verb == "relinquish_alloc_permit":
        return "// emulation: relinquish_alloc_permit has nothing to do"
    elif verb == "fence":
        return "fence.acq_rel.cluster;"
    elif verb == "wait":
        # The loads and stores are synchronous; wait::ld finishes the warp's loads (finish_loads).
        return WAIT_LD_MARK if ".wait::ld" in op else "// emulation: the st wait has nothing to do"
    elif verb == "commit":
        if "mbarrier::arrive::one" not in quals:
            raise CannotEmulate(f"`{instruction}`: commit without .mbarrier::arrive::one")
        multicast = "multicast::cluster" in quals
        mbar = e.shared_address(operands[0]) if "shared::cluster" in quals else e.generic_to_shared(operands[0])
        mask = e.value(operands[1], 32) if multicast else "0"
        e.call(f"__nvfp4emu_commit{two}", [(str(site), 32), (mbar, 32), ("1" if multicast else "0", 32), (mask, 32)])
    elif verb == "cp":
        # the shape, then its .warpx modifier (Triton writes them the other way round: .warpx4.32x128b)
        shape = ".".join([q for q in quals if re.match(r"\d+x\d+b", q)] + [q for q in quals if q.startswith("warpx")])
        if shape not in CP_SHAPES:
            raise CannotEmulate(f"`{instruction}`: tcgen05.cp shape {shape or '?'} is not emulated")
        extra = [q for q in quals if q not in ("cta_group::1", "cta_group::2") and not re.match(r"\d+x\d+b|warpx", q)]
        if extra:
            raise CannotEmulate(f"`{instruction}`: tcgen05.cp with .{'.'.join(extra)} (decompression) is not emulated")
        taddr = e.shared_address(operands[0]) if operands[0].startswith("[") else e.value(operands[0], 32)
        e.call(f"__nvfp4emu_cp{two}", [(str(site), 32), (taddr, 32), (e.value(operands[1], 64), 64),
                                       (str(CP_SHAPES[shape]), 32)])
    elif verb == "mma":
        _rewrite_mma(quals, operands, e, site, instruction)
    elif verb in ("ld", "st"):
        _rewrite_ld_st(verb, quals, operands, e, site, instruction)
    else:
        raise CannotEmulate(f"`{instruction}`: tcgen05.{verb} is not emulated")
    return e.text()


def _rewrite_mma(quals, operands, e: Emitter, site: int, instruction: str) -> None:
    for unsupported in ("ws", "sp", "ashift"):
        if unsupported in quals:
            raise CannotEmulate(f"`{instruction}`: tcgen05.mma.{unsupported} is not emulated")
    kinds = [q.split("::")[1] for q in quals if q.startswith("kind::")]
    if not kinds or kinds[0] not in MMA_KINDS:
        raise CannotEmulate(f"`{instruction}`: tcgen05.mma kind {kinds[0] if kinds else '?'} is not emulated")
    kind = kinds[0]
    scaled = "block_scale" in quals
    vec = 4 if ("block16" in quals or "scale_vec::4X" in quals) else 2 if (
        "block32" in quals or "scale_vec::2X" in quals) else 1
    if scaled and kind == "mxf4nvf4" and vec == 1:
        vec = 4 if not any(q.startswith("scale_vec") or q.startswith("block") for q in quals) else vec
    pair = _pair(quals)
    lane_mask = "0"
    masks = [op for op in operands if op.startswith("{")]
    if masks and pair and not scaled and len(masks) == 1 and len(masks[0].strip("{}").split(",")) == 8:
        # CUTLASS's 2x1SM MMAs pass an all-zero mask of 8 registers: the library checks it is zero.
        operands = [op for op in operands if not op.startswith("{")]
        lane_mask = e.temp(32)
        e.body.append(f"mov.b32 {lane_mask}, 0;")
        for reg in masks[0].strip("{}").split(","):
            e.body.append(f"or.b32 {lane_mask}, {lane_mask}, {e.value(reg.strip(), 32)};")
    elif masks:
        raise CannotEmulate(f"`{instruction}`: tcgen05.mma with a disable-output-lane mask is not emulated")
    want = 7 if scaled else 5
    if len(operands) != want:
        raise CannotEmulate(f"`{instruction}`: tcgen05.mma with {len(operands)} operands (scale-input-d?) is "
                            f"not emulated")
    d = e.shared_address(operands[0])
    if operands[1].startswith("["):
        a, a_in_tmem = e.value(e.shared_address(operands[1]), 64), "1"
    else:
        a, a_in_tmem = e.value(operands[1], 64), "0"
    b = e.value(operands[2], 64)
    idesc = e.value(operands[3], 32)
    sfa = e.shared_address(operands[4]) if scaled else "0"
    sfb = e.shared_address(operands[5]) if scaled else "0"
    accumulate = e.value(operands[-1], 32)
    args = [(str(site), 32), (str(MMA_KINDS[kind]), 32), (str(vec), 32), (d, 32), (a, 64), (a_in_tmem, 32), (b, 64),
            (idesc, 32), (accumulate, 32), (sfa, 32), (sfb, 32)]
    if pair:
        e.call("__nvfp4emu_mma2", args + [(lane_mask, 32)])
    else:
        e.call("__nvfp4emu_mma", args)


def ld_st_offsets(shape: str, count: int) -> list[int]:
    """Byte offset of register r from the thread's first cell (see the table in tcgen05_library.cu)."""
    out = []
    for r in range(count):
        if shape == "32x32b":
            lane, col = 0, r
        elif shape == "16x64b":
            lane, col = 0, 2 * r
        elif shape == "16x128b":
            lane, col = 8 * (r % 2), 4 * (r // 2)
        else:
            lane, col = 8 * ((r // 2) % 2), r % 2 + 8 * (r // 4)
        out.append(4 * (lane * TMEM_COLUMNS + col))
    return out


def _rewrite_ld_st(verb, quals, operands, e: Emitter, site: int, instruction: str) -> None:
    shapes = [q for q in quals if q in LD_SHAPES]
    if not shapes:
        raise CannotEmulate(f"`{instruction}`: tcgen05.{verb} shape is not emulated (16x32bx2?)")
    shape = shapes[0]
    repeat = [int(q[1:]) for q in quals if re.fullmatch(r"x\d+", q)]
    if any(q.startswith("pack::") or q.startswith("unpack::") for q in quals):
        raise CannotEmulate(f"`{instruction}`: tcgen05.{verb} with 16-bit packing is not emulated")
    if any(q.startswith("red") for q in quals):
        raise CannotEmulate(f"`{instruction}`: tcgen05.ld.red is not emulated")
    vector, address = (operands[0], operands[1]) if verb == "ld" else (operands[-1], operands[0])
    regs = [r.strip() for r in vector.strip("{}").split(",")]
    expected = LD_REGS_PER_REPEAT[shape] * (repeat[0] if repeat else 1)
    if len(regs) != expected:
        raise CannotEmulate(f"`{instruction}`: {len(regs)} registers where the shape holds {expected}")
    taddr = e.shared_address(address)
    ptr = e.call("__nvfp4emu_tmem_ptr", [(str(site), 32), (taddr, 32), (str(LD_SHAPES[shape]), 32),
                                         (str(len(regs)), 32), ("1" if verb == "ld" else "0", 32)], result_bits=64)
    for reg, offset in zip(regs, ld_st_offsets(shape, len(regs))):
        if verb == "ld":
            e.body.append(f"{e.guard}ld.b32 {reg}, [{ptr}+{offset}];")
        else:
            e.body.append(f"{e.guard}st.b32 [{ptr}+{offset}], {reg};")
    if verb == "ld":   # it reads tensor memory until wait::ld or the use of a register: see finish_loads
        e.body.append(f"{LD_MARK} {site} {' '.join(regs)}")


def _map_address(e: Emitter, tmap: str) -> str:
    """A 64-bit register with the tensor map's generic address (a .param/.global symbol is converted)."""
    if tmap.startswith("%") or tmap in e.widths:
        return e.value(tmap, 64)
    t = e.temp(64)
    e.body.append(f"cvta.param.u64 {t}, {tmap};" if "_param_" in tmap else f"cvta.global.u64 {t}, {tmap};")
    return t


def _rewrite_tma_coordinate(m: re.Match, widths: dict[str, int]) -> str:
    """A tensor TMA gets its innermost coordinate through __nvfp4emu_tma_coord, which halves it for a packed-FP4
    map (16U4_ALIGN8B, encoded as UINT8 by emulation_host.h: the kernel counts 4-bit elements, the map bytes), and
    its map through __nvfp4emu_tma_map (a UINT8 copy of a packed-FP4 map the kernel's host code encoded itself)."""
    if ".im2col" in m.group("op"):
        return m.group(0)
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    tmap = _map_address(e, m.group("map"))
    op = m.group("op")
    load = op.startswith("cp.async.bulk.tensor") and 0 <= op.find(".shared") < op.find(".global")
    c0 = e.call("__nvfp4emu_tma_coord", [(tmap, 64), (e.value(m.group("c0"), 32), 32), ("1" if load else "0", 32)], 32)
    used = e.call("__nvfp4emu_tma_map", [(tmap, 64)], 64)
    args, at = m.group("args"), m.start("args")
    map_start, map_end = m.start("map") - at, m.end("map") - at
    start, end = m.start("c0") - at, m.end("c0") - at
    e.body.append(f"{e.guard}{m.group('op')}{args[:map_start]}{used}{args[map_end:start]}{c0}{args[end:]};")
    return e.text()


def _rewrite_bulk_cta_group(m: re.Match) -> str:
    """TMA's .cta_group::1 (sm_100) names the issuing CTA's own mbarrier: what sm_90's TMA does without it."""
    if m.group(2) != "1":
        raise CannotEmulate(f"`{m.group(0)}...`: TMA with .cta_group::{m.group(2)} (CTA pairs) is not emulated")
    return m.group(1)


_PAIR_BULK = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>cp\.async\.bulk\.[\w:.]*?\.cta_group::2[\w:.]*)\s+"
                        r"(?P<args>[^;]*);")


def _rewrite_pair_bulk(m: re.Match, widths: dict[str, int]) -> str:
    """TMA (cp.async.bulk{.tensor}) with .cta_group::2: the mbarrier may be the pair's other CTA's (bit 24 of a
    shared::cta address picks the pair's CTA, as CUTLASS's SM100_TMA_2SM_LOAD writes it). sm_90's TMA completes
    bytes only on the destination CTA's own mbarrier, so __nvfp4emu_pair_tma_begin hands the TMA a scratch barrier
    when the pair's barrier is elsewhere, and __nvfp4emu_pair_tma_end forwards the landed bytes to it. With
    .multicast::cluster the TMA loads into the issuing CTA alone and __nvfp4emu_pair_tma_multicast_end copies the
    box to the mask's other CTAs and completes each destination's bytes. The instruction left is sm_90's."""
    instruction = " ".join(m.group(0).split())
    op = m.group("op")
    multicast = ".multicast::cluster" in op
    if "mbarrier::complete_tx" not in op or ".global" not in op or (multicast and ".tensor" not in op):
        raise CannotEmulate(f"`{instruction}`: TMA with .cta_group::2 (CTA pairs) is emulated only for loads from "
                            "global memory (with .multicast::cluster: tensor loads)")
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    e.count = 900        # the TMA coordinate rewrite wraps the statement in a scope of its own: distinct names
    operands = split_operands(m.group("args"))
    brackets = [i for i, x in enumerate(operands) if x.startswith("[")]
    if len(brackets) < 3:
        raise CannotEmulate(f"`{instruction}`: no mbarrier operand found")
    mbar_at = brackets[2]
    if ".tensor" in op:
        tmap = re.match(r"\[\s*([%\w$]+)", operands[1])
        if not tmap:
            raise CannotEmulate(f"`{instruction}`: no tensor map operand found")
        size = e.call("__nvfp4emu_tma_box_bytes", [(_map_address(e, tmap.group(1)), 64)], 32)
    else:
        size = e.value(operands[2], 32)
    dst = e.shared_address(operands[0])
    mbar = e.shared_address(operands[mbar_at])
    sm90_op = op.replace(".cta_group::2", "").replace(".multicast::cluster", "")
    if multicast:
        mask = e.value(operands[mbar_at + 1], 32)
        scratch = e.call("__nvfp4emu_pair_tma_multicast_begin", [(dst, 32), (size, 32), (mask, 32)], result_bits=32)
        operands[mbar_at] = f"[{scratch}]"
        del operands[mbar_at + 1]
        e.body.append(f"{e.guard}{sm90_op} {', '.join(operands)};")
        e.call("__nvfp4emu_pair_tma_multicast_end", [(scratch, 32), (mbar, 32), (dst, 32), (size, 32), (mask, 32)])
        return e.text()
    began = e.call("__nvfp4emu_pair_tma_begin", [(mbar, 32), (dst, 32), (size, 32)], result_bits=64)
    barrier = e.temp(32)
    e.body.append(f"cvt.u32.u64 {barrier}, {began};")
    operands[mbar_at] = f"[{barrier}]"
    e.body.append(f"{e.guard}{sm90_op} {', '.join(operands)};")
    e.call("__nvfp4emu_pair_tma_end", [(began, 64), (size, 32)])
    return e.text()


def barrier_note(guard: str, waited: bool) -> str:
    """PTX that notes a barrier operation of this warp in the library's record of its hardware warp slot
    (__nvfp4emu_warpsync[%smid * 64 + %warpid], 64 bytes): one more barrier operation (its `epoch`, byte 28) and,
    for a wait, the SM's event count so far as what the warp has seen (`synced`, byte 32). Plain atomics, never a
    call: a call inside one thread's branch let ptxas keep a kernel parameter in a uniform register that the
    branch's other calls overwrote."""
    lines = ["{ // nvfp4-arena emulation: a barrier operation of this warp",
             ".reg .b32 %emu_b<3>;", ".reg .b64 %emu_bd<2>;",
             "mov.u32 %emu_b0, %smid;", "min.u32 %emu_b0, %emu_b0, 159;", "mov.u32 %emu_b1, %warpid;",
             "and.b32 %emu_b1, %emu_b1, 63;", "mad.lo.u32 %emu_b1, %emu_b0, 64, %emu_b1;",
             "mov.u64 %emu_bd1, __nvfp4emu_warpsync;", "mad.wide.u32 %emu_bd0, %emu_b1, 64, %emu_bd1;",
             f"{guard}red.relaxed.gpu.global.add.u32 [%emu_bd0+28], 1;"]
    if waited:
        lines += ["mov.u64 %emu_bd1, __nvfp4emu_sm_events;", "mad.wide.u32 %emu_bd1, %emu_b0, 4, %emu_bd1;",
                  "ld.volatile.global.u32 %emu_b2, [%emu_bd1];",
                  f"{guard}red.relaxed.gpu.global.max.u32 [%emu_bd0+32], %emu_b2;"]
    return "\n\t".join(lines) + "\n\t}"


def _after_barrier(m: re.Match, waited: bool) -> str:
    """The barrier operation, then the library's note of it (a wait or an arrival)."""
    return f"{m.group(0)}\n\t{barrier_note(m.group('guard') or '', waited)}"


def _rewrite_mbarrier_wait(m: re.Match, widths: dict[str, int]) -> str:
    """mbarrier.try_wait / test_wait: when the phase is incomplete, the emulated tcgen05 operations queued before
    a commit to this barrier complete (__nvfp4emu_wait_failed), then the wait is tried once more. Operations
    complete no earlier than a thread finds their barrier incomplete: as late as the memory model allows."""
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    operands = split_operands(m.group("args"))
    op = m.group("op")
    if len(operands) < 3 or not operands[1].startswith("["):
        return m.group(0)
    address = e.shared_address(operands[1]) if ".shared" in op else e.generic_to_shared(operands[1])
    failed = e.temp(1)
    original = f"{e.guard}{op} {m.group('args').strip()};"
    e.body += [original, f"setp.ne.u32 {failed}, 0, 0;", f"{e.guard}not.pred {failed}, {operands[0]};"]
    e.guard = f"@{failed} "
    retried = e.call("__nvfp4emu_wait_failed", [("0", 32), (address, 32)], result_bits=32)
    e.body += [f"@{failed} setp.ne.u32 {failed}, {retried}, 0;", f"@{failed} {op} {m.group('args').strip()};"]
    # A completed wait orders other warps' stores (its predicate: `%p3`, or a name such as `p` in inline asm).
    done = f"@{operands[0]} " if re.fullmatch(r"[%\w$]+", operands[0]) else guard + " " if guard else ""
    e.body.append(barrier_note(done, True))
    return e.text()


def finish_loads(text: str) -> str:
    """A tcgen05.ld reads tensor memory until tcgen05.wait::ld or until one of its registers is used (the register
    dependence orders it: NVIDIA's CuTe DSL examples use the registers without ever waiting). The library keeps
    each warp's unfinished load and reports an instruction that overwrites or frees its columns meanwhile. Here
    each ld site gets a predicate, set by the ld; a wait::ld finishes every load of the warp
    (__nvfp4emu_ld_finished(0)) and clears them all; the first statement that reads a register of a load still
    flagged finishes that load."""
    if LD_MARK not in text:
        return text.replace(WAIT_LD_MARK, "// emulation: the ld wait")
    out, last = [], 0
    finish = "{{ .param .b32 emu_ls; st.param.b32 [emu_ls], {site}; {guard}call __nvfp4emu_ld_finished, (emu_ls); }}"
    for start, end in function_bodies(text):
        body = text[start:end]
        if LD_MARK not in body and WAIT_LD_MARK not in body:
            continue
        loads = {}   # site -> destination registers
        for line in body.splitlines():
            if line.strip().startswith(LD_MARK):
                site, *regs = line.split()[1:]
                loads[int(site)] = set(regs)
        flag = {site: f"%emu_ldp{site}" for site in loads}
        clear = " ".join(f"setp.ne.u32 {f}, 0, 0;" for f in flag.values())
        lines = [f".reg .pred {f};" for f in flag.values()] + [clear]
        for line in body.splitlines():
            stripped = line.strip()
            if stripped.startswith(LD_MARK):
                lines.append(f"setp.eq.u32 {flag[int(stripped.split()[1])]}, 0, 0;")
                continue
            if stripped == WAIT_LD_MARK:
                lines += [finish.format(site=0, guard=""), clear]
                continue
            if stripped.endswith(";") and not stripped.startswith((".", "//")) and "%emu_ldp" not in stripped:
                read = reads(stripped)
                for site, regs in loads.items():
                    if read & regs:
                        lines += [finish.format(site=site, guard=f"@{flag[site]} "),
                                  f"@{flag[site]} setp.ne.u32 {flag[site]}, 0, 0;"]
            lines.append(line)
        out.append(text[last:start])
        out.append("\n" + "\n".join(lines) + "\n")
        last = end
    out.append(text[last:])
    return "".join(out)


def _check_bulk_write(m: re.Match, widths: dict[str, int], site: int) -> str:
    """Before a bulk copy (TMA) into shared memory: __nvfp4emu_smem_write reports a destination that a queued
    tcgen05 operation still reads (a stage refilled before the commit that frees it completed)."""
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    dst = e.shared_address(m.group("dst"))
    e.call("__nvfp4emu_smem_write", [(str(site), 32), (dst, 32)])
    return e.text() + "\n\t" + m.group(0)


def _with_library_text(ptx: str, text: str, visible_state: bool) -> str:
    """`text` (the library, or its declarations) inserted after the module header, behind the module's own
    definition of the state array (from emulation_host.h; one is made where the module has none), which moves up
    so the library can refer to it: `.visible` where the library is linked and must resolve it by name."""
    visible = ".visible " if visible_state else ""
    state = re.search(rf"^[^\n]*\.global[^\n]*\b{STATE_SYMBOL}\b[^\n]*;[ \t]*\n", ptx, flags=re.M)
    if state:
        ptx = ptx[:state.start()] + ptx[state.end():]
        state_line = re.sub(r"^\s*(\.visible\s+)?", visible, state.group(0)) if visible_state else state.group(0)
    else:
        state_line = f"{visible}.global .align 4 .b8 {STATE_SYMBOL}[{4 * STATE_WORDS}];\n"
    header = re.search(r"^\s*\.address_size\s+\d+\s*\n", ptx, flags=re.M)
    if not header:
        raise CannotEmulate("the PTX has no .address_size directive")
    at = header.end()
    return ptx[:at] + "\n" + state_line + text + ptx[at:]


def _merge_library(ptx: str, library_ptx: str) -> str:
    """The library's globals and functions inserted after the module header."""
    lib = strip_comments(library_ptx)
    lib = re.sub(r"^\s*\.(version|target|address_size)\b[^\n]*\n", "", lib, flags=re.M)
    lib = re.sub(rf"^\s*\.extern\s+\.global[^\n]*\b{STATE_SYMBOL}\b[^\n]*\n", "", lib, flags=re.M)
    lib = re.sub(r"^\.visible\s+", "", lib, flags=re.M)
    return _with_library_text(ptx, lib + "\n// ---- end of nvfp4-arena emulation library\n", visible_state=False)


_LIBRARY_GLOBAL = re.compile(r"^\.visible\s+(\.global\s+[^=;\[]*?)\s*(\[\d*\])?\s*(?:=[^;]*)?;", re.M)
_LIBRARY_FUNCTION = re.compile(r"^\.visible\s+\.func\b([^{;]*?)\s*\{", re.M)


def _declare_library(ptx: str, library_ptx: str) -> str:
    """The library's globals and functions declared `.extern` after the module header, for a module that is
    assembled alone and linked (nvlink) with the library's own cubin; the module's state array becomes `.visible`,
    so the library's extern reference resolves to this module's copy."""
    lib = strip_comments(library_ptx)
    declarations = [f".extern {m.group(1)}{'[]' if m.group(2) else ''};\n" for m in _LIBRARY_GLOBAL.finditer(lib)
                    if not re.search(rf"\b{STATE_SYMBOL}\b", m.group(1))]
    declarations += [f".extern .func{m.group(1)};\n" for m in _LIBRARY_FUNCTION.finditer(lib)]
    return _with_library_text(ptx, "".join(declarations) + "// ---- end of the emulation library's declarations\n",
                              visible_state=True)


# Registers a thread may hold, as ptxas allots them: 64K a multiprocessor, whole multiples of 8, at most 255.
REGISTER_FILE, MAX_REGISTERS = 65536, 255
REGISTER_CAPS = (255, 168, 128, 96, 64, 32, 16)     # the library is assembled once per cap a module needs


def register_cap(ptx: str, ptxas_args: list[str] = ()) -> int:
    """The most registers a library function may use in this module: the least any of its kernels allows
    (`.maxntid`/`.reqntid` with `.minnctapersm`, `.maxnreg`) or the build's --maxrregcount, as one of
    REGISTER_CAPS. Linked code above a kernel's limit is refused by nvlink, where a merged module's ptxas would
    have fitted it."""
    cap = MAX_REGISTERS
    for i, arg in enumerate(ptxas_args):
        m = re.fullmatch(r"(?:-maxrregcount|--maxrregcount)(?:=(\d+))?", arg)
        if m and (m.group(1) or (i + 1 < len(ptxas_args) and ptxas_args[i + 1].isdigit())):
            cap = min(cap, int(m.group(1) or ptxas_args[i + 1]))
    for m in ptx_sm100.ENTRY_HEAD.finditer(strip_comments(ptx)):
        directives = m.group("directives")
        threads = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives)
        blocks = re.search(r"\.minnctapersm\s+(\d+)", directives)
        limit = re.search(r"\.maxnreg\s+(\d+)", directives)
        if threads:
            count = 1
            for n in threads.groups():
                count *= int(n or 1)
            warps_threads = -(-count // 32) * 32
            cap = min(cap, REGISTER_FILE // (warps_threads * max(1, int(blocks.group(1)) if blocks else 1)) // 8 * 8)
        if limit:
            cap = min(cap, int(limit.group(1)))
    return next((c for c in REGISTER_CAPS if c <= cap), REGISTER_CAPS[-1])


def rewrite(ptx: str, library_ptx: str, linked: bool = False) -> tuple[str, list[Site]]:
    """The sm_90a PTX for `ptx` (an sm_100-family module) and its call sites. The library is merged into the
    module's text, or, `linked`, only declared (the module is then assembled with `-c` and linked with the
    library's cubin: ptxas no longer reassembles the whole library with every module)."""
    text = strip_comments(ptx)
    if not _TARGET.search(text):
        target = re.search(r"^\s*\.target\s+(\S+)", text, flags=re.M)
        raise CannotEmulate(f"the PTX targets {target.group(1) if target else 'nothing'}, not sm_100a")
    text = _TARGET.sub(lambda m: m.group(1) + TARGET, text, count=1)
    widths = register_widths(text)
    sites: list[Site] = []

    def replace(m: re.Match) -> str:
        instruction = " ".join(m.group(0).split())
        line = text.count("\n", 0, m.start()) + 1
        number = len(sites) + 1
        sites.append(Site(number, line, instruction))
        guard = (m.group("guard") or "").strip()
        emitter = Emitter(widths, guard + " " if guard else "")
        operands = split_operands(m.group("args"))
        return _rewrite_one(m.group("op"), operands, emitter, number, instruction)

    text = _STATEMENT.sub(replace, text)

    def check_write(m: re.Match) -> str:
        end = text.find(";", m.end())
        instruction = " ".join(text[m.start():end + 1].split())
        sites.append(Site(len(sites) + 1, text.count("\n", 0, m.start()) + 1, instruction))
        return _check_bulk_write(m, widths, len(sites))

    text = _BULK_TO_SHARED.sub(check_write, text)
    text = ptx_sm100.CVT_FP4.sub(lambda m: ptx_sm100.rewrite_cvt_fp4(m, widths), text)
    text = ptx_sm100.CVT_UE8M0.sub(lambda m: ptx_sm100.rewrite_cvt_ue8m0(m, widths), text)
    text = ptx_sm100.WIDE_GLOBAL.sub(ptx_sm100.split_wide_access, text)
    def clc(m: re.Match) -> str:       # a site of its own, so that a fault's line can name cluster launch control
        sites.append(Site(len(sites) + 1, text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split())))
        return ptx_sm100.rewrite_clc(m, widths)

    text, cancels = ptx_sm100.CLC.subn(clc, text)
    if cancels:
        text = ptx_sm100.with_clc_entry(text)
    text = ptx_sm100.F32X2.sub(lambda m: ptx_sm100.rewrite_f32x2(m, widths), text)
    text = _PAIR_BULK.sub(lambda m: _rewrite_pair_bulk(m, widths), text)
    text = _BULK_CTA_GROUP.sub(_rewrite_bulk_cta_group, text)
    text = _TMA.sub(lambda m: _rewrite_tma_coordinate(m, widths), text)
    text = _BARRIER_WAIT.sub(lambda m: _after_barrier(m, True), text)
    text = _ARRIVE.sub(lambda m: _after_barrier(m, False), text)
    text = _MBAR_WAIT.sub(lambda m: _rewrite_mbarrier_wait(m, widths), text)
    text = finish_loads(text)
    left = re.search(r"\btcgen05\.[\w:.]*", text)
    if left:
        raise CannotEmulate(f"`{left.group(0)}` was not recognised by the rewriter")
    return (_declare_library if linked else _merge_library)(text, library_ptx), sites
