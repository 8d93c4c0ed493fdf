"""arena/blackwell/missing.py: one plain line for a submission that cannot run here (no CuTe DSL, no CUDA GPU, not a
Blackwell, a kernel built for another arch), and the CuTe DSL extra pinned to the competition's version."""
import importlib
import re
import sys
from pathlib import Path

import pytest
import torch

from arena.blackwell import missing
from arena.blackwell.missing import CUTE_DSL_INSTALL, explain_import_error
from arena.report.results import CaseResult, mark_not_run
from tests.evalrun import ROOT

HOPPER, BLACKWELL = (9, 0), (10, 0)


def test_missing_cute_dsl_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "cutlass", None)          # import fails as if it were not installed
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("cutlass.cute")
    for capability in (None, HOPPER, BLACKWELL):
        line = explain_import_error(caught.value, capability)
        assert line == ("needs CuTe DSL (nvidia-cutlass-dsl), which is not installed (no module 'cutlass.cute'): "
                        "python3 -m pip install -r requirements-cute.txt")
    assert "requirements-cute.txt" in explain_import_error(ModuleNotFoundError("x", name="cuda.bindings"), None)
    assert explain_import_error(ModuleNotFoundError("No module named 'numpy'", name="numpy"), None) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a CPU-only torch to raise the real error")
def test_cpu_only_torch_errors_become_needs_a_cuda_gpu():
    with pytest.raises(Exception) as caught:
        torch.zeros(1, device="cuda")
    assert explain_import_error(caught.value, None) == "needs a CUDA GPU (this machine has none)"


@pytest.mark.parametrize("error", [
    OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root."),
    AssertionError("Torch not compiled with CUDA enabled"),
    RuntimeError("Found no NVIDIA driver on your system."),
    RuntimeError("CUDA error: no kernel image is available for execution on the device"),
])
def test_cuda_needing_errors_on_a_cpu_machine(error):
    assert explain_import_error(error, None) == "needs a CUDA GPU (this machine has none)"


def test_no_kernel_image_names_both_architectures():
    error = RuntimeError("CUDA error: no kernel image is available for execution on the device\nCUDA kernel "
                         "errors might be asynchronously reported")
    assert explain_import_error(error, HOPPER, built_for=["sm_100a"]) == \
        "no kernel image for this GPU: built for sm_100a, this is sm_90"
    assert explain_import_error(error, HOPPER) == \
        "no kernel image for this GPU (sm_90): its CUDA code was built for another architecture"


class OpError(Exception):
    """Stands in for cutlass.cute.nvgpu.common.OpError, which the DSL raises for unsupported instructions."""


@pytest.mark.parametrize("error", [
    OpError("expects arch to be one of [sm_100a, sm_103a], but got sm_90"),
    RuntimeError("tcgen05.alloc is not supported on this target"),
    RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul"),
])
def test_blackwell_only_code_on_hopper_says_so(error):
    assert explain_import_error(error, HOPPER) == "needs a Blackwell GPU (sm_100a), this is sm_90"
    assert explain_import_error(error, BLACKWELL) is None       # on Blackwell it is a real failure


def test_other_errors_are_left_alone():
    for capability in (None, HOPPER, BLACKWELL):
        assert explain_import_error(ValueError("shape mismatch: 128 vs 256"), capability) is None


def test_a_newer_cute_dsl_that_lacks_a_name_points_at_the_pinned_version(monkeypatch):
    error = AttributeError("module 'cutlass.cute.arch' has no attribute 'ProxyKind'")
    monkeypatch.setattr(missing, "installed_dsl_version", lambda: "4.8.1")
    assert explain_import_error(error, BLACKWELL) == (
        "CuTe DSL 4.8.1 lacks a name this code uses (module 'cutlass.cute.arch' has no attribute 'ProxyKind'); "
        "the competition ran 4.3.5: python3 -m pip install -r requirements-cute.txt")
    monkeypatch.setattr(missing, "installed_dsl_version", lambda: "4.3.5")
    assert explain_import_error(error, BLACKWELL) is None


