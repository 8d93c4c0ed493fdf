"""The sm_100-only instructions outside tcgen05 that public Blackwell kernels use, rewritten for sm_90a: FP4 to f16
becomes a byte permute inline, the other FP4 and the UE8M0 conversions calls of the emulation library, cluster
launch control calls that cancel clusters not yet started, and 256-bit global loads and stores two 128-bit ones.
Text in, text out (ptx_rewrite.rewrite runs these after the tcgen05 rewrite)."""
from __future__ import annotations

import re

from arena.blackwell.ptx_text import CannotEmulate, Emitter, split_operands

CVT_FP4 = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?cvt\.(?P<quals>[\w.]*\be2m1x\d[\w.]*)\s+(?P<args>[^;]*);")
CVT_UE8M0 = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?cvt\.(?P<quals>[\w.]*\bue8m0x2[\w.]*)\s+(?P<args>[^;]*);")
WIDE_GLOBAL = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>(?:ld|st)(?:\.global)?(?:\.[\w:]+)*?)\.v8\.(?P<type>b32|u32|s32|f32)"
                          r"\s+(?P<args>[^;]*);")


def rewrite_cvt_fp4(m: re.Match, widths: dict[str, int]) -> str:
    """cvt.rn.f16x2.e2m1x2 d, a (inline) and cvt.rn.satfinite{.relu}.e2m1x2.f32 d, a, b (a call): sm_100 only."""
    instruction = " ".join(m.group(0).split())
    quals = m.group("quals").split(".")
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    operands = split_operands(m.group("args"))
    relu = "1" if "relu" in quals else "0"
    plain = [q for q in quals if q not in ("relu", "satfinite")]
    if plain == ["rn", "f16x2", "e2m1x2"] and len(operands) == 2 and relu == "0":
        out = _f16x2_from_e2m1x2(e, e.value(operands[1], 32))
    elif plain == ["rn", "e2m1x2", "f32"] and "satfinite" in quals and len(operands) == 3:
        out = e.call("__nvfp4emu_cvt_e2m1x2_f32", [(operands[1], 32), (operands[2], 32), (relu, 32)], 32)
    else:
        raise CannotEmulate(f"`{instruction}`: this FP4 conversion is not emulated")
    dst, bits = operands[0], e.width(operands[0])
    e.body.append(f"{e.guard}cvt.u{bits}.u32 {dst}, {out};" if bits < 32 else f"{e.guard}mov.b32 {dst}, {out};")
    return e.text()


# The f16 high byte of the e2m1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (their low bytes are all zero), as the two
# words `prmt` picks bytes from: byte i of the pair is magnitude i's.
_E2M1_F16_HIGH_BYTES = ("0x3E3C3800", "0x46444240")


def _f16x2_from_e2m1x2(e: Emitter, pair: str) -> str:
    """cvt.rn.f16x2.e2m1x2 inline: no call, since CUDA-core GEMVs convert every element they read. One `prmt`
    looks both magnitudes up (selector nibbles 1 and 3: output bytes 1 and 3; nibbles 0 and 2 pick byte 0, which is
    zero), and the two sign bits (input bits 3 and 7) move to bits 15 and 31."""
    low, high, selector, signs, t = (e.temp(32) for _ in range(5))
    e.body += [f"mov.b32 {low}, {_E2M1_F16_HIGH_BYTES[0]};", f"mov.b32 {high}, {_E2M1_F16_HIGH_BYTES[1]};",
               f"shl.b32 {selector}, {pair}, 4;", f"and.b32 {selector}, {selector}, 0x70;",
               f"shl.b32 {t}, {pair}, 8;", f"and.b32 {t}, {t}, 0x7000;", f"or.b32 {selector}, {selector}, {t};",
               f"prmt.b32 {selector}, {low}, {high}, {selector};",
               f"shl.b32 {signs}, {pair}, 12;", f"and.b32 {signs}, {signs}, 0x8000;",
               f"shl.b32 {t}, {pair}, 24;", f"and.b32 {t}, {t}, 0x80000000;", f"or.b32 {signs}, {signs}, {t};",
               f"or.b32 {signs}, {signs}, {selector};"]
    return signs


