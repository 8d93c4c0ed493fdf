"""Builds .public-blackwell/ (never committed) from the committed lists of public files: the agreement corpus
(bench/emulation/public_corpus.tsv: file, problem, repo, path, commit, style, the B200's outcome, judged_on) and the
B200 time model's calibration set (bench/prediction/calibration.tsv).

    python3 bench/emulation/fetch_public.py [--mirrors DIR] [--clones DIR] [--corpus TSV] [--calibration TSV] [--out DIR]

Each file is `git show <commit>:<path>` of its repository: from DIR/<owner>+<name>/repo when --mirrors names a folder
of bare mirrors laid out so, else from a clone of https://github.com/<owner>/<name> made (once, blobs on demand)
under --clones (default: ~/.cache/nvfp4-arena/public). Writes .public-blackwell/<file>, MANIFEST.tsv (the corpus
list, read by public_agreement.py) and calibration/files/<id>.py; prints one line per repository and the counts. A
file that cannot be had (repository gone, commit missing) is named on one line and the rest go on; exit status 1
if any was missed.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_LIST = os.path.join(ROOT, "bench", "emulation", "public_corpus.tsv")
CALIBRATION_LIST = os.path.join(ROOT, "bench", "prediction", "calibration.tsv")
OUT = os.path.join(ROOT, ".public-blackwell")


def read_tsv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def repository(repo: str, mirrors: str | None, clones: str) -> str:
    """A git directory holding `repo` (owner/name): the mirror if there is one, else a clone made once."""
    if mirrors:
        mirror = os.path.join(mirrors, repo.replace("/", "+"), "repo")
        if os.path.isdir(mirror):
            return mirror
    clone = os.path.join(clones, repo.replace("/", "+"))
    if not os.path.isdir(clone):
        subprocess.run(["git", "clone", "-q", "--bare", "--filter=blob:none", f"https://github.com/{repo}", clone],
                       check=True, capture_output=True, text=True)
    return clone


def show(git_dir: str, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", help="folder of bare mirrors, one per repository: <owner>+<name>/repo")
    parser.add_argument("--clones", default=os.path.expanduser("~/.cache/nvfp4-arena/public"))
    parser.add_argument("--corpus", default=CORPUS_LIST)
    parser.add_argument("--calibration", default=CALIBRATION_LIST)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    corpus, calibration = read_tsv(args.corpus), read_tsv(args.calibration)
    out = args.out
    wanted: list[tuple[str, str, str, str]] = [(r["repo"], r["commit"], r["path"], r["file"]) for r in corpus]
    seen = set()
    for r in calibration:
        if r["id"] not in seen:
            seen.add(r["id"])
            wanted.append((r["repo"], r["commit"], r["path"], os.path.join("calibration", "files", r["id"] + ".py")))
    os.makedirs(os.path.join(out, "calibration", "files"), exist_ok=True)
    missed, written, gits = 0, 0, {}
    for repo, commit, path, target in wanted:
        try:
            if repo not in gits:
                gits[repo] = repository(repo, args.mirrors, args.clones)
                print(f"{repo}: {gits[repo]}", flush=True)
            data = show(gits[repo], commit, path)
        except (subprocess.CalledProcessError, OSError) as error:
            missed += 1
            detail = getattr(error, "stderr", b"") or str(error)
            detail = detail.decode(errors="replace") if isinstance(detail, bytes) else detail
            print(f"missed {repo} {path} @{commit[:7]}: {' '.join(detail.split())[:200]}", flush=True)
            gits.setdefault(repo, "")
            continue
        with open(os.path.join(out, target), "wb") as f:
            f.write(data)
        written += 1
    shutil.copyfile(args.corpus, os.path.join(out, "MANIFEST.tsv"))
    print(f"{written} files written under {out} ({len(corpus)} in the corpus, {len(seen)} in the calibration set); "
          f"{missed} missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
