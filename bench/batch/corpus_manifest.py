"""The public corpus (.public-blackwell/MANIFEST.tsv, never committed) as a manifest for `eval.py batch`:
each file with its task folder, a spec file of its task's tests and benchmark shapes (or the benchmarks alone,
`judged_on: benchmarks`), and the B200's verdict as `expected`, the same cases bench/emulation/public_agreement.py
checks. Spec files are written beside the manifest.

    python3 bench/batch/corpus_manifest.py --out out/corpus_manifest.tsv [--only a.py,b.py] [--skip c.py] [--first N]
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "emulation"))
from public_agreement import CORPUS, TASKS, spec_file  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--skip", default="", help="comma-separated corpus files (as MANIFEST.tsv names them)")
    parser.add_argument("--only", default="", help="comma-separated corpus files: these alone")
    parser.add_argument("--first", type=int, default=0, help="only the first N files left (0: all)")
    args = parser.parse_args()
    source = os.path.join(CORPUS, "MANIFEST.tsv")
    if not os.path.isfile(source):
        print(f"no {source}: the corpus is fetched, never committed (see bench/README.md)", file=sys.stderr)
        return 2
    skip = {name for name in args.skip.split(",") if name}
    only = {name for name in args.only.split(",") if name}
    with open(source) as f:
        entries = [e for e in csv.DictReader(f, delimiter="\t")
                   if e["file"] not in skip and (not only or e["file"] in only) and os.path.isfile(os.path.join(CORPUS, e["file"]))]
    if args.first:
        entries = entries[:args.first]
    folder = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(folder, exist_ok=True)
    specs = {(e["problem"], e.get("judged_on") or ""): spec_file(e["problem"], e.get("judged_on") or "", folder)
             for e in entries}
    with open(args.out, "w") as f:
        f.write("file\ttask\tspec\texpected\tstyle\n")
        for e in entries:
            f.write(f"{os.path.join(CORPUS, e['file'])}\t{os.path.normpath(os.path.join(ROOT, TASKS[e['problem']]))}\t"
                    f"{specs[(e['problem'], e.get('judged_on') or '')]}\t{e['expected']}\t{e['style']}\n")
    print(f"{args.out}: {len(entries)} files ({len(skip)} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