def _f32_operand(operand: str) -> str:
    """An f32 source operand for a .b32 parameter: a register as it is, an `0fXXXXXXXX` immediate as its bits."""
    return "0x" + operand[2:] if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", operand) else operand


def rewrite_cvt_ue8m0(m: re.Match, widths: dict[str, int]) -> str:
    """cvt.{rz,rp}{.satfinite}.ue8m0x2.f32 d, a, b, cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2 d, a and
    cvt.rn.bf16x2.ue8m0x2 d, a (sm_100 only) as calls (tcgen05_library.cu states their semantics)."""
    instruction = " ".join(m.group(0).split())
    quals = m.group("quals").split(".")
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, guard + " " if guard else "")
    operands = split_operands(m.group("args"))
    mode = str(int("rp" in quals) + 2 * int("satfinite" in quals))     # as the library reads it
    plain = [q for q in quals if q != "satfinite"]
    if plain in (["rz", "ue8m0x2", "f32"], ["rp", "ue8m0x2", "f32"]) and len(operands) == 3:
        out = e.call("__nvfp4emu_cvt_ue8m0x2_f32", [(_f32_operand(operands[1]), 32), (_f32_operand(operands[2]), 32),
                                                    (mode, 32)], 32)
    elif plain in (["rz", "ue8m0x2", "bf16x2"], ["rp", "ue8m0x2", "bf16x2"]) and len(operands) == 2:
        out = e.call("__nvfp4emu_cvt_ue8m0x2_bf16x2", [(e.value(operands[1], 32), 32), (mode, 32)], 32)
    elif quals == ["rn", "bf16x2", "ue8m0x2"] and len(operands) == 2:
        out = e.call("__nvfp4emu_cvt_bf16x2_ue8m0x2", [(e.value(operands[1], 32), 32)], 32)
    else:
        raise CannotEmulate(f"`{instruction}`: this UE8M0 conversion is not emulated")
    dst, bits = operands[0], e.width(operands[0])
    e.body.append(f"{e.guard}cvt.u{bits}.u32 {dst}, {out};" if bits < 32 else f"{e.guard}mov.b32 {dst}, {out};")
    return e.text()


F32X2 = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?<![\w.])(?P<op>add|sub|mul|fma|min|max)(?P<quals>(?:\.(?:rn|rz|rm|rp|ftz|sat|NaN))*)"
                   r"\.f32x2\s+(?P<args>[^;]*);")


def rewrite_f32x2(m: re.Match, widths: dict[str, int]) -> str:
    """sm_100's packed pair arithmetic (`add/sub/mul/fma/min/max{.rnd}{.ftz}{.sat}.f32x2 d, a, b{, c}`: .b64
    operands holding two f32, element 0 in the low word; Triton 3.6 emits mul.f32x2 for sm_100) as the same
    operation on each half: the PTX ISA defines the pair as the f32 operation applied to each element."""
    instruction = " ".join(m.group(0).split())
    guard = (m.group("guard") or "").strip()
    e = Emitter(widths, "")
    op, quals = m.group("op"), m.group("quals")
    operands = split_operands(m.group("args"))
    if len(operands) != (4 if op == "fma" else 3) or any(not o.startswith("%") for o in operands):
        raise CannotEmulate(f"`{instruction}`: this .f32x2 form is not emulated (register operands expected)")
    halves = []
    for source in operands[1:]:
        low, high = e.temp(32), e.temp(32)
        e.body.append(f"mov.b64 {{{low}, {high}}}, {source};")
        halves.append((low, high))
    result = []
    for half in range(2):
        out = e.temp(32)
        e.body.append(f"{op}{quals}.f32 {out}, {', '.join(pair[half] for pair in halves)};")
        result.append(out)
    e.body.append(f"{guard + ' ' if guard else ''}mov.b64 {operands[0]}, {{{result[0]}, {result[1]}}};")
    return e.text()


