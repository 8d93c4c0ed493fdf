"""The GPU-only exploits (side stream, super-batch with real kernels, late writes from a side stream, an
output on the wrong device) and the honest controls on a GPU; the same checks as bench/integrity/gpu_check.py,
which prints them as a table. Skipped without CUDA."""
import sys

import pytest

from tests.evalrun import ROOT

sys.path.insert(0, f"{ROOT}/bench/integrity")
import gpu_check  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("check", gpu_check.CHECKS, ids=[c.name for c in gpu_check.CHECKS])
def test_gpu_exploit_caught_or_control_clean(check, tmp_path):
    row = gpu_check.run_check(check, str(tmp_path))
    assert row["caught"], row


def _gpu_uuids() -> list[str]:
    import subprocess
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("GPU-")]


def test_a_submission_reaches_no_other_gpu(exploit_dir):
    """On a host with several GPUs, an evaluation given the last one (as a batch gives each its own): the
    submission opens no other GPU's node, a child that clears CUDA_VISIBLE_DEVICES sees one GPU, and that GPU is
    the one the evaluation was given."""
    import os

    from tests.evalrun import run_eval, spec_file
    uuids = _gpu_uuids()
    if len(uuids) < 2:
        pytest.skip("needs a machine with two GPUs or more")
    index = len(uuids) - 1
    run = run_eval("test", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1111\n"), "--submission",
                   f"{ROOT}/tests/exploits/other_gpu.py",
                   env={"EXPLOIT_DIR": exploit_dir, "CUDA_VISIBLE_DEVICES": str(index)})
    assert run.code == 0, run.stderr[-1500:]
    said = run.stdout + run.stderr
    assert "isolation: worker bubblewrap jail" in said, said[-1500:]        # not the unjailed fallback
    seen = dict(line.split(": ", 1) for line in open(os.path.join(exploit_dir, "gpus")).read().splitlines())
    nodes = seen.pop("nodes seen").split()
    assert len([n for n in nodes if n.removeprefix("nvidia").isdigit()]) == 1, nodes
    assert seen == {"nodes opened": "1", "child devices": "1", "own devices": "1", "uuid": uuids[index]}, seen
