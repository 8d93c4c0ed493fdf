"""Unit tests of arena/audit/ (harness_guard.py, reply_audit.py, static_checks.py): fast, CPU, no eval.py
subprocess except the re-exec test, which must be a real process."""
import os
import time

import pytest
import torch

from arena.audit import harness_guard, reply_audit, static_checks
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
    ("harness-patch", "import arena.clock.timing"),
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


def test_popcorn_cli_directives_are_not_environment_reads():
    header = "#!POPCORN leaderboard nvfp4_gemm\n#!POPCORN gpu B200\nimport torch\n"
    assert static_checks.scan_text(header) == []
    assert [f.code for f in static_checks.scan_text(header + "x = 'POPCORN_SEED'\n")] == ["environment"]


def test_the_flagship_submission_never_contains_the_word_stream():
    """The competition rejects any submission whose text contains `stream` (any case, comments too)."""
    path = os.path.join(ROOT, "submission.py")
    if not os.path.exists(path):
        pytest.skip("no submission.py yet")
    assert "stream" not in open(path).read().lower()


# ---- timing flags ------------------------------------------------------------------------------------------

def test_honest_times_raise_no_flag():
    samples = [10_000.0 + 50 * i for i in range(20)]
    assert reply_audit.timing_flags(samples, sol_us=8.994, wall_ns=[40_000.0], drain_ns=[15_000.0] * 3,
                                  sync_ns=5_000.0, empty_ns=3_000.0) == []


def test_below_speed_of_light_is_flagged():
    flags = reply_audit.timing_flags([2_000.0] * 20, sol_us=8.994)
    assert len(flags) == 1 and "below the B200 speed of light 8.994 us" in flags[0]


def test_some_calls_below_speed_of_light_are_flagged():
    flags = reply_audit.timing_flags([2_000.0] * 4 + [20_000.0] * 16, sol_us=8.994)
    assert "4 of 20 timed calls ran faster than the B200 speed of light" in flags[0]


def test_work_escaping_the_timed_stream_is_flagged():
    """Side stream: the event pair sees ~3 us, but the GPU drains for 1.4 ms after the call returns."""
    flags = reply_audit.timing_flags([3_000.0] * 20, sol_us=None, drain_ns=[1_400_000.0] * 3, sync_ns=6_000.0)
    assert len(flags) == 1 and "work escapes the timed stream (side stream or thread)" in flags[0]


def test_super_batch_pattern_is_flagged():
    samples = [200_000.0] + [3_100.0] * 19          # one call did everything, the rest an empty window
    flags = reply_audit.timing_flags(samples, sol_us=None, empty_ns=3_000.0)
    assert len(flags) == 1 and "19 of 20 timed calls took no longer than an empty timed window" in flags[0]
    samples = [400_000.0] + [3_100.0] * 19          # 129x the median: the shape alone says it
    flags = reply_audit.timing_flags(samples, sol_us=None, empty_ns=3_000.0)
    assert len(flags) == 1 and "one call doing the work of many (super-batch)" in flags[0]


def test_super_batch_is_flagged_without_an_empty_window():
    # What the CPU showed: a batch of 20, one call 990 ms, the others 17 us each.
    samples = [990e6] + [17e3] * 19
    flags = reply_audit.timing_flags(samples, sol_us=None)
    assert len(flags) == 1 and "one call doing the work of many (super-batch)" in flags[0]


def test_one_slow_outlier_is_not_a_super_batch():
    samples = [400_000.0] + [20_000.0] * 19
    assert reply_audit.timing_flags(samples, sol_us=None, empty_ns=3_000.0) == []


# ---- output audit ------------------------------------------------------------------------------------------

class Owner:
    passed, error, details = True, "", []


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 255, (8, 4, 1), dtype=torch.uint8, generator=g),
            torch.randn(8, 16, 1, generator=g).half())


def test_audit_accepts_c_and_fresh_tensors_and_snapshots_them():
    audit, sent = reply_audit.OutputAudit(), [_data(1), _data(2)]
    outputs = [sent[0][1], torch.zeros(8, 16, 1, dtype=torch.float16)]
    snaps, errors = audit.arrived(["call 0", "call 1"], sent, outputs, Owner())
    assert errors == ["", ""]
    assert snaps[0] is not outputs[0] and torch.equal(snaps[0], outputs[0])
    assert audit.late_writes() == []


