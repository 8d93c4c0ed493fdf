"""The parent survives any reply: every bound is checked before anything is parsed, mapped or copied, and a
bad reply is one line (arena/worker/channel.py, arena/worker/tensorwire.py, arena/report/profile_table.py, arena/compile/sources.py,
arena/taskdef/specs.py). Each test sends what an exploit in tests/exploits/ sends."""
import fcntl
import os
import socket
import struct
import threading
import time

import pytest
import torch

from arena.worker import channel, tensorwire
from arena.compile.sources import CompileError, find_sources
from arena.report.profile_table import ProfileError, build_table
from arena.worker.client import reply_bytes_limit
from arena.taskdef.specs import combine_seed


def _raw(body: bytes):
    a, b = socket.socketpair()
    threading.Thread(target=lambda: a.sendall(struct.pack("!I", len(body)) + body), daemon=True).start()
    return a, b


def test_a_message_nested_100000_deep_is_refused_before_parsing():
    _, b = _raw(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(channel.ChannelError, match="nested more than"):
        channel.receive(b, 10)


def test_brackets_inside_strings_do_not_count_as_nesting():
    _, b = _raw(b'{"traceback": "' + b"[" * 5000 + b'"}')
    assert channel.receive(b, 10)[0]["traceback"] == "[" * 5000


def test_a_message_of_too_many_entries_is_refused_before_parsing():
    _, b = _raw(b"[" + b"0," * 300_000 + b"0]")
    with pytest.raises(channel.ChannelError, match="entries"):
        channel.receive(b, 10)


def test_a_message_that_trickles_in_meets_its_deadline():
    a, b = socket.socketpair()

    def trickle():
        a.sendall(struct.pack("!I", 100))
        for _ in range(20):
            time.sleep(0.3)
            try:
                a.send(b" ")
            except OSError:
                return
    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(socket.timeout):
        channel.receive(b, 1.0)
    assert time.monotonic() - started < 2.0


def test_a_sparse_buffer_announcing_a_gigabyte_is_refused_before_mapping():
    fd = os.memfd_create("big", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 1 << 30)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, tensorwire.SEALS)
    body = {"tree": {"tensor": {"storage": 0, "dtype": "uint8", "shape": [1 << 30], "stride": [1], "offset": 0}},
            "storages": [{"buffer": 0, "start": 0, "nbytes": 1 << 30, "device": "cpu"}]}
    with pytest.raises(tensorwire.WireError, match="announces 1073741824 bytes"):
        tensorwire.Decoder("cpu", max_bytes=reply_bytes_limit(4096)).decode(body, [fd])
    os.close(fd)


def test_a_reply_may_hold_twice_what_was_sent_plus_a_little():
    assert reply_bytes_limit(0) == 16 << 20 and reply_bytes_limit(100 << 20) == (200 + 16) << 20


def test_profile_numbers_too_large_for_a_float_are_one_line():
    with pytest.raises(ProfileError, match="call count is not a non-negative number"):
        build_table([["op", 10**400, 1.0, 1.0, 1.0, 1.0]])


def test_a_source_nested_too_deeply_is_one_compile_error(tmp_path):
    path = tmp_path / "deep.py"
    path.write_text("x = " + "+".join(['"a"'] * 30000) + "\n")
    with pytest.raises(CompileError, match="nested too deeply|not valid Python"):
        find_sources(str(path))


def test_a_string_doubled_past_any_source_is_not_built(tmp_path):
    path = tmp_path / "doubling.py"
    path.write_text("s = 'x'\n" + "s = s + s\n" * 40 + "from torch.utils.cpp_extension import load_inline\n"
                    "load_inline(name='m', cpp_sources='', cuda_sources=s)\n")
    started = time.monotonic()
    with pytest.raises(CompileError, match="made at run time"):       # 2**40 characters are never built
        find_sources(str(path))
    assert time.monotonic() - started < 5


def test_the_secret_seed_is_not_recoverable_from_the_combined_seed():
    combined = combine_seed(1111, 987654321)
    assert 2**32 <= combined < 2**64 and combined == combine_seed(1111, 987654321)
    assert combined != 1111 + (1111 + 987654321) * (1111 + 987654321 + 1) // 2     # not the Cantor pairing
    assert combine_seed(1111, 987654322) != combined


def test_timed_seeds_are_64_bit_and_fresh():
    from arena.run.evaluator import fresh_seed
    seeds = {fresh_seed() for _ in range(1000)}
    assert len(seeds) == 1000 and max(seeds) > 2**62 and all(0 <= s < 2**64 for s in seeds)
    torch.manual_seed(max(seeds))           # torch takes every one of them


def test_a_workers_own_account_of_its_windows_cannot_break_the_case():
    """phases_ns and host_ns are shown in the JSON, never ranked: strings, NaN, booleans and integers too large
    for a float become None, never an exception in the parent."""
    from types import SimpleNamespace

    from arena.run.benchmark import _window_row, median_phases
    hostile = SimpleNamespace(elapsed_ns=2e6, fields={"phases_ns": [10**400, "x"], "host_ns": float("nan")})
    clean = SimpleNamespace(elapsed_ns=1e6, fields={"phases_ns": [True], "host_ns": "y"})
    assert _window_row(hostile, clean, 5e5) == [2000.0, 1000.0, 500.0, None, None, None, None]
    assert median_phases([([10**400, 1], [1e6, 2e3]), (["a", "b"], None)]) == {"clean": [1000.0, 2.0]}


def test_a_view_into_a_large_workspace_sends_only_the_bytes_it_spans():
    """A result that is a view into a split-K workspace far larger than the inputs is not refused for the
    workspace's size: only the span of its tensors travels, with the same values and strides, and views that
    share the workspace still share one storage on arrival (the audit's alias checks see them)."""
    workspace = torch.zeros(16 << 20)                               # 64 MiB
    first = workspace[1001:1001 + 64 * 32].view(64, 32)
    first.copy_(torch.randn(64, 32))
    column = workspace[5000:5000 + 640:10]                          # a strided view into it
    column.copy_(torch.randn(64))
    body, fds = tensorwire.encode([first, column, first.t()])
    (entry,) = body["storages"]
    assert entry["nbytes"] < 32 << 10
    assert reply_bytes_limit(0) < workspace.untyped_storage().nbytes()   # whole, it would be refused
    got = tensorwire.Decoder("cpu", max_bytes=reply_bytes_limit(0)).decode(body, fds)
    assert torch.equal(got[0], first) and torch.equal(got[1], column) and torch.equal(got[2], first.t())
    assert got[1].stride() == column.stride() and got[2].stride() == first.t().stride()
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
