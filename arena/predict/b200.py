"""A submission's B200 time per benchmark case, predicted from what its emulated run issued on a Hopper GPU.

`eval.py predict` runs each case once under --emulate-blackwell; the emulation library counts what the kernels
issue (arena/blackwell/runtime.take_counts: tcgen05 MMAs and their multiply-adds, tensor TMA loads and their
bytes, CTAs, cluster and MMA shape). The model, in the order docs/b200_prediction.md argues it:

    time = per-call cost + max(DRAM time, the busiest SM's time)
    per-call cost      = CALL_US + the host work of direct CuTe DSL calls (their argument marshalling)
    DRAM time          = the case's compulsory bytes (A, B, their scale factors, C) / the B200's DRAM bandwidth
    busiest SM's time  = waves x (CTA fill + max(the CTA's MMA time, the CTA's TMA time))
    waves              = ceil(CTAs / 148 SMs), one CTA per SM (a tcgen05 CTA holds most of its SM's shared and
                         tensor memory)

Measured B200 figures set the rates (sources beside each constant); the per-call cost, the CTA fill and the
per-SM TMA rate are fitted on public per-shape B200 times (bench/prediction/, `calibration.tsv`). A call that ran
natively on the Hopper GPU (no MMA, scale copy, torch._scaled_mm or cuBLASLt FP4 matmul emulated: CUDA-core
GEMVs) is predicted from its own time there, timed as `benchmark` times it (`NativeTiming`):

    time = the case's DRAM floor on the B200 + (its time here - its DRAM floor here) x BEYOND_DRAM_RATIO

and a torch._scaled_mm call, or one of cuBLASLt's NVFP4 matmul, from cuBLASLt's public B200 times.

The counts come from the worker, which the submission controls: a prediction is advice to its author, never
part of a ranking.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

# ---- Measured B200 figures
SMS = 148                       # streaming multiprocessors of a B200 (torch.cuda.get_device_properties on one)
# gau-nernst/gpu-mode-kernels nvidia/README.md, "realistic SOL" measured on a Modal B200: 5914.8 GB/s of DRAM
# bandwidth and 5797 TFLOPS of NVFP4 tcgen05 math.
DRAM_BYTES_PER_US = 5914.8e9 / 1e6
MMA_PER_SM_PER_US = 5797e12 / 2 / SMS / 1e6      # multiply-adds per SM per µs (block-scaled FP4)

# ---- Fitted on the first half of bench/prediction/calibration.tsv (`bench/prediction/calibrate.py fit` prints them)
CALL_US = 6.0                   # the competition's per-call cost: Python, the launches, the first wave's start
CTA_FILL_US = 4.0               # a CTA's pipeline fill (first loads from DRAM) and its epilogue
TMA_BYTES_PER_SM_PER_US = 150e3  # what one SM's TMA loads sustain from L2 (bytes per µs)
ROUND_TRIP_US = 0.5             # a serial k-loop's wait per commit: TMA in, MMA, commit, wait, again
RANGE = (0.82, 7.70)            # prediction x these: the 10th and 90th percentiles of logged / predicted, fitting half

# A direct call of a compiled CuTe DSL function (not through TVM FFI) marshals its arguments in Python before the
# launch: 13.5 µs of host time a call with 5 argument objects reused, 20.8 µs with them made for the call, 3.8 µs
# for the same launch with its arguments prepared, on a B200 host (NVIDIA/cutlass issue 3418, a trivial kernel,
# median of 5000 calls). The call's cost beyond a launch from compiled code, and each argument object made for it.
DSL_CALL_US = 13.5 - 3.8
DSL_ARGUMENT_US = 5.9 / 5      # the isolated figure for making the 5 argument objects

# torch._scaled_mm (cuBLASLt's NVFP4 GEMM) on a B200, per benchmark shape: gau-nernst/gpu-mode-kernels
# nvidia/nvfp4_gemm/README.md (the `torch._scaled_mm` submission) and nvidia/nvfp4_dual_gemm/README.md (the
# reference, two calls). Keys: (m, n, k, l) of a gemm call.
SCALED_MM_US = {(128, 7168, 16384, 1): 22.4, (128, 4096, 7168, 1): 12.5, (128, 7168, 2048, 1): 8.49}
SCALED_MM_PAIR_US = {(256, 4096, 7168, 1): 40.6, (512, 4096, 7168, 1): 43.2, (256, 3072, 4096, 1): 32.9,
                     (512, 3072, 7168, 1): 41.4}

# ---- A call with no emulated MMA, timed on the Hopper GPU (fitted on the CUDA-core GEMVs of the first half)
# A call far from its DRAM floor here (a small share of this GPU's bandwidth) is bound by latency and issue, which
# a B200 SM runs at about the same speed (the fitted ratio is near 132 / 148, the SM counts); one nearer the floor
# is bound by memory, which a B200 moves much faster.
LATENCY_BOUND_SHARE = 0.07      # below this share of the DRAM bandwidth here, a call counts as latency-bound
BEYOND_DRAM_RATIO = 0.35        # B200 / this GPU for the time a kernel takes beyond its DRAM floor
LATENCY_BOUND_RATIO = 0.85      # ... for a latency-bound one
NATIVE_RANGE = (0.76, 4.81)      # prediction x these: the 10th and 90th percentiles of logged / predicted, fitting half

COUNT_LIMIT = 1 << 45           # a count above this is not one an honest run of these shapes issues


@dataclass(frozen=True)
class WorkCounts:
    """What one call's emulated kernels issued (arena/blackwell/runtime.take_counts)."""
    mmas: int = 0
    mma_work: int = 0           # multiply-adds: sum of M*N*K over the MMAs (a CTA pair's counted once)
    pair_mmas: int = 0
    tma_loads: int = 0
    tma_bytes: int = 0
    grid_ctas: int = 0
    cta_threads: int = 0
    cluster_ctas: int = 0
    allocs: int = 0
    max_n: int = 0
    max_m: int = 0
    commits: int = 0
    scale_copies: int = 0
    dynamic_smem: int = 0
    scaled_mm_calls: int = 0
    cublaslt_fp4_calls: int = 0     # cuBLASLt's NVFP4 matmul called directly (emulated by arena/blackwell)
    mma_sites: int = 0          # tcgen05.mma instructions in the emulated modules built so far (not a count of issues)
    dsl_calls: int = 0          # direct calls of compiled CuTe DSL functions (host work: DSL_CALL_US each)
    dsl_arguments: int = 0      # ... and the argument objects (make_ptr, from_dlpack) made for them

    @classmethod
    def from_reply(cls, given) -> "WorkCounts":
        """The counts a worker sent, checked: a dict of the known names with whole numbers in range."""
        if not isinstance(given, dict):
            raise ValueError("the work counts are not a mapping")
        values = {}
        for name in cls.__dataclass_fields__:
            value = given.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < COUNT_LIMIT:
                raise ValueError(f"the work count {name!r} is not a whole number in [0, 2^45): {value!r}")
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class Prediction:
    b200_us: float | None       # None: not predicted (`rests_on` says why)
    low_us: float | None
    high_us: float | None
    rests_on: str               # what the figure is made from, in words
    bound: str = ""             # DRAM, MMA, TMA or per-call cost: the term that sets it
    call_us: float = 0.0        # the per-call cost: CALL_US and a CuTe DSL call's host work
    dram_us: float = 0.0
    sm_us: float = 0.0          # the busiest SM: waves x (fill + max(MMA, TMA))
    mma_us_per_cta: float = 0.0
    tma_us_per_cta: float = 0.0
    waves: int = 0
    ctas: int = 0
    dram_bytes: int = 0
    tma_bytes_per_cta: float = 0.0
    counts: dict | None = None  # the WorkCounts it was made from
    hopper_us: float | None = None      # a call that ran natively: its median time on this GPU
    here_dram_gbps: float | None = None  # ... and this GPU's measured DRAM bandwidth

    def as_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class NativeTiming:
    """A call that issued no emulated MMA, timed on this Hopper GPU as `benchmark` times it."""
    median_us: float            # the median of the timed calls
    dram_gbps: float            # this GPU's DRAM bandwidth, measured in the same run (arena/predict/bandwidth.py)

    def __post_init__(self):
        if not (math.isfinite(self.median_us) and self.median_us > 0 and math.isfinite(self.dram_gbps)
                and self.dram_gbps > 0):
            raise ValueError(f"a native timing needs a positive time and bandwidth, got {self}")


