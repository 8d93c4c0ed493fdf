"""Each submission file builds its extensions into a folder of its own when no jail separates the evaluations
(arena/isolation/jail.py's Isolation.environment, and under --emulate-blackwell arena/blackwell/runtime.py's
note_submission): versions of one kernel name their load_inline extension alike, and a batch that runs them at
once in one shared folder let one version load another's library. The worker claims that folder
(arena/compile/build_folder.py): a build lock an evaluation killed while building left there is removed when no
live evaluation holds the folder, where torch would wait on it for ever."""
import hashlib
import os
import signal
import subprocess
import sys

import pytest

from arena.blackwell import runtime
from arena.isolation.jail import Isolation
from arena.submission_file import SubmissionFile
from tests.evalrun import ROOT, SMALL, run_eval, spec_file

KERNEL = "from torch.utils.cpp_extension import load_inline\nNAME = 'gemm_ext'  # version {}\n"


def _version(tmp_path, n: int) -> SubmissionFile:
    path = tmp_path / f"v{n}.py"
    path.write_text(KERNEL.format(n))
    return SubmissionFile.read(str(path))


def test_unjailed_evaluations_of_two_versions_build_in_two_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "shared"))
    first, second = _version(tmp_path, 1), _version(tmp_path, 2)
    folders = [Isolation(s, False).environment()["TORCH_EXTENSIONS_DIR"] for s in (first, second, first)]
    assert folders[0] != folders[1] and folders[0] == folders[2]     # the same file keeps its builds
    assert folders[0] == str(tmp_path / "shared" / first.sha256[:24])


def test_unjailed_without_a_setting_the_folder_is_under_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    submission = _version(tmp_path, 1)
    folder = Isolation(submission, False).environment()["TORCH_EXTENSIONS_DIR"]
    assert folder == str(tmp_path / "cache" / "torch_extensions" / submission.sha256[:24])


def test_emulated_builds_of_two_versions_go_to_two_folders(tmp_path, monkeypatch):
    folders = []
    for n in (1, 2):
        monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "emulation" / "extensions"))
        submission = _version(tmp_path, n)
        runtime.note_submission(submission.path)
        folders.append(runtime.os.environ["TORCH_EXTENSIONS_DIR"])
    assert folders[0] != folders[1]
    expected = hashlib.sha256((tmp_path / "v2.py").read_bytes()).hexdigest()[:24]
    assert folders[1] == str(tmp_path / "emulation" / "extensions" / expected)


CLAIM = ("import sys, time; sys.path.insert(0, sys.argv[1]); from arena.compile import build_folder; "
         "print(build_folder.claim(sys.argv[2]), flush=True); time.sleep(float(sys.argv[3]))")


def _claim_in_a_process(folder, hold_s: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLAIM, ROOT, str(folder), str(hold_s)], stdout=subprocess.PIPE,
                            text=True)


def _plant_lock(folder) -> str:
    lock = folder / "gemm_ext" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    return str(lock)


def test_a_build_lock_is_removed_only_when_no_live_evaluation_holds_the_folder(tmp_path):
    """Real processes hold the flock: a lock a killed evaluation left goes; one a live evaluation may be building
    under stays, until that evaluation is SIGKILLed."""
    lock = _plant_lock(tmp_path)
    live = _claim_in_a_process(tmp_path, hold_s=60)
    try:
        assert live.stdout.readline().strip() == repr([lock])      # alone: the lock was stale
        lock = _plant_lock(tmp_path)                               # the live one is building now
        second = _claim_in_a_process(tmp_path)
        assert second.stdout.readline().strip() == "[]" and second.wait(30) == 0
        assert os.path.exists(lock)
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
    after = _claim_in_a_process(tmp_path)
    assert after.stdout.readline().strip() == repr([lock]) and after.wait(30) == 0
    assert not os.path.exists(lock)


LOCK_WAITER = '''"""Waits on its extension's build lock as torch.utils.cpp_extension.load_inline does, then answers right."""
import os
from torch.utils.file_baton import FileBaton
from reference import ref_kernel

baton = FileBaton(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "gemm_ext", "lock"))
if baton.try_acquire():
    baton.release()
else:
    baton.wait()


def custom_kernel(data):
    return ref_kernel(data)
'''


@pytest.mark.slow
def test_an_evaluation_after_one_killed_while_building_does_not_wait_on_its_lock(tmp_path):
    """The stale lock sits in the submission's own build folder (unsandboxed: TORCH_EXTENSIONS_DIR/<digest>);
    torch would wait on it for ever. The evaluation removes it, says so, and passes."""
    path = tmp_path / "waits_on_its_lock.py"
    path.write_text(LOCK_WAITER)
    folder = tmp_path / "extensions" / SubmissionFile.read(str(path)).sha256[:24]
    lock = _plant_lock(folder)
    run = run_eval("test", spec_file(SMALL), "--submission", str(path), "--no-sandbox", "--timeout", "60",
                   env=dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "extensions")), timeout=240)
    assert run.code == 0, run.stdout + run.stderr
    assert f"removed {lock}" in run.stdout + run.stderr
    assert not os.path.exists(lock)
