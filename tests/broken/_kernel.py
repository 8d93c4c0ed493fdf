"""A kernel-shaped pure-PyTorch nvfp4_gemm that reads what a CUDA kernel reads, with one switchable bug.

It decodes fp4 correctly (element 0 = LOW nibble) and takes the scales from the MEMORY of sfa_permuted /
sfb_permuted (the 128x4 blocked layout, as a kernel does through data_ptr()), at byte offsets computed as
a kernel computes them. `run(data, bug=None)` is a correct kernel; each file beside this one passes one
classic bug. Reads past the end of a batch's scale buffer return zeros, as a TMA load does.
"""
import torch

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
LAYOUT_BUGS = ("rows_plain", "to_blocked_no_transpose",
               *(f"rowblock_stride_{n}" for n in ("zero", "scales", "double", "plus_one", "pad4", "pad8")),
               "rows_plain_last_tile", "inner_transposed", "kgroup_swapped", "ktile_stride", "tile_order",
               "k_atom_stride_zero",
               "permuted_contiguous", "plain_as_blocked", "blocked_as_plain", "sbo_0", "sbo_16", "sbo_32", "sbo_64")


def memory(t: torch.Tensor) -> torch.Tensor:
    """The bytes a kernel sees from t.data_ptr() onwards (the whole storage, as uint8)."""
    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    return raw[t.storage_offset() * t.element_size():]


def fp4_values(packed: torch.Tensor, dtype, swap: bool = False) -> torch.Tensor:
    raw = packed.view(torch.uint8)
    pair = (raw >> 4, raw & 0x0F) if swap else (raw & 0x0F, raw >> 4)
    codes = torch.stack(pair, dim=-1).flatten(-2)
    return torch.tensor(E2M1, dtype=dtype, device=raw.device)[codes.long()]


