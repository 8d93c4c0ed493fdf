"""Unit tests of arena/integrity.py and arena/static_checks.py (fast, CPU, no eval.py subprocess except the
re-exec test, which must be a real process)."""
import os
import subprocess
import sys
import time

import pytest
import torch

from arena import integrity, static_checks
from tests.evalrun import ROOT


# ---- static checks -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("code,line", [
    ("stream", "s = torch.cuda.Stream()"),
    ("stream", "# no STREAMs here"),
    ("scaled-mm", "return torch._scaled_mm(a, b, sa, sb)"),
    ("library-gemm", "c = torch.matmul(a, b)"),
    ("library-gemm", "c = torch.mm(a, b.T)"),
    ("pointer-cache", "key = a.data_ptr()"),
    ("pointer-cache", "cache[id(data)] = out"),
    ("pointer-cache", "if c._version == 0:"),
    ("cuda-graph", "g = torch.cuda.CUDAGraph()"),
    ("cuda-graph", "graph.replay()"),
    ("introspection", "frame = sys._getframe(1)"),
    ("introspection", "for o in gc.get_objects():"),
    ("proc", "open(f'/proc/{os.getppid()}/environ')"),
    ("ctypes-cuda", "lib = ctypes.CDLL('libcudart.so')"),
    ("harness-patch", "time.perf_counter = fake"),
    ("harness-patch", "torch.cuda.Event.elapsed_time = lambda s, e: 0.001"),
    ("harness-patch", "import arena.timing"),
    ("threads", "threading.Thread(target=f).start()"),
    ("environment", "seed = os.environ['POPCORN_SEED']"),
    ("event-timing-off", "e = torch.cuda.Event(enable_timing=False)"),
])
def test_each_static_rule_fires(code, line):
    found = static_checks.scan_text("x = 1\n" + line + "\n")
    assert code in [f.code for f in found]
    assert [f for f in found if f.code == code][0].lines == [2]


def test_an_honest_submission_raises_no_static_warning():
    assert static_checks.scan(os.path.join(ROOT, "submissions", "torch_reference.py")) == []


def test_the_flagship_submission_never_contains_the_word_stream():
    """The competition rejects any submission whose text contains `stream` (any case, comments too)."""
    path = os.path.join(ROOT, "submission.py")
    if not os.path.exists(path):
        pytest.skip("no submission.py yet")
    assert "stream" not in open(path).read().lower()


# ---- timing flags ------------------------------------------------------------------------------------------

def test_honest_times_raise_no_flag():
    samples = [10_000.0 + 50 * i for i in range(20)]
    assert integrity.timing_flags(samples, sol_us=8.994, wall_ns=[40_000.0], drain_ns=[15_000.0] * 3,
                                  sync_ns=5_000.0, empty_ns=3_000.0) == []


def test_below_speed_of_light_is_flagged():
    flags = integrity.timing_flags([2_000.0] * 20, sol_us=8.994)
    assert len(flags) == 1 and "below the B200 speed of light 8.994 us" in flags[0]


def test_some_calls_below_speed_of_light_are_flagged():
    flags = integrity.timing_flags([2_000.0] * 4 + [20_000.0] * 16, sol_us=8.994)
    assert "4 of 20 timed calls ran faster than the B200 speed of light" in flags[0]


def test_work_escaping_the_timed_stream_is_flagged():
    """Side stream: the event pair sees ~3 us, but the GPU drains for 1.4 ms after the call returns."""
    flags = integrity.timing_flags([3_000.0] * 20, sol_us=None, drain_ns=[1_400_000.0] * 3, sync_ns=6_000.0)
    assert len(flags) == 1 and "work escapes the timed stream (side stream or thread)" in flags[0]


def test_super_batch_pattern_is_flagged():
    samples = [400_000.0] + [3_100.0] * 19          # one call did everything, the rest an empty window
    flags = integrity.timing_flags(samples, sol_us=None, empty_ns=3_000.0)
    assert len(flags) == 1 and "19 of 20 timed calls took no longer than an empty timed window" in flags[0]


def test_one_slow_outlier_is_not_a_super_batch():
    samples = [400_000.0] + [20_000.0] * 19
    assert integrity.timing_flags(samples, sol_us=None, empty_ns=3_000.0) == []


# ---- output audit ------------------------------------------------------------------------------------------

class Owner:
    passed, error, details = True, "", []


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 255, (8, 4, 1), dtype=torch.uint8, generator=g),
            torch.randn(8, 16, 1, generator=g).half())


def test_audit_accepts_c_and_fresh_tensors_and_snapshots_them():
    audit, sent = integrity.OutputAudit(), [_data(1), _data(2)]
    outputs = [sent[0][1], torch.zeros(8, 16, 1, dtype=torch.float16)]
    snaps, errors = audit.arrived(["call 0", "call 1"], sent, outputs, Owner())
    assert errors == ["", ""]
    assert snaps[0] is not outputs[0] and torch.equal(snaps[0], outputs[0])
    assert audit.late_writes() == []


def test_audit_names_an_output_living_in_another_input():
    sent = [_data()]
    view = sent[0][0].view(-1)[:16].view(torch.float16).view(8, 1, 1)     # inside a, the uint8 input
    _, errors = integrity.OutputAudit().arrived(["the call"], sent, [view], Owner())
    assert errors == ["the output of the call is a view of the input data[0], not a result"]


