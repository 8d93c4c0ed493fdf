"""The parent's audit of what the worker sends back (docs/integrity.md), used by arena/run/evaluator.py for every
reply: `OutputAudit` (contract tricks, returning the input c, outputs aliasing inputs or each other, writes that
land after the call returned) and `timing_flags` (times that cannot be honest). Module level imports only the
standard library; torch where a tensor is met.
"""
from __future__ import annotations

from arena.taskdef.nested import tensors_in


def _span(t) -> tuple[int, int, str]:
    """The bytes a tensor can touch: [first, last) of its strided extent (slices of one buffer do not overlap)."""
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start, str(t.device)
    reach = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return start, start + (reach + 1) * t.element_size(), str(t.device)


def _overlap(a, b) -> bool:
    return a[2] == b[2] and a[0] < b[1] and b[0] < a[1] and a[0] != a[1]


def _bits(t):
    import torch
    t = t.detach()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    # contiguous first: a strided view (a column of a wider buffer) cannot be reinterpreted as bytes in place
    return t.contiguous().reshape(-1).view(torch.uint8)


def snapshot(output):
    """A private copy of every tensor of an output, taken the moment it arrives, with its strides (the check
    warns about a strided result; `clone` would make a column of a wider buffer contiguous)."""
    import torch
    from arena.taskdef.nested import map_leaves

    def copy(x):
        x = x.detach()
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
    return map_leaves(output, lambda x: copy(x) if isinstance(x, torch.Tensor) else x)


def same_bits(a, b) -> bool:
    import torch
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(_bits(a), _bits(b))


def differing_elements(a, b):
    """For two tensors of one shape and dtype: per element, whether their bits differ (NaN and -0.0 included)."""
    return (_bits(a) != _bits(b)).reshape(*a.shape, max(1, a.element_size())).any(-1)


class OutputAudit:
    """Checks on the outputs of one evaluator run that the reference comparison cannot see.

    For each request: `arrived(...)` snapshots the outputs and returns one error line per offending call
    (an output that is a view of a non-output input, the input buffer of another call, or shared with the
    output of another call in the same request); `unchanged_input(...)` tells whether an output still holds
    the pre-filled output buffer; `late_writes()` compares every watched output with its snapshot.
    """

    def __init__(self):
        self.watched = []       # (label, on_fail, live tensor, snapshot tensor)

    def arrived(self, labels: list[str], sent: list, outputs: list, on_fail) -> tuple[list, list[str]]:
        """Snapshots (what the reference is compared with) and alias errors, one per call at most.
        Every span is computed once: a 50-call sample compares 50 x 50 pairs (52 ms when each pair walked
        the nested data again)."""
        self._drop_reused(outputs)
        snaps = [snapshot(o) for o in outputs]
        errors = [""] * len(outputs)
        out_tensors = [[t for _, t in tensors_in(o, "output")] for o in outputs]
        out_spans = [[_span(t) for t in tensors] for tensors in out_tensors]
        in_tensors = [list(tensors_in(data)) for data in sent]
        in_spans = [[_span(t) for _, t in tensors] for tensors in in_tensors]
        for i, label in enumerate(labels):
            out_dtypes = {t.dtype for t in out_tensors[i]}
            for (path, t), span in zip(in_tensors[i], in_spans[i]):
                if t.dtype in out_dtypes:          # c: the output buffer, which it may return
                    continue
                if any(_overlap(span, s) for s in out_spans[i]):
                    errors[i] = f"the output of {label} is a view of the input {path}, not a result"
                    break
            for j in range(len(outputs)):
                if j == i or errors[i]:
                    continue
                if any(_overlap(a, b) for a in out_spans[i] for b in out_spans[j]):
                    errors[i] = f"the outputs of {label} and {labels[j]} are the same memory: each call must " \
                                f"return its own result (results replayed or batched across calls?)"
                elif any(_overlap(a, s) for a in in_spans[j] for s in out_spans[i]):
                    errors[i] = f"the output of {label} is an input buffer of {labels[j]} (results replayed " \
                                f"across calls?)"
        for label, live_tensors, snap in zip(labels, out_tensors, snaps):
            for live, (_, copy) in zip(live_tensors, tensors_in(snap, "output")):
                self.watched.append((label, on_fail, live, copy))
        return snaps, errors

    def _drop_reused(self, outputs):
        """A buffer returned again by a later request was rewritten by that call, not written late."""
        new = [_span(t) for o in outputs for _, t in tensors_in(o)]
        self.watched = [w for w in self.watched if not any(_overlap(_span(w[2]), s) for s in new)]

    def late_writes(self, keep: int = 64) -> list[tuple[str, object]]:
        """(label, on_fail) of every watched output that changed after it arrived; keeps the newest `keep`."""
        changed, still = [], []
        for entry in self.watched:
            label, on_fail, live, copy = entry
            if same_bits(live, copy):
                still.append(entry)
            elif label not in [c[0] for c in changed]:
                changed.append((label, on_fail))
        self.watched = still[-keep:]
        return changed


