"""Each submission file builds its extensions into a folder of its own when no jail separates the evaluations
(arena/isolation/jail.py's Isolation.environment, and under --emulate-blackwell arena/blackwell/runtime.py's
note_submission): versions of one kernel name their load_inline extension alike, and a batch that runs them at
once in one shared folder let one version load another's library."""
import hashlib

from arena.blackwell import runtime
from arena.isolation.jail import Isolation
from arena.submission_file import SubmissionFile

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