def test_audit_names_outputs_shared_between_calls_and_other_calls_buffers():
    sent, shared = [_data(1), _data(2), _data(3)], torch.zeros(8, 16, 1, dtype=torch.float16)
    _, errors = integrity.OutputAudit().arrived(["call 0", "call 1", "call 2"], sent,
                                                [shared, shared, sent[0][1]], Owner())
    assert errors[0].startswith("the outputs of call 0 and call 1 are the same memory")
    assert "is an input buffer of call 0" in errors[2] or "are the same memory" in errors[2]


def test_audit_sees_a_write_after_arrival_but_not_a_reused_buffer():
    audit, owner = integrity.OutputAudit(), Owner()
    out = torch.zeros(8, 16, 1, dtype=torch.float16)
    audit.arrived(["call 0"], [_data()], [out], owner)
    out[0, 0, 0] = 1.0                                          # lands after the parent took its snapshot
    assert audit.late_writes() == [("call 0", owner)]
    audit2 = integrity.OutputAudit()
    audit2.arrived(["case 0"], [_data()], [out], owner)
    out.fill_(2.0)                                              # the next call rewrites its own buffer ...
    audit2.arrived(["case 1"], [_data()], [out], owner)         # ... and returns it again: not a late write
    assert audit2.late_writes() == []


def test_unchanged_input_finds_the_untouched_c_only():
    data = _data()
    assert integrity.unchanged_input(data, data[1].clone()) == "data[1]"
    assert integrity.unchanged_input(data, data[1] + 1) is None


# ---- the tripwire and the seed hand-over ------------------------------------------------------------------

def test_guard_names_a_replaced_timer_and_is_quiet_otherwise():
    guard = integrity.HarnessGuard()
    guard.check("now")
    real = time.perf_counter_ns
    try:
        time.perf_counter_ns = lambda: 0
        with pytest.raises(integrity.IntegrityViolation, match="replaced harness functions inside: "
                                                               "time.perf_counter_ns"):
            guard.check("inside")
    finally:
        time.perf_counter_ns = real
    guard.check("after restoring")


def test_reexec_moves_the_seed_out_of_the_process_environment(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from arena.integrity import reexec_without_secret, take_handed_seed\n"
        "reexec_without_secret()\n"
        "environ = open('/proc/self/environ', 'rb').read()\n"
        "print(take_handed_seed(), b'424242' in environ, 'POPCORN_SEED' in os.environ)\n")
    out = subprocess.run([sys.executable, str(script)], env={**os.environ, "POPCORN_SEED": "424242"},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["424242", "False", "False"], out.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process controls")
def test_sweep_kills_adopted_orphans(tmp_path):
    script = tmp_path / "orphans.py"
    script.write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from arena import integrity\n"
        "integrity.harden_parent()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60); os._exit(0)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print(len(integrity._children()), integrity.sweep_children(), len(integrity._children()))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    adopted, killed, left = out.stdout.split()
    assert int(adopted) >= 1 and int(killed) >= 1 and left == "0", out.stderr


def test_no_work_inside_the_timed_window_is_flagged():
    flags = integrity.timing_flags([3_100.0] * 20, sol_us=None, empty_ns=3_000.0)
    assert len(flags) == 1 and "no GPU work inside the timed window" in flags[0]


def test_slices_of_one_output_pool_are_distinct_results():
    """A submission may return disjoint slices of one preallocated buffer: not the same memory."""
    pool = torch.zeros(2, 8, 16, 1, dtype=torch.float16)
    sent = [_data(1), _data(2)]
    _, errors = integrity.OutputAudit().arrived(["call 0", "call 1"], sent, [pool[0], pool[1]], Owner())
    assert errors == ["", ""]


def test_replies_carry_tensors_but_no_code():
    from multiprocessing.reduction import ForkingPickler
    t = torch.randn(4, 6).half().t()
    reply = {"outputs": [t, [t[0], torch.zeros(3, dtype=torch.float8_e4m3fn)]], "times_ns": [1.0], "x": (1, "a")}
    back = integrity.safe_loads(bytes(ForkingPickler.dumps(reply)))
    assert torch.equal(back["outputs"][0], t) and back["outputs"][0].stride() == t.stride()
    with pytest.raises(integrity.ForbiddenReply, match=r"forbidden object \(posix.system\)"):
        integrity.safe_loads(bytes(ForkingPickler.dumps({"outputs": [_Evil()]})))


class _Evil:
    def __reduce__(self):
        return (os.system, ("true",))


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="root-only rule")
def test_no_capability_drop_where_the_worker_would_lose_its_jit_folder(tmp_path, monkeypatch):
    submission = os.path.join(ROOT, "submissions", "torch_reference.py")
    assert integrity.harden_blockers(submission) == [] or "TORCH_EXTENSIONS_DIR" in os.environ
    folder = tmp_path / "someone_else"
    folder.mkdir()
    os.chown(folder, 4321, 4321)
    folder.chmod(0o700)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(folder / "ext"))
    blockers = integrity.harden_blockers(submission)
    assert blockers == [f"{folder} (owner uid 4321, mode 700)"]


def test_a_scheduling_hiccup_in_some_drains_is_not_an_escape():
    """Seen on an H100: the honest kernel (26.8 us) once drained 204 us in the middle of 3 wall-clock calls."""
    samples = [26_800.0] * 200
    assert integrity.timing_flags(samples, sol_us=1.333, drain_ns=[20_000.0, 204_500.0, 210_000.0, 18_000.0, 25_000.0],
                                  sync_ns=6_000.0) == []
    flags = integrity.timing_flags(samples, sol_us=1.333, drain_ns=[2_100_000.0] * 5, sync_ns=6_000.0)
    assert any("escapes the timed stream" in f for f in flags)