def _shapes(args: dict) -> list[tuple[int, int, int, int]]:
    """(m, n, k, l) of each GEMM a case asks for: a group's, a gemv's (n = 1), or the one of gemm and dual GEMM."""
    if isinstance(args.get("m"), (list, tuple)):
        return [(int(m), int(n), int(k), 1) for m, n, k in zip(args["m"], args["n"], args["k"])]
    return [(int(args["m"]), int(args.get("n", 1)), int(args["k"]), int(args.get("l", 1)))]


def dram_bytes(task: str, args: dict) -> int:
    """The bytes a case must move at least: FP4 A and B (half a byte an element), one FP8 scale per 16 of them,
    and the FP16 result; a dual GEMM reads two B and writes one C."""
    total = 0
    dual = "dual" in task
    for m, n, k, l in _shapes(args):
        bs = 2 if dual else 1
        total += l * (m * k // 2 + bs * n * k // 2 + (m + bs * n) * k // 16 + 2 * m * n)
    return total


def _with_range(us: float, rests_on: str, **parts) -> Prediction:
    return Prediction(round(us, 3), round(us * RANGE[0], 3), round(us * RANGE[1], 3), rests_on, **parts)


def runs_natively(counts: WorkCounts) -> bool:
    """No tcgen05 MMA, scale copy or emulated NVFP4 library matmul (torch._scaled_mm, cuBLASLt), and no MMA in
    any emulated module: the call's kernels ran at about this GPU's own speed (what else is emulated, a
    tensor-memory alloc, a commit, an FP4 conversion, is a few instructions)."""
    return not (counts.mmas or counts.scale_copies or counts.scaled_mm_calls or counts.cublaslt_fp4_calls
                or counts.mma_sites)


def predict(task: str, args: dict, counts: WorkCounts | None, native: NativeTiming | None = None) -> Prediction:
    """The B200 time of one call of the case `args` of `task`, from the counts of its emulated call (and its time
    on this GPU when it ran natively)."""
    prediction = _predict(task, args, counts, native)
    return replace(prediction, counts=asdict(counts)) if counts is not None else prediction


def _from_native(moved: int, dram_us: float, native: NativeTiming) -> Prediction:
    here_floor_us = moved / (native.dram_gbps * 1e3)
    share = here_floor_us / native.median_us
    latency_bound = share < LATENCY_BOUND_SHARE
    ratio = LATENCY_BOUND_RATIO if latency_bound else BEYOND_DRAM_RATIO
    us = dram_us + max(0.0, native.median_us - here_floor_us) * ratio
    rests_on = (f"no emulated MMA: the call ran natively here in {native.median_us:.2f} µs (median); its "
                f"DRAM floor at this GPU's measured {native.dram_gbps:.0f} GB/s ({here_floor_us:.2f} µs) becomes the "
                f"B200's ({dram_us:.2f} µs) and the rest is scaled by {ratio} (it moved {100 * share:.0f} % of the "
                f"bandwidth here: {'latency' if latency_bound else 'memory'}-bound)")
    return Prediction(round(us, 3), round(us * NATIVE_RANGE[0], 3), round(us * NATIVE_RANGE[1], 3), rests_on,
                      bound="time here", dram_us=round(dram_us, 3), dram_bytes=moved,
                      hopper_us=round(native.median_us, 3), here_dram_gbps=round(native.dram_gbps, 1))


def _predict(task: str, args: dict, counts: WorkCounts | None, native: NativeTiming | None) -> Prediction:
    moved = dram_bytes(task, args)
    dram_us = moved / DRAM_BYTES_PER_US
    if counts is None:
        return Prediction(None, None, None, "no counts: the call did not run under the emulation")
    if native is not None and runs_natively(counts):
        return _from_native(moved, dram_us, native)
    library = "torch._scaled_mm" if counts.scaled_mm_calls else "cuBLASLt's NVFP4 matmul" \
        if counts.cublaslt_fp4_calls else ""
    if counts.mmas == 0 and counts.mma_sites and not library:
        return Prediction(None, None, None, f"not predicted: the emulated modules hold {counts.mma_sites} tcgen05.mma "
                          "instructions and none was counted, so this call's counts are out of reach (the library that "
                          "holds them was not read: a CuTe DSL kernel's through TVM FFI, for one)")
    if counts.mmas == 0:
        if library:
            shapes = _shapes(args)
            table = SCALED_MM_PAIR_US if "dual" in task else SCALED_MM_US
            if len(shapes) == 1 and shapes[0] in table:
                return _with_range(table[shapes[0]], f"{library}: cuBLASLt's public B200 time for this shape",
                                   bound="cuBLASLt", dram_bytes=moved)
            return Prediction(None, None, None, f"{library}: no public B200 time for this shape")
        call_us, host = _call_cost(counts)
        us = call_us + dram_us
        return _with_range(us, "no tcgen05 MMA issued: the case's DRAM bytes at the B200's bandwidth (the "
                           "kernel's own efficiency is not seen)" + host, bound="DRAM", call_us=call_us,
                           dram_us=round(dram_us, 3), dram_bytes=moved)
    ctas = max(counts.allocs, counts.grid_ctas, 1)
    waves = math.ceil(ctas / SMS)
    mma_us = counts.mma_work / ctas / MMA_PER_SM_PER_US
    # A TMA load whose box bytes read as zero (a map of a Blackwell-only FP4 type, as CuTe DSL encodes them, keeps
    # no byte count where the library reads it) counts as if no TMA were counted.
    measured_tma = counts.tma_loads and counts.tma_bytes
    loaded = counts.tma_bytes if measured_tma else _operand_bytes(counts)
    tma_us = loaded / ctas / TMA_BYTES_PER_SM_PER_US
    # A commit after every MMA or two, waited on before the next loads (no pipeline): each costs a round trip.
    serial = counts.commits * 2 >= counts.mmas
    trips_us = counts.commits / ctas * ROUND_TRIP_US if serial else 0.0
    sm_us = waves * (CTA_FILL_US + max(mma_us, tma_us, trips_us))
    call_us, host = _call_cost(counts)
    us = call_us + max(dram_us, sm_us)
    bound = "DRAM" if dram_us >= sm_us else "serial k-loop" if trips_us >= max(mma_us, tma_us) else \
        "MMA" if mma_us >= tma_us else "TMA"
    source = "tensor TMA loads" if measured_tma else \
        "tensor TMA loads of unread size: the MMAs' operand bytes" if counts.tma_loads else \
        "no tensor TMA counted: the MMAs' operand bytes"
    return _with_range(us, f"{counts.mmas} tcgen05 MMAs over {ctas} CTAs; {source}{host}", bound=bound,
                       call_us=round(call_us, 3), dram_us=round(dram_us, 3), sm_us=round(sm_us, 3),
                       mma_us_per_cta=round(mma_us, 3), tma_us_per_cta=round(tma_us, 3), waves=waves, ctas=ctas,
                       dram_bytes=moved, tma_bytes_per_cta=round(loaded / ctas, 1))


def _call_cost(counts: WorkCounts) -> tuple[float, str]:
    """The per-call cost in µs (CALL_US and the host work of direct CuTe DSL calls) and, when there is such work,
    a clause that says so."""
    host_us = counts.dsl_calls * DSL_CALL_US + counts.dsl_arguments * DSL_ARGUMENT_US
    if not host_us:
        return CALL_US, ""
    return CALL_US + host_us, (f"; {counts.dsl_calls} direct CuTe DSL call(s) with {counts.dsl_arguments} argument "
                               f"object(s) made for them: {host_us:.1f} µs of host work (B200 host, cutlass#3418)")


def _operand_bytes(counts: WorkCounts) -> float:
    """Bytes the MMAs read when no tensor TMA brought them (cp.async, plain loads): each MMA of the widest shape
    reads (M + N) x K FP4 elements and their scales, 9/16 of a byte each."""
    m, n = max(counts.max_m, 64), max(counts.max_n, 8)
    return counts.mma_work * (m + n) / (m * n) * 9 / 16

