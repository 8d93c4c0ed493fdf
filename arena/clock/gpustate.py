"""The GPU's clocks, power and slowdown reasons around a timed region, read through NVML.

A time is only comparable with another taken at the same clocks. The evaluator reads the GPU after every
timed request of a benchmark case and keeps what changed: the SM clock's range, the power and temperature at
the end, the throttle reasons seen, and how long NVML counted the clocks held down by the power or thermal
limit during the case. Without NVML (no pynvml, no NVIDIA driver, the CPU) nothing is read and nothing is
reported: the figures are still valid, only unannotated.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# NVML's clocks-throttle-reason bits, named as nvidia-smi names them.
REASONS = {0x1: "idle", 0x2: "app-clocks", 0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x10: "sync-boost",
           0x20: "sw-thermal", 0x40: "hw-thermal", 0x80: "hw-power-brake", 0x100: "display-clocks"}
# Reasons that mean the clocks were pulled down by power or heat (idle and app-clocks are not a slowdown).
SLOWDOWN = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
CLOCK_MOVE_WARN = 0.05      # an SM clock range wider than 5 % of its top makes figures hard to compare
LIMITED_WARN = 0.05         # the same for clocks held down by power or heat for 5 % of the case's time


@dataclass
class Reading:
    sm_mhz: int
    mem_mhz: int
    power_w: float
    temp_c: int
    reasons: int
    limited_ns: int          # NVML's running count of time held down by the power or thermal limit


@dataclass
class CaseClocks:
    """What the GPU did during one case's timing (what the JSON's `timing.gpu` holds)."""
    sm_mhz_min: int
    sm_mhz_max: int
    mem_mhz: int
    power_w: float
    temp_c: int
    reasons_seen: list = field(default_factory=list)
    limited_ms: float = 0.0
    window_ms: float = 0.0

    def warnings(self) -> list[str]:
        found = []
        if self.sm_mhz_max and (self.sm_mhz_max - self.sm_mhz_min) > CLOCK_MOVE_WARN * self.sm_mhz_max:
            found.append(f"the SM clock moved between {self.sm_mhz_min} and {self.sm_mhz_max} MHz during timing: "
                         f"figures from this run compare poorly with others")
        slowed = [r for r in self.reasons_seen if r in reason_names(SLOWDOWN)]
        if slowed or (self.window_ms and self.limited_ms > LIMITED_WARN * self.window_ms):
            found.append(f"the GPU was slowed during timing ({', '.join(slowed) or 'power/thermal limit'}; "
                         f"{self.limited_ms:.0f} of {self.window_ms:.0f} ms held down): times read high")
        return found


def reason_names(bits: int) -> list[str]:
    return [name for bit, name in REASONS.items() if bits & bit]


class GpuMonitor:
    """NVML handle of one CUDA device; `read()` is cheap (tens of microseconds)."""

    def __init__(self, nvml, handle):
        self._nvml, self._handle = nvml, handle

    @classmethod
    def open(cls, cuda_index: int) -> "GpuMonitor | None":
        try:
            import pynvml
            import torch
            pynvml.nvmlInit()
            try:      # the NVML index of this CUDA device, honouring CUDA_VISIBLE_DEVICES
                index = torch.cuda._get_nvml_device_index(cuda_index)
            except Exception:
                index = cuda_index
            monitor = cls(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
            monitor.read()
            return monitor
        except Exception:
            return None

    def _limited_ns(self) -> int:
        total = 0
        for policy in ("NVML_PERF_POLICY_POWER", "NVML_PERF_POLICY_THERMAL"):
            try:
                total += self._nvml.nvmlDeviceGetViolationStatus(self._handle,
                                                                  getattr(self._nvml, policy)).violationTime
            except Exception:
                pass
        return total

    def read(self) -> Reading:
        nvml, handle = self._nvml, self._handle
        try:
            power = nvml.nvmlDeviceGetPowerUsage(handle) / 1e3
        except Exception:
            power = 0.0
        return Reading(sm_mhz=nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
                       mem_mhz=nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM), power_w=power,
                       temp_c=nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
                       reasons=nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
                       limited_ns=self._limited_ns())


def summarize(readings: list[Reading], window_ms: float) -> CaseClocks | None:
    """The first reading is taken before the timing, the others after each timed request."""
    if len(readings) < 2:
        return None
    after = readings[1:]
    seen = 0
    for r in after:
        seen |= r.reasons
    return CaseClocks(sm_mhz_min=min(r.sm_mhz for r in after), sm_mhz_max=max(r.sm_mhz for r in after),
                      mem_mhz=after[-1].mem_mhz, power_w=round(after[-1].power_w, 1), temp_c=after[-1].temp_c,
                      reasons_seen=reason_names(seen & ~0x1),
                      limited_ms=round(max(0, readings[-1].limited_ns - readings[0].limited_ns) / 1e6, 3),
                      window_ms=round(window_ms, 1))