def _is_buffer_for(t, out) -> bool:
    """An input with the output's dtype and shape is its pre-filled buffer (c): returning it is allowed."""
    return t.dtype == out.dtype and tuple(t.shape) == tuple(out.shape)


def unchanged_input(original_data, output) -> str | None:
    """The path of an input the output still equals bit for bit (the untouched pre-filled c), or None.
    Call it before the reference runs: the reference writes into the original c."""
    import torch
    for _, out in tensors_in(output, "output"):
        if not isinstance(out, torch.Tensor):
            continue
        for path, t in tensors_in(original_data):
            if _is_buffer_for(t, out) and t.device == out.device and t.numel() > 0 and same_bits(t, out):
                return path
    return None


LATE_WRITE = "changed after custom_kernel returned: a late write (background thread or unsynchronized stream)"


# ---- times that cannot be honest -------------------------------------------------------------------------

def timing_flags(samples_ns: list[float], sol_us: float | None, wall_ns: list[float] | None = None,
                 drain_ns: list[float] | None = None, sync_ns: float | None = None,
                 empty_ns: float | None = None) -> list[str]:
    """Warnings for event times that cannot be honest (one line each).

    - below the task's speed of light (B200 at 1.5 GHz): impossible on any GPU we evaluate on;
    - the GPU kept working long after the call returned (drain) while the timed stream saw little: work
      escaped the timed stream (side stream, thread);
    - many calls measured no more than an empty timed window while others took far longer: one call did the
      work of several (super-batch) or results were replayed.
    """
    import statistics
    flags = []
    if not samples_ns:
        return flags
    median = statistics.median(samples_ns)
    if sol_us:
        below = sum(s < sol_us * 1e3 for s in samples_ns)
        if median < sol_us * 1e3:
            flags.append(f"median {median / 1e3:.3f} us is below the B200 speed of light {sol_us} us: "
                         f"the timing cannot be honest")
        elif below * 10 >= len(samples_ns):
            flags.append(f"{below} of {len(samples_ns)} timed calls ran faster than the B200 speed of light "
                         f"{sol_us} us: those calls did not do their work inside the timed window")
    if drain_ns:
        # The shortest drain: hidden work makes every call drain long, a scheduling hiccup only some
        # (an honest kernel once showed a 204 us median drain over 3 calls on an H100).
        drain = min(drain_ns) - (sync_ns or 0.0)
        if drain > 2 * median + 50e3:
            flags.append(f"the GPU kept working {drain / 1e3:.1f} us after custom_kernel returned, but the timed "
                         f"stream saw {median / 1e3:.1f} us per call: work escapes the timed stream (side stream "
                         f"or thread)")
    elif wall_ns and statistics.median(wall_ns) > 4 * median + 200e3:
        flags.append(f"event time {median / 1e3:.1f} us vs synchronized wall-clock "
                     f"{statistics.median(wall_ns) / 1e3:.1f} us per call: work may escape the timed stream")
    slowest = max(samples_ns)
    if len(samples_ns) >= 8 and slowest >= 0.5 * sum(samples_ns) and slowest >= 100 * median:
        # Without an empty window to compare (its cost varies with the host), the shape alone: one call held
        # most of the time and two orders of magnitude more than the typical call.
        flags.append(f"one of {len(samples_ns)} timed calls took {slowest / 1e3:.1f} us, "
                     f"{100 * slowest / sum(samples_ns):.0f}% of all timed time, the median "
                     f"{median / 1e3:.2f} us: one call doing the work of many (super-batch) or replayed results")
    elif empty_ns and len(samples_ns) >= 4:
        empty = sum(s <= 2 * empty_ns + 1000 for s in samples_ns)
        if empty * 4 >= len(samples_ns) and slowest > 4 * median and slowest >= 0.5 * sum(samples_ns):
            flags.append(f"{empty} of {len(samples_ns)} timed calls took no longer than an empty timed window "
                         f"({empty_ns / 1e3:.2f} us) while the slowest took {slowest / 1e3:.1f} us: one "
                         f"call doing the work of many (super-batch) or replayed results")
        elif median <= 1.2 * empty_ns + 500:
            flags.append(f"the median call took {median / 1e3:.2f} us, no longer than an empty timed window "
                         f"({empty_ns / 1e3:.2f} us): no GPU work inside the timed window (side stream, thread "
                         f"or cached result?)")
    return flags
