import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def hopper_gpu():
    """Skips the test unless this machine has an sm_90 GPU (the native Hopper kernel, the Blackwell emulation)."""
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9):
        pytest.skip("needs an sm_90 GPU")


@pytest.fixture(scope="module")
def emulation_env(tmp_path_factory):
    """A fresh --emulate-blackwell build folder (its own library build) in the environment for one test module's
    nvcc builds; skips where nvcc is missing."""
    from arena.blackwell import toolchain
    from arena.compile import find_tool
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found")
    env = toolchain.prepare(str(tmp_path_factory.mktemp("emu")))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def exploit_dir(tmp_path, monkeypatch):
    """Where exploits leave their marks: the one folder besides its home the jailed worker may write (its own
    uid writes there, hence mode 1777)."""
    folder = tmp_path / "exploit"
    folder.mkdir()
    folder.chmod(0o1777)
    monkeypatch.setenv("ARENA_WORKER_WRITABLE", str(folder))
    return str(folder)