def test_the_extra_pins_the_competitions_version_and_is_documented():
    lines = [line.strip() for line in (Path(ROOT) / "requirements-cute.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == [f"nvidia-cutlass-dsl=={missing.CUTE_DSL_PIN}"]
    assert CUTE_DSL_INSTALL in (Path(ROOT) / "README.md").read_text()
    assert re.search(r"kernelbot.*modal_runner\.py", (Path(ROOT) / "requirements-cute.txt").read_text())


def test_what_stops_the_emulation_wins_over_the_architecture_a_wrapped_error_names():
    class DSLRuntimeError(Exception):      # as CuTe DSL wraps a failed compile ("ICE"), with the cause kept
        pass
    inner = RuntimeError("emulate-blackwell: cannot emulate `cp.async.bulk.tensor.4d....cta_group::2 [%r1]`: TMA "
                         "with .cta_group::2 (CTA pairs) is emulated only for loads without .multicast::cluster")
    try:
        try:
            raise inner
        except RuntimeError as error:
            raise DSLRuntimeError("ICE: sm_100a compile failed") from error
    except DSLRuntimeError as wrapped:
        line = explain_import_error(wrapped, (9, 0))
    assert line.startswith("emulate-blackwell: cannot emulate `cp.async.bulk.tensor.4d")
    assert "needs a Blackwell GPU" not in line


# ---- --emulate-blackwell: what the emulation cannot judge is not a failure of the submission -----------------

class EmulationError(RuntimeError):      # arena.blackwell.runtime raises its own errors by this name
    pass


@pytest.mark.parametrize("error,words", [
    (RuntimeError("CUDA error: an illegal instruction was encountered\nCUDA kernel errors might be ..."),
     "cannot judge on this GPU: illegal instruction in code the emulation did not build"),
    (RuntimeError("cuda.bindings: CUresult.CUDA_ERROR_INVALID_HANDLE (400)"),
     "cannot judge on this GPU: CUDA_ERROR_INVALID_HANDLE in "),
    (RuntimeError("CUDA error: an illegal memory access was encountered"), "cannot judge on this GPU: illegal memory access"),
    (RuntimeError("cuBLAS error: 15 (when calling cublasLtMatmul)"),
     "cannot judge on this GPU: cuBLAS(Lt) refused the call (cuBLAS error: 15): its NVFP4"),
    (EmulationError("emulated tcgen05: shared memory descriptor (high word 0x00010000): a non-zero base offset is "
                    "not emulated; at `tcgen05.mma...`"),
     "cannot judge on this GPU: emulated tcgen05: shared memory descriptor (high word 0x00010000): a non-zero base"),
])
def test_what_the_emulation_cannot_model_is_not_judged(error, words):
    from arena.blackwell.runtime import cannot_judge
    assert cannot_judge(error).startswith(words), cannot_judge(error)
    result = mark_not_run(CaseResult(0, "m: 1", False, error="cannot import submission: " + cannot_judge(error)))
    assert result.not_run.startswith("cannot judge on this GPU")


@pytest.mark.parametrize("error", [
    EmulationError("emulated tcgen05: this tcgen05.ld reads tensor-memory columns that `tcgen05.mma...` still "
                   "writes: never committed"),          # the submission's own bug: a failure, as on a B200
    RuntimeError("wrong result: Number of mismatched elements: 3"),
    ValueError("too many values to unpack"),
])
def test_the_submissions_own_faults_stay_failures_under_emulation(error):
    from arena.blackwell.runtime import cannot_judge
    assert cannot_judge(error) is None
    assert not mark_not_run(CaseResult(0, "m: 1", False, error=str(error))).not_run


def test_a_fault_in_a_kernel_with_cluster_launch_control_names_it(monkeypatch):
    """Which clusters start under cluster launch control follows this GPU's SM count: a public CuTe DSL group GEMM
    sizes its tensor-map workspace by a B200's 148 SMs and indexes it by cluster. A device fault in a kernel that
    uses CLC says so in its line."""
    from arena.blackwell import cute_dsl, runtime
    fault = RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(cute_dsl, "compiled_sites", lambda: ["tcgen05.mma.cta_group::1.kind::mxf4nvf4 [%r1], ..."])
    assert "cluster launch control" not in runtime.cannot_judge(fault)
    monkeypatch.setattr(cute_dsl, "compiled_sites", lambda: [
        "@%p3 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r4], [%r5];"])
    line = runtime.cannot_judge(fault)
    assert line.startswith("cannot judge on this GPU: illegal memory access") and "cluster launch control" in line


def test_a_call_into_cublaslt_nvfp4_is_not_judged_however_the_submission_words_the_error(tmp_path):
    """cuBLASLt's NVFP4 matmul runs only on a Blackwell GPU; a submission that wraps its status in its own words
    ("RuntimeError: heuristic", from a public file that passed on a B200) is not judged on a Hopper GPU."""
    from arena.blackwell import runtime
    source = tmp_path / "submission.py"
    source.write_text('CUDA_SRC = """#include <cublasLt.h>\\n ... cublasLtMatrixLayoutCreate(&a, CUDA_R_4F_E2M1, m, k, m);"""')
    saved = runtime._state.get("source")
    try:
        runtime.note_submission(str(source))
        line = runtime.cannot_judge(RuntimeError("heuristic"))
        assert line.startswith("cannot judge on this GPU: the submission calls cuBLASLt's block-scaled FP4 matmul")
        assert line.endswith("here it raised heuristic")
        runtime._state["source"] = "import torch"
        assert runtime.cannot_judge(RuntimeError("heuristic")) is None
    finally:
        runtime._state["source"] = saved or ""


def test_a_submission_that_installs_another_cute_dsl_at_import_is_not_judged(tmp_path):
    """A public group GEMM pip-installs nvidia-cutlass-dsl==4.4.0.dev0 at import (its B200 runner had a
    network) and uses a name 4.3.5 lacks: not the file's fault, not judged here."""
    from arena.blackwell import runtime
    source = tmp_path / "submission.py"
    source.write_text('subprocess.check_call([sys.executable, "-m", "pip", "install", "nvidia-cutlass-dsl==4.4.0.dev0"])')
    saved = runtime._state.get("source")
    try:
        runtime.note_submission(str(source))
        error = AttributeError("module 'cutlass.utils' has no attribute 'ClcDynamicPersistentTileSchedulerParams'")
        line = runtime.cannot_judge(error)
        assert line.startswith("cannot judge here: the submission installs nvidia-cutlass-dsl==4.4.0.dev0"), line
        assert mark_not_run(CaseResult(0, "m: 1", False, error="cannot import submission: " + line)).not_run
        source.write_text("import cutlass")            # no other pin: the file's own mistake
        runtime.note_submission(str(source))
        assert runtime.cannot_judge(error) is None
    finally:
        runtime._state["source"] = saved or ""
