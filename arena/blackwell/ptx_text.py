"""PTX as text: what the rewriters of --emulate-blackwell share. Comments stripped, register widths read, operand
lists split, the statements a register is read by, function bodies found, and `Emitter`, which builds the
replacement of one instruction (a `{ }` scope with its own temporaries and calls into the emulation library).
No GPU, no nvcc: text in, text out."""
from __future__ import annotations

import re

class CannotEmulate(RuntimeError):
    """One line: the instruction or feature that the emulation does not cover."""


_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_REG_DECL = re.compile(r"\.reg\s+\.(\w+)\s+([^;]+);")
_ADDRESS = re.compile(r"^\[\s*([%\w$]+)?\s*(?:([+-])?\s*(0x[0-9a-fA-F]+|\d+))?\s*\]$")
_NUMBER = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")


def strip_comments(ptx: str) -> str:
    return _COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", ptx)


def register_widths(ptx: str) -> dict[str, int]:
    """Bit width of every declared register name (`%r<120>` ranges count as the prefix)."""
    widths = {}
    for kind, names in _REG_DECL.findall(ptx):
        bits = 1 if kind == "pred" else int(re.sub(r"\D", "", kind) or 32)
        for name in names.split(","):
            name = name.strip()
            widths[re.sub(r"<\d+>$", "", name)] = bits
    return widths


def split_operands(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


class Emitter:
    """Builds the replacement of one instruction inside a `{ }` scope with its own temporaries."""

    def __init__(self, widths: dict[str, int], guard: str):
        self.widths, self.guard = dict(widths), guard
        self.decls, self.body, self.params = [], [], []
        self.count = 0

    def width(self, reg: str) -> int:
        if reg in self.widths:
            return self.widths[reg]
        prefix = re.match(r"%?[a-z]+", reg)
        name = prefix.group(0) if prefix else reg
        if name in self.widths:
            return self.widths[name]
        return {"%rd": 64, "%r": 32, "%rs": 16, "%p": 1, "%f": 32, "%fd": 64}.get(name, 32)

    def temp(self, bits: int) -> str:
        self.count += 1
        name = f"%emu_t{self.count}"
        self.widths[name] = bits
        self.decls.append(f".reg .{'pred' if bits == 1 else f'b{bits}'} {name};")
        return name

    def value(self, operand: str, bits: int) -> str:
        """A register or immediate holding `operand` at `bits` width."""
        if _NUMBER.match(operand):
            return operand
        have = self.width(operand)
        if have == bits:
            return operand
        if have == 1:  # predicate -> 0/1
            t = self.temp(bits)
            self.body.append(f"selp.b{bits} {t}, 1, 0, {operand};")
            return t
        t = self.temp(bits)
        self.body.append(f"cvt.u{bits}.u{have} {t}, {operand};")
        return t

    def shared_address(self, operand: str) -> str:
        """A 32-bit shared-window address from `[reg]`, `[reg+imm]`, `[symbol]` or `[imm]`."""
        m = _ADDRESS.match(operand.replace(" ", ""))
        if not m:
            raise CannotEmulate(f"address operand {operand!r} is not of the form [register+offset]")
        base, sign, offset = m.groups()
        if base is None:
            return offset
        if base.startswith("%") or base in self.widths:
            reg = self.value(base, 32)
        else:  # a .shared symbol
            reg = self.temp(32)
            self.body.append(f"mov.u32 {reg}, {base};")
        if offset:
            t = self.temp(32)
            self.body.append(f"{'add' if sign != '-' else 'sub'}.u32 {t}, {reg}, {offset};")
            return t
        return reg

    def generic_to_shared(self, operand: str) -> str:
        m = _ADDRESS.match(operand.replace(" ", ""))
        if not m or m.group(1) is None:
            raise CannotEmulate(f"address operand {operand!r} is not of the form [register]")
        reg = self.value(m.group(1), 64)
        if m.group(3):
            t = self.temp(64)
            self.body.append(f"{'add' if m.group(2) != '-' else 'sub'}.u64 {t}, {reg}, {m.group(3)};")
            reg = t
        t64, t32 = self.temp(64), self.temp(32)
        self.body += [f"cvta.to.shared.u64 {t64}, {reg};", f"cvt.u32.u64 {t32}, {t64};"]
        return t32

    def call(self, function: str, args: list[tuple[str, int]], result_bits: int | None = None) -> str | None:
        names = []
        for value, bits in args:
            self.count += 1
            name = f"emu_p{self.count}"
            self.decls.append(f".param .b{bits} {name};")
            self.body.append(f"st.param.b{bits} [{name}], {value};")
            names.append(name)
        out = None
        if result_bits:
            out = self.temp(result_bits)
            ret = f"emu_ret{self.count}"
            self.decls.append(f".param .b{result_bits} {ret};")
            self.body.append(f"{self.guard}call ({ret}), {function}, ({', '.join(names)});")
            self.body.append(f"ld.param.b{result_bits} {out}, [{ret}];")
        else:
            self.body.append(f"{self.guard}call {function}, ({', '.join(names)});")
        return out

    def text(self) -> str:
        return "{ // nvfp4-arena emulation\n\t" + "\n\t".join(self.decls + self.body) + "\n\t}"


_FUNCTION_HEAD = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\b", re.M)
_REGISTER = re.compile(r"%[\w$]+")
_WRITES_NOTHING = ("st.", "st ", "red.", "prefetch", "bar.", "bra", "ret", "exit", "call", "fence", "membar",
                   "cp.", "mbarrier.init", "mbarrier.inval", "mbarrier.arrive", "mbarrier.expect_tx", "trap")


def reads(statement: str) -> set[str]:
    """Registers a PTX statement reads: every operand but the first (its destination), or all of them for the
    instructions that write no register."""
    body = re.sub(r"^@!?[%\w$]+\s+", "", statement.strip())
    parts = body.split(None, 1)
    if len(parts) < 2:
        return set()
    opcode, operands = parts
    if opcode.startswith(_WRITES_NOTHING):
        return set(_REGISTER.findall(operands))
    split = split_operands(operands.rstrip(";"))
    return set(_REGISTER.findall(",".join(split[1:])))


def function_bodies(text: str) -> list[tuple[int, int]]:
    """(start, end) of each function body's text between its outer braces."""
    bodies = []
    for head in _FUNCTION_HEAD.finditer(text):
        brace, semicolon = text.find("{", head.end()), text.find(";", head.end())
        if brace < 0 or 0 <= semicolon < brace:
            continue   # a declaration
        depth, i = 0, brace
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        bodies.append((brace + 1, i))
    return bodies
