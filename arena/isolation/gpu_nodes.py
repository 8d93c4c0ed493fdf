"""Which NVIDIA device nodes an evaluation's jail gets: the driver's shared nodes (nvidiactl, nvidia-uvm, ...) and
the node of the one GPU the evaluation uses, never another GPU's. CUDA opens /dev/nvidiaN for each GPU it uses;
a GPU whose node is missing does not exist for the process, whatever CUDA_VISIBLE_DEVICES it sets itself (this is
how containers hand out GPUs).

The evaluation's GPU is CUDA's device 0 under this process's CUDA_VISIBLE_DEVICES, counted in PCI bus order
(eval.py sets CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA counts the same way), or named by its UUID. The driver lists
each GPU in /proc/driver/nvidia/gpus/<bus id>/information with its UUID and its node's minor number. Standard
library only.
"""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

PROC_GPUS = "/proc/driver/nvidia/gpus"
PER_GPU_NODE = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class Gpu:
    bus_id: str                 # 0000:18:00.0, the folder's name
    uuid: str                   # GPU-xxxxxxxx-...
    minor: int                  # its node is /dev/nvidia<minor>


def gpus(proc: str = PROC_GPUS) -> list[Gpu]:
    """The driver's GPUs in PCI bus order; [] without the driver."""
    found = []
    for folder in sorted(glob.glob(os.path.join(proc, "*"))):
        fields = {}
        try:
            with open(os.path.join(folder, "information")) as f:
                for line in f:
                    name, _, value = line.partition(":")
                    fields[name.strip()] = value.strip()
            found.append(Gpu(os.path.basename(folder), fields["GPU UUID"], int(fields["Device Minor"])))
        except (OSError, KeyError, ValueError):
            continue
    return sorted(found, key=lambda gpu: gpu.bus_id.lower())


def chosen_gpu(visible: str | None, known: list[Gpu]) -> Gpu | None:
    """CUDA's device 0 under CUDA_VISIBLE_DEVICES=`visible` (None: unset), or None when it names no GPU."""
    if visible is None:
        return known[0] if known else None
    first = visible.split(",")[0].strip()
    if first.isdigit():
        index = int(first)
        return known[index] if index < len(known) else None
    if first.startswith("GPU-"):
        matches = [gpu for gpu in known if gpu.uuid.lower().startswith(first.lower())]
        return matches[0] if len(matches) == 1 else None       # CUDA takes a unique UUID prefix
    return None                     # "", -1, a MIG device, anything CUDA would refuse


def evaluation_gpu(proc: str = PROC_GPUS) -> Gpu | None:
    """The GPU this process's evaluation uses (CUDA's device 0 under its CUDA_VISIBLE_DEVICES), if resolved."""
    return chosen_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"), gpus(proc))


def jail_nodes(visible: str | None = None, dev: str = "/dev", proc: str = PROC_GPUS) -> list[str]:
    """The NVIDIA nodes under `dev` to bind into the jail: every shared node and nvidia-caps/*, and of the
    per-GPU nodes only the evaluation's (`visible` defaults to this process's CUDA_VISIBLE_DEVICES). A MIG
    device keeps every per-GPU node (its GPU is not resolved here). Inside, the jail's CUDA_VISIBLE_DEVICES
    must name that GPU by its UUID (arena/isolation/jail.py): an index counts the GPUs the jail sees, one."""
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    nodes = sorted(p for p in glob.glob(os.path.join(dev, "nvidia*")) + glob.glob(os.path.join(dev, "nvidia-caps", "*"))
                   if not os.path.isdir(p))
    if visible is not None and visible.strip().startswith("MIG-"):
        return nodes
    gpu = chosen_gpu(visible, gpus(proc))
    keep = None if gpu is None else f"nvidia{gpu.minor}"
    return [p for p in nodes if not PER_GPU_NODE.match(os.path.basename(p)) or os.path.basename(p) == keep]
