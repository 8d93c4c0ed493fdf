"""The parent's clock under the ranked figure (arena/clock/parent_clock.py) and the masked window it rests on
(arena/clock/masking.py): forged totals are refused, honest ones pass, the keystream hides and restores inputs, the
digest needs every output bit."""
import torch

from arena.clock import masking
from arena.clock.parent_clock import SPIN_CAP_US, SPIN_FLOOR_US, ClockFloor, window_spin_us


def _floor(device: str, reported_share: float, windows: int = 20, window_ns: float = 1e6,
           clean_ns: float = 3e6, jitter: float = 0.0) -> ClockFloor:
    floor = ClockFloor(device)
    for i in range(windows):
        wobble = jitter * (1 if i % 2 else -1)
        floor.add(50, clean_ns + window_ns + wobble, clean_ns - wobble, reported_share * window_ns)
    return floor


def test_an_honest_total_passes_and_a_forged_fifth_is_refused():
    assert _floor("cuda", 1.0).problem() == ""
    assert _floor("cuda", 0.95).problem() == ""
    message = _floor("cuda", 0.2).problem()
    assert "the worker reported 4.00 us per call" in message and "own clock saw 20.00 us per call" in message


def test_a_gpu_forgery_gains_at_most_the_tolerance_when_the_clock_is_quiet():
    assert _floor("cuda", 0.88).problem() != ""           # 12 % below the parent's clock
    assert abs(_floor("cuda", 1.0).bound_share() - 0.10 - 10e3 / 1e6) < 1e-9


def test_the_clean_windows_spread_widens_the_allowance_and_says_so():
    quiet, noisy = _floor("cuda", 1.0), _floor("cuda", 1.0, jitter=0.1e6)
    assert noisy.bound_share() > quiet.bound_share() + 0.05
    assert _floor("cuda", 0.8, jitter=0.1e6).problem() == ""      # within the measured noise
    assert _floor("cuda", 0.2, jitter=0.1e6).problem() != ""


def test_the_cpu_allows_a_third_and_no_more():
    assert _floor("cpu", 0.7, window_ns=100e6).problem() == ""
    assert _floor("cpu", 0.5, window_ns=100e6).problem() != ""
    assert _floor("cpu", 0.33, window_ns=100e6).problem() != ""   # a clock running at a third of the speed


def test_the_work_ahead_covers_the_hosts_enqueue_and_is_capped():
    assert window_spin_us(None, 1, 50, True) == SPIN_FLOOR_US
    assert window_spin_us(10e3, 1, 50, True) == SPIN_FLOOR_US + 2 * 10 * 50         # 10 us a call, 50 calls
    assert window_spin_us(10e3 * 20, 20, 20, False) == SPIN_FLOOR_US + 2 * 10        # per call: one call's worth
    assert window_spin_us(1e12, 1, 50, True) == SPIN_CAP_US


def _storages(*sizes):
    return [torch.arange(n, dtype=torch.uint8).untyped_storage() for n in sizes]


def test_the_keystream_hides_every_whole_word_and_restores_it():
    storages = _storages(4096, 64, 13)
    before = [bytes(s) for s in storages]
    masking.Keystream(storages).apply(12345, unmask=False)
    after = [bytes(s) for s in storages]
    assert after[0] != before[0] and after[1] != before[1]
    assert after[2][:8] != before[2][:8] and after[2][8:] == before[2][8:]   # the 5-byte tail stays as it is
    masking.Keystream(storages).apply(12345, unmask=True)
    assert [bytes(s) for s in storages] == before


def test_another_key_does_not_unmask():
    storages = _storages(1024)
    before = bytes(storages[0])
    masking.Keystream(storages).apply(1, unmask=False)
    masking.Keystream(storages).apply(2, unmask=True)
    assert bytes(storages[0]) != before


def test_the_digest_needs_every_bit_and_ignores_the_layout():
    a = torch.randn(64, 48).half()
    flipped = a.clone()
    flipped.view(torch.int16)[17, 3] ^= 1
    assert masking.digest([a]) == masking.digest([a.clone()]) != masking.digest([flipped])
    strided = a.t()                          # a view with other strides digests its values in its own order
    assert masking.digest([strided]) == masking.digest([strided.contiguous()])


def test_scratch_is_laid_out_as_the_outputs_it_stands_for():
    out = torch.zeros(128, 256, 1, dtype=torch.float16).permute(1, 0, 2)
    (scratch,) = masking.scratch_like([masking.layout_of(out)], "cpu")
    assert scratch.shape == out.shape and scratch.stride() == out.stride() and scratch.dtype == out.dtype
