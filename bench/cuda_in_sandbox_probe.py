"""Which part of the worker's isolation stops CUDA from starting (device machine; one row per variant)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from arena import sandbox  # noqa: E402

VARIANTS = {"nothing": [], "caps only": ["caps"], "ro only": ["ro"], "ro + /proc rw": ["ro", "proc"],
            "ro + /proc,/sys rw": ["ro", "proc", "sys"], "ro + /proc,/sys,/dev rw": ["ro", "proc", "sys", "dev"],
            "ro + /proc,/sys,/dev rw + caps": ["ro", "proc", "sys", "dev", "caps"]}


def attempt(steps):
    libc = sandbox._libc()
    home = "/tmp/probe-home"
    os.makedirs(home, exist_ok=True)
    writable = [home, "/dev/shm"] + (["/dev"] if "dev" in steps else []) + \
        (["/proc"] if "proc" in steps else []) + (["/sys"] if "sys" in steps else [])
    if "ro" in steps:
        sandbox._read_only_view(libc, writable)
    if "caps" in steps:
        print(sandbox._drop_capabilities(libc), end="; ")
    import torch
    try:
        n = torch.cuda.device_count()
        x = torch.ones(4, device="cuda") + 1
        torch.cuda.synchronize()
        return f"ok ({n} GPUs, {x.sum().item()})"
    except Exception as error:
        return f"FAILED {str(error).splitlines()[0][:160]}"


for name, steps in VARIANTS.items():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = attempt(steps)
        except Exception as error:
            result = f"setup failed: {error}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    print(f"{name:32s} {os.read(read, 4096).decode()}")
    os.close(read)