CLC = re.compile(r"(?P<guard>@!?[%\w$]+\s+)?(?P<op>clusterlaunchcontrol\.[\w:.]+)"
                  r"(?P<args>[^;{}]*(?:\{[^}]*\}[^;{}]*)*);")
CLC_RESPONSE_BYTES = 16


def rewrite_clc(m: re.Match, widths: dict[str, int]) -> str:
    """Cluster launch control, as a B200 runs it: a cancel succeeds while some cluster of the grid has not started,
    and that cluster never runs (tcgen05_library.cu, __nvfp4emu_clc_try_cancel; every kernel of the module starts
    with __nvfp4emu_clc_enter, `with_clc_entry`). try_cancel writes the 16-byte response and completes 16 bytes of
    transaction on the mbarrier, as the hardware does when the response lands; with .multicast::cluster::all, the
    same response at the same offsets in every CTA of the cluster (each CTA waits on its own mbarrier for its own
    copy). query_cancel reads it back from the .b128 value the kernel loaded. The encoding is the emulation's own
    (the hardware's is opaque): the low 8 bytes hold it all (bit 63 canceled; the canceled cluster's first CTA x,
    y, z in bits 0-20, 21-41, 42-62) and the high 8 bytes are 0. Public CuTe DSL group GEMMs that passed on B200s
    reserve 4 bytes for the response, so its high 8 bytes land on their own CLC mbarrier: zeros there leave it as
    an all-zero response does."""
    instruction = " ".join(m.group(0).split())
    op, guard = m.group("op"), (m.group("guard") or "").strip()
    quals = op.split(".")[1:]
    e = Emitter(widths, guard + " " if guard else "")
    operands = split_operands(m.group("args"))
    if quals[:2] == ["try_cancel", "async"] and "mbarrier::complete_tx::bytes" in quals and quals[-1] == "b128" \
            and len(operands) == 2 and set(quals) <= {"try_cancel", "async", "shared::cta", "b128",
                                                      "mbarrier::complete_tx::bytes", "multicast::cluster::all"}:
        address = e.shared_address if "shared::cta" in quals else e.generic_to_shared
        response, barrier = address(operands[0]), address(operands[1])
        skip = f"$emu_clc_done_{m.start()}"
        if guard:
            negated = guard[2:] if guard.startswith("@!") else guard[1:]
            e.body.append(f"@{'' if guard.startswith('@!') else '!'}{negated} bra {skip};")
        packed, low, high, zero = e.temp(64), e.temp(32), e.temp(32), e.temp(32)
        ret = f"emu_ret_clc{m.start()}"
        e.decls.append(f".param .b64 {ret};")
        e.body += [f"call ({ret}), __nvfp4emu_clc_try_cancel;", f"ld.param.b64 {packed}, [{ret}];",
                   f"mov.b64 {{{low}, {high}}}, {packed};", f"mov.b32 {zero}, 0;"]
        value = f"{{{low}, {high}, {zero}, {zero}}}"
        if "multicast::cluster::all" not in quals:
            e.body += [f"st.shared.v4.b32 [{response}], {value};",
                       "fence.acq_rel.cluster;",
                       f"mbarrier.complete_tx.relaxed.cluster.shared::cta.b64 [{barrier}], {CLC_RESPONSE_BYTES};"]
        else:
            rank, count, there, there_barrier, more = e.temp(32), e.temp(32), e.temp(32), e.temp(32), e.temp(1)
            loop = f"$emu_clc_cta_{m.start()}"
            e.body += [f"mov.u32 {count}, %cluster_nctarank;", f"mov.u32 {rank}, 0;", f"{loop}:",
                       f"mapa.shared::cluster.u32 {there}, {response}, {rank};",
                       f"mapa.shared::cluster.u32 {there_barrier}, {barrier}, {rank};",
                       f"st.shared::cluster.v4.b32 [{there}], {value};",
                       "fence.acq_rel.cluster;",
                       f"mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [{there_barrier}], "
                       f"{CLC_RESPONSE_BYTES};",
                       f"add.u32 {rank}, {rank}, 1;", f"setp.lt.u32 {more}, {rank}, {count};",
                       f"@{more} bra {loop};"]
        if guard:
            e.body.append(f"{skip}:")
        return e.text()
    vector = quals[1:] == ["get_first_ctaid", "v4", "b32", "b128"]
    one = quals[1:2] in (["get_first_ctaid::x"], ["get_first_ctaid::y"], ["get_first_ctaid::z"]) \
        and quals[2:] == ["b32", "b128"]
    canceled = quals[:2] == ["query_cancel", "is_canceled"] and quals[2:] == ["pred", "b128"]
    if quals[0] == "query_cancel" and (canceled or vector or one) and len(operands) == 2:
        low, high = e.temp(64), e.temp(64)
        e.body.append(f"mov.b128 {{{low}, {high}}}, {operands[1]};")
        if canceled:
            e.body.append(f"{e.guard}setp.lt.s64 {operands[0]}, {low}, 0;")       # bit 63
            return e.text()
        targets = [t.strip() for t in operands[0].strip("{} ").split(",")]
        axes = ["xyz".index(quals[1][-1])] if one else [0, 1, 2]
        for target, axis in zip(targets, axes):
            if target == "_":
                continue
            shifted, word = e.temp(64), e.temp(32)
            e.body += [f"shr.u64 {shifted}, {low}, {21 * axis};", f"cvt.u32.u64 {word}, {shifted};",
                       f"{e.guard}and.b32 {target}, {word}, 0x1FFFFF;"]
        return e.text()
    raise CannotEmulate(f"`{instruction}`: this cluster launch control form is not emulated")


