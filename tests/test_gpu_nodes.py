"""Which NVIDIA device nodes a jail gets (arena/isolation/gpu_nodes.py), on a fake driver tree: only the evaluation's GPU,
found by index in PCI bus order or by UUID, with its own minor number; the shared nodes always. The real
thing on a machine with several GPUs is tests/test_integrity_gpu.py::test_a_submission_reaches_no_other_gpu."""
import os

import pytest

from arena.isolation import gpu_nodes

# bus id -> (uuid, minor): minors out of bus order, as the driver may number them
GPUS = {"0000:c1:00.0": ("GPU-cccc0000-0000", 0), "0000:18:00.0": ("GPU-aaaa0000-0000", 2),
        "0000:2a:00.0": ("GPU-bbbb0000-0000", 3), "0000:ab:00.0": ("GPU-bbbc0000-0000", 1)}
SHARED = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]


@pytest.fixture
def tree(tmp_path):
    proc, dev = tmp_path / "gpus", tmp_path / "dev"
    for bus, (uuid, minor) in GPUS.items():
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t\t NVIDIA H100\nIRQ:   \t\t 10\nGPU UUID: \t {uuid}\nVideo BIOS: \t ??\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n")
        dev.mkdir(exist_ok=True)
        (dev / f"nvidia{minor}").write_text("")
    for name in SHARED:
        (dev / name).write_text("")
    (dev / "nvidia-caps").mkdir()
    (dev / "nvidia-caps" / "nvidia-cap1").write_text("")
    return str(proc), str(dev)


def per_gpu(paths):
    return [os.path.basename(p) for p in paths if gpu_nodes.PER_GPU_NODE.match(os.path.basename(p))]


def test_the_gpus_are_listed_in_pci_bus_order(tree):
    proc, _ = tree
    assert [g.bus_id for g in gpu_nodes.gpus(proc)] == sorted(GPUS)
    assert [g.minor for g in gpu_nodes.gpus(proc)] == [2, 3, 1, 0]


@pytest.mark.parametrize("visible, node", [
    (None, "nvidia2"),                  # unset: device 0, the first on the bus
    ("0", "nvidia2"), ("1", "nvidia3"), ("2", "nvidia1"), ("3", "nvidia0"),
    ("3,1", "nvidia0"),                 # CUDA's device 0 is the first listed
    ("GPU-aaaa0000-0000", "nvidia2"), ("GPU-bbbc", "nvidia1"), ("GPU-CCCC", "nvidia0"),
])
def test_only_the_evaluations_gpu_node_is_bound(tree, visible, node):
    proc, dev = tree
    nodes = gpu_nodes.jail_nodes(visible, dev=dev, proc=proc)
    assert per_gpu(nodes) == [node], nodes
    assert {os.path.basename(p) for p in nodes} >= set(SHARED) | {"nvidia-cap1"}


@pytest.mark.parametrize("visible", ["", "-1", "7", "GPU-bbb", "GPU-ffff", "nonsense"])
def test_no_gpu_or_an_unknown_or_ambiguous_one_binds_no_gpu_node(tree, visible):
    """CUDA would see no GPU (or refuse the list): the jail gets none, never every one."""
    proc, dev = tree
    nodes = gpu_nodes.jail_nodes(visible, dev=dev, proc=proc)
    assert per_gpu(nodes) == [], nodes
    assert {os.path.basename(p) for p in nodes} >= set(SHARED)


def test_a_mig_device_keeps_every_gpu_node(tree):
    proc, dev = tree
    assert sorted(per_gpu(gpu_nodes.jail_nodes("MIG-1234", dev=dev, proc=proc))) == \
        ["nvidia0", "nvidia1", "nvidia2", "nvidia3"]


def test_without_the_driver_nothing_is_bound(tmp_path):
    assert gpu_nodes.jail_nodes(None, dev=str(tmp_path), proc=str(tmp_path / "none")) == []