def test_audit_names_an_output_living_in_another_input():
    sent = [_data()]
    view = sent[0][0].view(-1)[:16].view(torch.float16).view(8, 1, 1)     # inside a, the uint8 input
    _, errors = reply_audit.OutputAudit().arrived(["the call"], sent, [view], Owner())
    assert errors == ["the output of the call is a view of the input data[0], not a result"]


def test_audit_names_outputs_shared_between_calls_and_other_calls_buffers():
    sent, shared = [_data(1), _data(2), _data(3)], torch.zeros(8, 16, 1, dtype=torch.float16)
    _, errors = reply_audit.OutputAudit().arrived(["call 0", "call 1", "call 2"], sent,
                                                [shared, shared, sent[0][1]], Owner())
    assert errors[0].startswith("the outputs of call 0 and call 1 are the same memory")
    assert "is an input buffer of call 0" in errors[2] or "are the same memory" in errors[2]


def test_audit_sees_a_write_after_arrival_but_not_a_reused_buffer():
    audit, owner = reply_audit.OutputAudit(), Owner()
    out = torch.zeros(8, 16, 1, dtype=torch.float16)
    audit.arrived(["call 0"], [_data()], [out], owner)
    out[0, 0, 0] = 1.0                                          # lands after the parent took its snapshot
    assert audit.late_writes() == [("call 0", owner)]
    audit2 = reply_audit.OutputAudit()
    audit2.arrived(["case 0"], [_data()], [out], owner)
    out.fill_(2.0)                                              # the next call rewrites its own buffer ...
    audit2.arrived(["case 1"], [_data()], [out], owner)         # ... and returns it again: not a late write
    assert audit2.late_writes() == []


def test_unchanged_input_finds_the_untouched_c_only():
    data = _data()
    assert reply_audit.unchanged_input(data, data[1].clone()) == "data[1]"
    assert reply_audit.unchanged_input(data, data[1] + 1) is None


# ---- the tripwire and the seed hand-over ------------------------------------------------------------------

def test_guard_names_a_replaced_timer_and_is_quiet_otherwise():
    guard = harness_guard.HarnessGuard()
    guard.check("now")
    real = time.perf_counter_ns
    try:
        time.perf_counter_ns = lambda: 0
        with pytest.raises(harness_guard.IntegrityViolation, match="replaced harness functions inside: "
                                                               "time.perf_counter_ns"):
            guard.check("inside")
    finally:
        time.perf_counter_ns = real
    guard.check("after restoring")


def test_deep_guard_sees_code_defaults_and_module_globals_swapped_in_place():
    from arena.clock import timing
    guard = harness_guard.HarnessGuard()
    guard.check("now", deep=True)
    code, defaults = harness_guard.time_calls_drain.__code__, harness_guard.time_calls_drain.__defaults__
    try:
        harness_guard.time_calls_drain.__defaults__ = (lambda: 0,)
        assert "arena.audit.harness_guard.time_calls_drain.__code__" in guard.violations(deep=True)
        assert guard.violations(deep=False) == []          # identity alone cannot see it
    finally:
        harness_guard.time_calls_drain.__defaults__ = defaults
    real_time = timing.time
    try:
        timing.time = object()
        assert "arena.clock.timing.time" in guard.violations(deep=True)
    finally:
        timing.time = real_time
    assert harness_guard.time_calls_drain.__code__ is code and guard.violations(deep=True) == []


def test_no_work_inside_the_timed_window_is_flagged():
    flags = reply_audit.timing_flags([3_100.0] * 20, sol_us=None, empty_ns=3_000.0)
    assert len(flags) == 1 and "no GPU work inside the timed window" in flags[0]


def test_slices_of_one_output_pool_are_distinct_results():
    """A submission may return disjoint slices of one preallocated buffer: not the same memory."""
    pool = torch.zeros(2, 8, 16, 1, dtype=torch.float16)
    sent = [_data(1), _data(2)]
    _, errors = reply_audit.OutputAudit().arrived(["call 0", "call 1"], sent, [pool[0], pool[1]], Owner())
    assert errors == ["", ""]


def test_a_scheduling_hiccup_in_some_drains_is_not_an_escape():
    """Seen on an H100: the honest kernel (26.8 us) once drained 204 us in the middle of 3 wall-clock calls."""
    samples = [26_800.0] * 200
    assert reply_audit.timing_flags(samples, sol_us=1.333, drain_ns=[20_000.0, 204_500.0, 210_000.0, 18_000.0, 25_000.0],
                                  sync_ns=6_000.0) == []
    flags = reply_audit.timing_flags(samples, sol_us=1.333, drain_ns=[2_100_000.0] * 5, sync_ns=6_000.0)
    assert any("escapes the timed stream" in f for f in flags)


