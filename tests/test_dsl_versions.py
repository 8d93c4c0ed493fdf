"""arena/blackwell/dsl_versions.py: a file that pins another CuTe DSL version imports that version's `cutlass`
when the checkout holds it under .cute-dsl/<version>/, and the installed one otherwise (each case in a fresh
interpreter, whose import path it changes)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = 'subprocess.check_call([sys.executable, "-m", "pip", "install", "nvidia-cutlass-dsl==4.4.0.dev0"])\n'


def _fake_dsl(root, version, marker):
    package = os.path.join(root, version, "nvidia_cutlass_dsl", "python_packages", "cutlass")
    os.makedirs(package)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write(f"MARKER = {marker!r}\n")


def _run(code: str, path_first: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, path_first])})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_pinned_version_is_imported_when_the_checkout_holds_it(tmp_path):
    versions, installed = tmp_path / "versions", tmp_path / "installed"
    _fake_dsl(str(versions), "4.4.0.dev0", "pinned")
    (installed / "cutlass").mkdir(parents=True)
    (installed / "cutlass" / "__init__.py").write_text("MARKER = 'installed'\n")
    code = f"""
        from arena.blackwell import dsl_versions
        picked = dsl_versions.activate({PINNED!r}, "4.3.5", root={str(versions)!r})
        import cutlass
        print(picked, cutlass.MARKER)
    """
    assert _run(code, str(installed)) == "4.4.0.dev0 pinned"
    # the pinned version is the installed one, or not in the checkout, or cutlass is imported already: unchanged
    for installed_version, root, first in (("4.4.0.dev0", versions, "pass"), ("4.3.5", tmp_path / "none", "pass"),
                                           ("4.3.5", versions, "import cutlass")):
        code = "\n".join([first, "from arena.blackwell import dsl_versions",
                          f"picked = dsl_versions.activate({PINNED!r}, {installed_version!r}, root={str(root)!r})",
                          "import cutlass", "print(picked, cutlass.MARKER)"])
        assert _run(code, str(installed)) == "None installed", (installed_version, root, first)


def test_a_file_without_a_pin_keeps_the_installed_dsl(tmp_path):
    from arena.blackwell import dsl_versions
    _fake_dsl(str(tmp_path), "4.4.0.dev0", "pinned")
    assert dsl_versions.pinned_version("import cutlass\n") is None
    assert dsl_versions.activate("import cutlass\n", "4.3.5", root=str(tmp_path)) is None
    assert dsl_versions.pinned_version(PINNED) == "4.4.0.dev0"
