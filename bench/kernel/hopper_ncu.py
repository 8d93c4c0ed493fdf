"""Run submission.py's Hopper kernel a few times on one shape, for Nsight Compute:
ncu --kernel-name regex:gemm_kernel --launch-skip 2 --launch-count 1 --set detailed python3 bench/kernel/hopper_ncu.py M N K"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

import torch  # noqa: E402

import reference  # noqa: E402
import submission  # noqa: E402

m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (2304, 4608, 7168)
data = reference.generate_input(m, n, k, 1, 5)
for _ in range(4):
    submission.custom_kernel(data)
torch.cuda.synchronize()
print("done", m, n, k)