def scale_offsets(mn: int, sk: int, bug, device) -> torch.Tensor:
    """Byte offset, inside one batch's scale buffer, that the kernel reads for scale (row r, K-block j)."""
    if bug == "rows_plain_last_tile":     # only the last 128-row tile misread (e.g. a separate tail path)
        last = torch.arange(mn, device=device).unsqueeze(1) >= (mn - 1) // 128 * 128
        return torch.where(last, scale_offsets(mn, sk, "rows_plain", device), scale_offsets(mn, sk, None, device))
    rows_tiles, k_tiles = (mn + 127) // 128, (sk + 3) // 4
    r = torch.arange(mn, device=device).unsqueeze(1)
    j = torch.arange(sk, device=device).unsqueeze(0)
    rb, r32, r4 = r // 128, r % 32, (r % 128) // 32
    kb, k4 = j // 4, j % 4
    tile, inside = rb * k_tiles + kb, r32 * 16 + r4 * 4 + k4
    if bug == "rows_plain":           # 32-row and 4-row-group roles swapped: tile read as row-major 128x4
        inside = (r % 128) * 4 + k4
    elif bug == "to_blocked_no_transpose":   # its own to_blocked without .transpose(1, 2): row r of a block
        source = 4 * (r % 32) + (r % 128) // 32          # gets row 4*(r % 32) + r // 32's scale
        inside = (source % 32) * 16 + (source // 32) * 4 + k4
    elif bug == "inner_transposed":   # r4 and k4 swapped inside a 16-byte row
        inside = r32 * 16 + k4 * 4 + r4
    elif bug == "kgroup_swapped":     # K tile index and position in the group of 4 swapped
        tile, inside = rb * k_tiles + k4, r32 * 16 + r4 * 4 + kb
    elif bug and bug.startswith("rowblock_stride_"):   # the stride between 128-row blocks from a wrong count
        stride = {"zero": 0, "scales": 4 * k_tiles, "double": 2 * k_tiles, "plus_one": k_tiles + 1,
                  "pad4": (k_tiles + 3) // 4 * 4, "pad8": (k_tiles + 7) // 8 * 8}[bug[len("rowblock_stride_"):]]
        tile = rb * stride + kb
    elif bug == "k_atom_stride_zero":  # the atom's K mode given stride 0: 4 K-blocks read the first one's scale
        inside = r32 * 16 + r4 * 4
    elif bug == "ktile_stride":       # 4 tiles per K tile instead of 1
        tile = rb * k_tiles + 4 * kb
    elif bug == "tile_order":         # tiles walked K-tile-major
        tile = kb * rows_tiles + rb
    elif bug == "blocked_as_plain":
        return r * sk + j
    elif bug and bug.startswith("sbo_"):   # a scale copy reading its atom's 8-row groups SBO bytes apart (128 is right)
        inside = (r32 // 8) * int(bug[4:]) + (r32 % 8) * 16 + r4 * 4 + k4
    return tile * 512 + inside


def scales(plain: torch.Tensor, perm: torch.Tensor, batch: int, dtype, bug=None) -> torch.Tensor:
    """The [MN, K/16] scales the kernel applies in `batch`."""
    mn, sk = plain.shape[0], plain.shape[1]
    batch_bytes = (mn + 127) // 128 * ((sk + 3) // 4) * 512
    if bug == "plain_as_blocked":
        source, base, size = memory(plain), batch * mn * sk, mn * sk
    elif bug == "permuted_contiguous":
        flat = perm.contiguous()
        source, base, size = memory(flat), batch * batch_bytes, batch_bytes
    else:
        source, base, size = memory(perm), batch * batch_bytes, batch_bytes
    offsets = scale_offsets(mn, sk, bug, plain.device)
    inside = offsets < size
    values = source[torch.where(inside, offsets, 0) + base].view(torch.float8_e4m3fn).to(dtype)
    return torch.where(inside, values, torch.zeros_like(values))      # out of bounds: zeros, as TMA returns


def run(data, bug=None):
    a, b, sfa, sfb, sfa_perm, sfb_perm, c = data
    dtype = torch.float64 if c.device.type == "cpu" else torch.float32
    m, n, l = c.shape
    k = a.shape[1] * 2
    layout = bug if bug in LAYOUT_BUGS else None
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for batch in range(l):
            src = 0 if bug == "wrong_batch" else batch          # L stride forgotten: always batch 0
            sa = scales(sfa, sfa_perm, src, dtype, layout)
            sb = scales(sfb, sfb_perm, src, dtype, layout)
            if bug == "scales_ignored":
                sa, sb = torch.ones_like(sa), torch.ones_like(sb)
            if bug == "scales_exchanged":
                sa, sb = sb, sa
            av = fp4_values(a[:, :, src], dtype, swap=bug in ("nibble_swap_a", "nibble_swap_both"))
            bv = fp4_values(b[:, :, src], dtype, swap=bug == "nibble_swap_both")
            av = av * sa.repeat_interleave(16, dim=1)
            bv = bv * sb.repeat_interleave(16, dim=1)
            if bug == "last_ktile_missing":                     # K loop stops one 128-wide tile early
                av, bv = av[:, : k - 128], bv[:, : k - 128]
            if bug == "only_last_ktile":                        # accumulator overwritten per 256-wide tile
                av, bv = av[:, k - 256:], bv[:, k - 256:]
            if bug == "fp16_accumulate":                        # fp16 accumulator, 128-wide K steps
                acc = torch.zeros((m, n), dtype=torch.float16, device=c.device)
                for k0 in range(0, k, 128):
                    acc = (acc.to(dtype) + av[:, k0:k0 + 128] @ bv[:, k0:k0 + 128].T).to(torch.float16)
                product = acc.to(dtype)
            else:
                product = av @ bv.T
            if bug == "transposed":
                product = product.T
            if bug == "tail_unwritten":                         # grid of 256-wide N tiles rounded down
                cols = n // 256 * 256
                c[:, :cols, batch] = product[:, :cols].to(c.dtype)
            elif bug == "zeros":
                c[:, :, batch] = 0
            elif bug != "untouched":
                c[:, :, batch] = product.to(c.dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return c
