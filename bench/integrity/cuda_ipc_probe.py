"""Why CUDA tensors are staged through shared memory: can a jailed process open the evaluator's CUDA IPC handle?

    python3 bench/integrity/cuda_ipc_probe.py       (GPU machine, root, bubblewrap: ARENA_BWRAP or PATH)

One row per way of starting the child: plain, as another uid only (setpriv), and jailed as the worker is.
"""
import os
import pickle
import subprocess
import sys

import torch
from torch.multiprocessing.reductions import reduce_tensor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from arena.isolation import bubblewrap  # noqa: E402

CHILD = ("import pickle, sys, torch\n"
         "fn, args = pickle.loads(sys.stdin.buffer.read())\n"
         "try:\n    x = fn(*args); print('opened, sum', float(x.sum()))\n"
         "except Exception as e:\n    print('failed:', str(e).splitlines()[0][:120])\n")
UID = 1_500_000_001


def main():
    x = torch.arange(8, dtype=torch.float32, device="cuda")
    payload = pickle.dumps(reduce_tensor(x))
    python = [sys.executable, "-I", "-c", CHILD]
    other_uid = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--"]
    home = "/tmp/arena-ipc-probe"
    os.makedirs(home, exist_ok=True)
    os.chown(home, UID, UID)
    ways = {"plain child": python, "another uid (setpriv)": other_uid + python,
            "jailed as the worker": bubblewrap.command(python, home, UID, bubblewrap.default_limits(),
                                                       readable=[os.getcwd()])}
    for name, argv in ways.items():
        done = subprocess.run(argv, input=payload, capture_output=True, timeout=120)
        said = done.stdout.decode().strip() or done.stderr.decode().strip().splitlines()[-1:]
        print(f"{name:24s} {said}")


if __name__ == "__main__":
    main()
