"""The competition's runner, simulated exactly: it copies only the files task.yml's `files:` lists into an
empty folder and runs `python3 eval.py MODE SPECFILE` there with POPCORN_FD set (gpu-mode/kernelbot
src/libkernelbot/task.py `make_task_definition`: each entry's source is read as text; run_eval.py
`_create_files`: `Path(name).write_text(content)` in the working directory, which creates no folders, then
`python3 submission.py` once as a compile step, then `run_single_evaluation` per mode). Every task must run
every mode from such a folder.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.evalrun import ROOT
from tests.fileload import load_file

pytestmark = pytest.mark.slow     # every mode from a flat folder, as the official runner writes it: `pytest -m slow`

TASK_YMLS = {"nvfp4_gemm": Path(ROOT) / "task.yml",
             **{name: Path(ROOT) / "tasks" / name / "task.yml"
                for name in ("nvfp4_gemv", "nvfp4_dual_gemm", "nvfp4_group_gemm", "fp8_attention", "nvfp4_moe")}}
SUBMISSIONS = {"nvfp4_gemm": Path(ROOT) / "submissions" / "torch_reference.py",
               **{name: Path(ROOT) / "tasks" / name / "torch_submission.py" for name in TASK_YMLS
                  if name != "nvfp4_gemm"}}
# What public submissions import besides `task` (the runner's folder must provide it).
IMPORTS = "from reference import to_blocked, ceil_div, sf_vec_size  # noqa: F401\nfrom utils import set_seed  # noqa: F401\n"


def assemble(task_yml: Path, submission_text: str, folder: Path):
    """What the runner does: read every listed source as text, write it under its name in `folder`."""
    raw = yaml.safe_load(task_yml.read_text())
    for entry in raw["files"]:
        name, source = entry["name"], entry["source"]
        content = submission_text if source == "@SUBMISSION@" else (task_yml.parent / source).read_text()
        path = folder / name
        assert path.resolve().is_relative_to(folder.resolve())
        path.write_text(content)        # no mkdir: a name with a folder in it fails here, as on the runner


def build_test_string(case: dict) -> str:
    """The runner's spec line: `key: value` joined by '; ', values as Python prints them."""
    return "; ".join(f"{k}: {v}" for k, v in case.items()) + "\n"


