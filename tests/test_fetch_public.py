"""bench/emulation/fetch_public.py: the committed lists of public files, and the script that rebuilds
.public-blackwell/ from them (real git repositories, a real subprocess)."""
import csv
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "emulation", "fetch_public.py")
CORPUS = os.path.join(ROOT, "bench", "emulation", "public_corpus.tsv")


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_the_committed_corpus_list_names_each_file_once_at_a_full_commit_with_a_b200_outcome():
    rows = _rows(CORPUS)
    assert len(rows) == 58 and len({r["file"] for r in rows}) == 58
    assert sum(r["expected"] != "unknown" for r in rows) == 53
    for r in rows:
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]), r
        assert r["expected"] in ("pass", "fail", "build_fail", "unknown"), r
        assert r["problem"] in ("gemm", "gemv", "dual_gemm", "group_gemm"), r
        assert r["judged_on"] in ("", "benchmarks"), r


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_files_come_from_each_repository_at_their_commit_and_a_missing_one_is_named(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", cwd=work)
    (work / "sub").mkdir()
    (work / "sub" / "kernel.py").write_text("VERSION = 1\n")
    _git("add", ".", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=work)
    first = _git("rev-parse", "HEAD", cwd=work)
    (work / "sub" / "kernel.py").write_text("VERSION = 2\n")
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=work)
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "someone+kernels" / "repo")], check=True)
    corpus = tmp_path / "corpus.tsv"
    header = "file\tproblem\trepo\tpath\tcommit\tstyle\texpected\tjudged_on\n"
    corpus.write_text(header + f"k1.py\tgemm\tsomeone/kernels\tsub/kernel.py\t{first}\tcuda\tpass\t\n"
                      + f"k2.py\tgemm\tsomeone/kernels\tsub/gone.py\t{first}\tcuda\tfail\t\n")
    calibration = tmp_path / "calibration.tsv"
    calibration.write_text("id\tproblem\trepo\tcommit\tpath\tkind\tshape\tb200_us\trunner\tevidence\n"
                           f"c1\tgemm\tsomeone/kernels\t{first}\tsub/kernel.py\tcuda\tm=1\t1.0\tr\te\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, SCRIPT, "--mirrors", str(mirrors), "--corpus", str(corpus),
                           "--calibration", str(calibration), "--out", str(out), "--clones", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (out / "k1.py").read_text() == "VERSION = 1\n"          # the listed commit, not the newest
    assert (out / "calibration" / "files" / "c1.py").read_text() == "VERSION = 1\n"
    assert not (out / "k2.py").exists()
    missed = [line for line in done.stdout.splitlines() if line.startswith("missed")]
    assert len(missed) == 1 and "sub/gone.py" in missed[0], done.stdout
    assert (out / "MANIFEST.tsv").read_text() == corpus.read_text()
    assert "2 files written" in done.stdout and "1 missed" in done.stdout
