"""The parent-worker channel (arena/worker/channel.py) and tensor wire format (arena/worker/tensorwire.py): data crosses,
code never does, and every malformed or out-of-range message is refused with one line."""
import fcntl
import os
import socket

import pytest
import torch

from arena.worker import channel, tensorwire
from arena.isolation import secret_seed, worker_text

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd (Linux)")


def roundtrip(tree, inputs=None):
    body, fds = tensorwire.encode(tree, inputs)
    a, b = socket.socketpair()
    with a, b:
        channel.send(a, body, fds)
        for fd in fds:
            os.close(fd)
        message, received = channel.receive(b)
    return tensorwire.Decoder("cpu").decode(message, received)


def test_nested_data_with_strided_views_and_fp4_fp8_crosses_intact():
    base = torch.randn(6, 8).half()
    fp4 = torch.randint(0, 255, (4, 8), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    tree = ([base.t(), base[2:, 1:5], fp4, torch.zeros(3, dtype=torch.float8_e4m3fn)], {"k": (1, 2.5, "x", None)})
    back = roundtrip(tree)
    assert torch.equal(back[0][0], base.t()) and back[0][0].stride() == base.t().stride()
    assert torch.equal(back[0][1], base[2:, 1:5]) and back[0][1].storage_offset() == base[2:, 1:5].storage_offset()
    assert back[0][2].dtype == torch.float4_e2m1fn_x2 and torch.equal(back[0][2].view(torch.uint8), fp4.view(torch.uint8))
    assert back[1] == {"k": (1, 2.5, "x", None)}
    assert back[0][0].untyped_storage().data_ptr() == back[0][1].untyped_storage().data_ptr()   # one storage


def test_a_write_by_the_sender_after_sending_is_visible_to_the_receiver():
    """Shared memory, not a copy: late writes stay detectable."""
    body, fds = tensorwire.encode([torch.zeros(4)])
    mine = tensorwire.Decoder("cpu").decode(body, [os.dup(fds[0])])
    theirs = tensorwire.Decoder("cpu").decode(body, fds)
    mine[0][2] = 7.0
    assert theirs[0][2] == 7.0


def test_objects_that_are_not_data_cannot_be_sent():
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))
    with pytest.raises(tensorwire.WireError, match="a Evil cannot be sent"):
        tensorwire.encode([Evil()])


@pytest.mark.parametrize("tamper,message", [
    (lambda b: b["tree"]["list"][0]["tensor"].update(shape=[1 << 20]), "reaches past the end of its storage"),
    (lambda b: b["tree"]["list"][0]["tensor"].update(dtype="os.system"), "unknown dtype"),
    (lambda b: b["tree"]["list"][0]["tensor"].update(stride=[-1]), "a tensor stride must be an integer"),
    (lambda b: b["storages"][0].update(start=1 << 40), "reaches past the end of its shared-memory buffer"),
    (lambda b: b["tree"].update({"list": [{"__reduce__": 1}]}), "malformed data node"),
    (lambda b: b["storages"].append({"input": 5}), "an input reference must be an integer"),
])
def test_malformed_or_out_of_range_replies_are_refused(tamper, message):
    body, fds = tensorwire.encode([torch.zeros(16)])
    tamper(body)
    with pytest.raises(tensorwire.WireError, match=message):
        tensorwire.Decoder("cpu").decode(body, fds)


def test_an_unsealed_buffer_is_refused_before_mapping():
    """An unsealed memfd could be truncated under the parent (SIGBUS while reading)."""
    body, _ = tensorwire.encode([torch.zeros(16)])
    fd = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    with pytest.raises(tensorwire.WireError, match="without its shrink/grow seals"):
        tensorwire.Decoder("cpu").decode(body, [fd])


def test_outputs_in_a_storage_the_receiver_sent_come_back_as_references():
    sent = [torch.zeros(8), torch.ones(8)]
    body, fds = tensorwire.encode(sent[1][2:], inputs={sent[1].untyped_storage().data_ptr(): 1})
    assert body["storages"] == [{"input": 1}] and fds == []
    back = tensorwire.Decoder("cpu", [t.untyped_storage() for t in sent]).decode(body, fds)
    assert back.untyped_storage().data_ptr() == sent[1].untyped_storage().data_ptr() and back.shape == (6,)


def test_oversized_or_garbled_messages_are_refused():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(channel._HEADER.pack(channel.MAX_MESSAGE + 1))
        with pytest.raises(channel.ChannelError, match="announced a message"):
            channel.receive(b)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(channel._HEADER.pack(3) + b"\xff{x")
        with pytest.raises(channel.ChannelError, match="not JSON"):
            channel.receive(b)


def test_worker_text_loses_every_control_sequence():
    text = "ok\x1b[2K\x1b[1A\r\x1b]0;title\x07\x1b[32m✔ passed\x1b[0m\x00\x9b done\n\tnext"
    assert worker_text.clean_text(text) == "ok✔ passed done\n\tnext"


def test_secrets_leave_the_command_line():
    kept, seed = secret_seed._strip_seed_option(["eval.py", "test", "--seed", "42", "--json", "x"])
    assert kept == ["eval.py", "test", "--json", "x"] and seed == "42"
    assert secret_seed._strip_seed_option(["eval.py", "--seed=7"]) == (["eval.py"], "7")


def test_seals_constant_is_what_the_decoder_requires():
    assert tensorwire.SEALS & fcntl.F_SEAL_SHRINK


def test_cpu_tensors_cross_to_a_gpu_worker_only_as_inputs():
    """Group gemm keeps its reference scales on the CPU in a GPU run (as the official task does): the worker's
    input decoder takes them; a CPU tensor among a GPU run's outputs is still refused."""
    scales = torch.arange(12, dtype=torch.uint8).view(3, 4)
    body, fds = tensorwire.encode([scales])
    inputs = tensorwire.Decoder("cuda", cpu_too=True).decode(body, [os.dup(fd) for fd in fds])
    assert inputs[0].device.type == "cpu" and torch.equal(inputs[0], scales)
    with pytest.raises(tensorwire.WireError, match="a CPU tensor arrived where the device is cuda"):
        tensorwire.Decoder("cuda").decode(body, fds)