def run_program(args: list, folder: Path, spec: str | None = None) -> tuple[int, dict, str]:
    """subprocess with POPCORN_FD on a real pipe, as run_eval.run_program; returns (exit code, keys, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED", "PYTHONPATH")}
    read_end, write_end = os.pipe()
    env["POPCORN_FD"] = str(write_end)
    if spec is not None:
        (folder / "cases.txt").write_text(spec)
        args = args + [str(folder / "cases.txt")]
    proc = subprocess.run([sys.executable, *args], cwd=folder, env=env, pass_fds=[write_end],
                          capture_output=True, text=True, timeout=600)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        raw = pipe.read()
    keys = {}
    for line in raw.splitlines():
        key, _, value = line.partition(":")
        if key or value:
            keys[key.strip()] = value.strip()
    return proc.returncode, keys, proc.stdout + proc.stderr


def smallest_test(task_yml: Path) -> dict:
    tests = yaml.safe_load(task_yml.read_text())["tests"]

    def size(case):
        return sum(v if isinstance(v, int) else sum(v) for k, v in case.items() if k in ("m", "n", "k"))
    return min(tests, key=size)


@pytest.mark.parametrize("task", TASK_YMLS)
def test_files_are_flat_and_list_every_module_eval_needs(task):
    raw = yaml.safe_load(TASK_YMLS[task].read_text())
    entries = {e["name"]: e["source"] for e in raw["files"]}
    assert all("/" not in name for name in entries), "the runner cannot create folders: names must be flat"
    for needed in ("submission.py", "task.py", "reference.py", "utils.py", "eval.py", "task.yml", "arena.py"):
        assert needed in entries, f"{task}: files lacks {needed}"
    package = Path(ROOT) / "arena"
    modules = {".".join(p.relative_to(package).parts) for p in package.rglob("*.py")} - {"__init__.py"}
    listed = {name[len("arena."):] for name in entries if name.startswith("arena.") and name != "arena.py"}
    assert listed == modules, f"{task}: files must list every arena module: missing {sorted(modules - listed)}, " \
                              f"extra {sorted(listed - modules)}"
    for name, source in entries.items():
        if source != "@SUBMISSION@":
            assert (TASK_YMLS[task].parent / source).is_file(), f"{task}: {name} comes from missing {source}"


@pytest.mark.parametrize("task", TASK_YMLS)
def test_runner_runs_the_test_mode_from_only_the_listed_files(task, tmp_path):
    official = task in ("nvfp4_gemm", "nvfp4_gemv", "nvfp4_dual_gemm", "nvfp4_group_gemm")
    submission = (IMPORTS if official else "") + SUBMISSIONS[task].read_text()
    assemble(TASK_YMLS[task], submission, tmp_path)
    code, _, output = run_program(["submission.py"], tmp_path)          # the runner's compile step
    assert code == 0, output
    code, keys, output = run_program(["eval.py", "test"], tmp_path, build_test_string(smallest_test(TASK_YMLS[task])))
    assert code == 0, output
    assert keys.get("check") == "pass" and keys.get("test-count") == "1" and keys.get("test.0.status") == "pass", keys


@pytest.mark.parametrize("mode", ["benchmark", "leaderboard", "profile"])
def test_runner_runs_the_timed_modes_from_only_the_listed_files(mode, tmp_path):
    assemble(TASK_YMLS["nvfp4_gemm"], SUBMISSIONS["nvfp4_gemm"].read_text(), tmp_path)
    spec = build_test_string({"m": 128, "n": 256, "k": 256, "l": 1, "seed": 1111})
    code, keys, output = run_program(["eval.py", mode], tmp_path, spec)
    assert code == 0, output
    assert keys.get("check") == "pass" and keys.get("benchmark-count") == "1", keys
    if mode != "profile":
        assert float(keys["benchmark.0.mean"]) > 0 and int(keys["benchmark.0.runs"]) >= 1, keys


def test_a_rerun_in_the_same_folder_uses_the_new_files(tmp_path):
    """A stale arena/ from an earlier run must not win over the flat files the runner just wrote."""
    assemble(TASK_YMLS["nvfp4_gemm"], SUBMISSIONS["nvfp4_gemm"].read_text(), tmp_path)
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "__init__.py").write_text((Path(ROOT) / "arena" / "__init__.py").read_text())
    (tmp_path / "arena" / "specs.py").write_text("raise ImportError('stale')\n")
    probe = "import arena.taskdef.specs, sys; sys.exit(0 if hasattr(arena.taskdef.specs, 'parse_spec_text') else 3)"
    code, _, output = run_program(["-c", probe], tmp_path)
    assert code == 0, output


def test_the_manifests_are_generated_and_a_new_module_needs_no_yaml_edit(tmp_path, monkeypatch):
    """tasks/manifests.py writes the engine's entries of every task.yml from arena/; --check fails, naming the
    file, when one is stale (a module added without running it)."""
    manifests = load_file(str(Path(ROOT) / "tasks" / "manifests.py"), "manifests")
    assert manifests.main(["manifests.py", "--check"]) == 0
    root = tmp_path / "repo"
    (root / "arena" / "sub").mkdir(parents=True)
    for name in ("__init__.py", "one.py", "sub/__init__.py", "sub/two.py"):
        (root / "arena" / name).write_text("")
    original = (Path(ROOT) / "tasks" / "nvfp4_gemv" / "task.yml").read_text()
    (root / "tasks" / "t").mkdir(parents=True)
    (root / "tasks" / "t" / "task.yml").write_text(original)
    (root / "task.yml").write_text((Path(ROOT) / "task.yml").read_text())
    monkeypatch.setattr(manifests, "ROOT", root)
    monkeypatch.setattr(manifests, "PACKAGE", root / "arena")
    assert manifests.main(["manifests.py", "--check"]) == 1
    assert manifests.main(["manifests.py"]) == 0
    assert manifests.main(["manifests.py", "--check"]) == 0
    entries = {e["name"]: e["source"] for e in yaml.safe_load((root / "tasks" / "t" / "task.yml").read_text())["files"]}
    assert {k: v for k, v in entries.items() if k.startswith("arena")} == {
        "arena.py": "../../arena/__init__.py", "arena.one.py": "../../arena/one.py",
        "arena.sub.__init__.py": "../../arena/sub/__init__.py", "arena.sub.two.py": "../../arena/sub/two.py"}
    assert entries["utils.py"] == "../../utils.py"          # the task's own entries stay as written