def test_every_guarded_name_resolves():
    """GUARDED names harness internals by string: a rename would silently drop its guard."""
    import importlib
    for module in ("arena.clock.timing", "arena.worker.server", "arena.worker.session", "arena.audit.harness_guard",
                   "arena.worker.channel", "arena.worker.tensorwire",
                   "socket", "json", "time"):
        importlib.import_module(module)
    missing = [path for path in harness_guard.GUARDED if not harness_guard._resolve(path)[0]]
    assert missing == []
    for module in harness_guard.DEEP_MODULES:
        importlib.import_module(module)


def test_differing_elements_compares_bits_per_element():
    import torch
    from arena.audit.reply_audit import differing_elements
    a = torch.tensor([[1.0, float("nan")], [-0.0, 2.0]], dtype=torch.float16)
    b = a.clone()
    assert not differing_elements(a, b).any()                 # NaN equals itself by bits
    b[1, 0] = 0.0                                             # -0.0 -> +0.0: equal as values, not as bits
    b[1, 1] = 3.0
    assert differing_elements(a, b).tolist() == [[False, False], [True, True]]


def test_the_profile_table_is_laid_out_by_the_evaluator_from_checked_rows():
    from arena.report.profile_table import MAX_ROWS, ProfileError, build_table
    table = build_table([["aten::mm\x1b[2K\n[bold]x", 3, 10.0, 20.0, 5.5, 6.0]])
    assert "\x1b" not in table and "aten::mm" in table and "5.5" in table
    assert len(table.splitlines()) == 5                 # rule, header, rule, one row, rule: no injected line
    for bad in ([["k", 1, float("nan"), 0, 0, 0]], [["k", 1, -1.0, 0, 0, 0]], [["k", True, 0, 0, 0, 0]],
                [["k", 1, 0, 0, 0]], [[7, 1, 0, 0, 0, 0]], "a table", [["k", 1, 0, 0, 0, 0]] * (MAX_ROWS + 1)):
        with pytest.raises(ProfileError):
            build_table(bad)


def test_pointers_handed_to_a_kernel_in_embedded_cuda_source_are_no_cache_hint():
    """`t.data_ptr()` inside the C++ source a submission hands to load_inline is how a launch passes its
    pointers; the same in Python code still is a hint (the shipped kernel has both kinds of line)."""
    assert "pointer-cache" not in [f.code for f in static_checks.scan(os.path.join(ROOT, "submission.py"))]
    source = 'CPP = """\nvoid run(torch::Tensor a) {\n  launch(a.data_ptr());\n}\n"""\nkey = (a.data_ptr(), 1)\n'
    found = [f for f in static_checks.scan_text(source) if f.code == "pointer-cache"]
    assert found and found[0].lines == [6]


def test_pointer_hints_fire_on_keys_not_on_the_pointers_a_launch_passes():
    """CuTe DSL passes `make_ptr(dtype, t.data_ptr(), ...)` and pointer tables `append([a.data_ptr(), ...])`
    (21 of 58 public files, the official examples among them, were flagged); a pointer used as a key is flagged."""
    def flagged(line):
        return "pointer-cache" in [f.code for f in static_checks.scan_text(line + "\n")]
    for launch in ("p = make_ptr(dtype, a.data_ptr(), cute.AddressSpace.gmem)",
                   "    ab_dtype, a.data_ptr(), cute.AddressSpace.gmem, assumed_align=16",
                   "abc_ptrs.append([a.data_ptr(), b.data_ptr()])", "abc_ptrs.append((a.data_ptr(), b.data_ptr()))"):
        assert not flagged(launch), launch
    for key in ("cache[a.data_ptr()] = c", "if a.data_ptr() == last:", "key = ('scale', sf.data_ptr(), l)",
                "return replay(data, ('ptr', data[0].data_ptr()), True)", "x = d[(a.data_ptr(), 1)]", "k = id(data)",
                "v = data[0]._version"):
        assert flagged(key), key


def test_the_library_gemm_hint_speaks_to_the_competitions_tasks_only():
    """This project's own tasks (attention, MoE) ship pure-PyTorch references that use torch.matmul."""
    example = os.path.join(ROOT, "tasks", "fp8_attention", "torch_submission.py")
    assert static_checks.scan(example, "fp8_attention") == []
    assert [f.code for f in static_checks.scan(example, "nvfp4_gemm")] == ["library-gemm"]
