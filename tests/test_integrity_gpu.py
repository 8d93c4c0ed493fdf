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