def with_clc_entry(ptx: str) -> str:
    """Every kernel of a module that uses cluster launch control starts with __nvfp4emu_clc_enter: a CTA whose
    cluster a try_cancel took before it started exits there, as a B200 never launches a canceled cluster."""
    def enter(m: re.Match) -> str:
        return (m.group(0) + "\n\t{\n\t.reg .b32 %emu_clc_r;\n\t.reg .pred %emu_clc_p;\n\t.param .b32 emu_clc_ret;\n\t"
                "call (emu_clc_ret), __nvfp4emu_clc_enter;\n\tld.param.b32 %emu_clc_r, [emu_clc_ret];\n\t"
                "setp.ne.u32 %emu_clc_p, %emu_clc_r, 0;\n\t@%emu_clc_p exit;\n\t}")
    return ENTRY_HEAD.sub(enter, ptx)


ENTRY_HEAD = re.compile(r"\.entry\s+[\w$]+\s*\([^)]*\)(?P<directives>[^{]*)\{")


def split_wide_access(m: re.Match) -> str:
    """sm_100's 256-bit ld/st.global.v8 of 32-bit values: two 128-bit accesses (sm_90 has .v4 at most; only the
    single-instruction atomicity differs, which no tested kernel relies on)."""
    guard, op, kind = m.group("guard") or "", m.group("op"), m.group("type")
    if ".global" not in op and not op.startswith("ld.global") and not op.startswith("st.global"):
        return m.group(0)
    operands = split_operands(m.group("args"))
    if len(operands) != 2:
        return m.group(0)
    vector, address = (operands[0], operands[1]) if op.startswith("ld") else (operands[1], operands[0])
    regs = [r.strip() for r in vector.strip("{}").split(",")]
    inner = address.strip()[1:-1].strip()
    base_offset = re.fullmatch(r"(.+?)\s*([+-])\s*(\d+)", inner)
    base, offset = (base_offset.group(1), int(base_offset.group(3)) * (-1 if base_offset.group(2) == "-" else 1)) \
        if base_offset else (inner, 0)
    if len(regs) != 8 or not inner:
        return m.group(0)
    parts = []
    for half in range(2):
        where = f"[{base}+{offset + 16}]" if half else address
        four = "{" + ", ".join(regs[4 * half:4 * half + 4]) + "}"
        pair = (four, where) if op.startswith("ld") else (where, four)
        parts.append(f"{guard}{op}.v4.{kind} {pair[0]}, {pair[1]};")
    return " ".join(parts)
