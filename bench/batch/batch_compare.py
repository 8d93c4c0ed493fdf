"""Compare the times of two evaluations of the same submissions, per submission and case:
    python3 bench/batch/batch_compare.py BASE.jsonl OTHER.jsonl          # two `eval.py batch` runs
    python3 bench/batch/batch_compare.py --singles DIR OTHER.jsonl       # DIR/<name>.json from single `eval.py --json`
    python3 bench/batch/batch_compare.py ROWS.jsonl                      # one batch: its rows and span
Prints base µs, other µs and the difference, the largest difference, each batch's span and which GPUs it used,
and whether two evaluations ever overlapped on one GPU."""
import json
import os
import sys


def rows_of(path: str) -> dict:
    return {os.path.basename(r["path"]): r for r in map(json.loads, open(path)) if r.get("evaluated")}


def means_of_row(row: dict) -> dict:
    return {c["index"]: c["mean_us"] for c in row["cases"] if c.get("mean_us")}


def means_of_single(path: str) -> dict:
    doc = json.load(open(path))
    return {c["index"]: c["stats"]["mean"] / 1e3 for c in doc["cases"] if c.get("stats")}


def span(rows: dict) -> float:
    return max(r["finished"] for r in rows.values()) - min(r["started"] for r in rows.values())


def overlaps(rows: dict) -> list[str]:
    """Two evaluations on one GPU at the same time (never allowed)."""
    found, by_gpu = [], {}
    for name, r in rows.items():
        by_gpu.setdefault(r.get("cuda_visible_devices"), []).append((r["started"], r["finished"], name))
    for gpu, spans in by_gpu.items():
        spans.sort()
        for (s0, f0, n0), (s1, f1, n1) in zip(spans, spans[1:]):
            if s1 < f0 - 0.5 and gpu is not None:
                found.append(f"GPU {gpu}: {n0} and {n1}")
    return found


def listing(path: str):
    """One batch alone: each row's per-case µs, where it ran, and the batch's span."""
    rows = rows_of(path)
    for name in sorted(rows):
        means = means_of_row(rows[name])
        shown = " / ".join(f"{m:.2f}" for _, m in sorted(means.items())) or (rows[name].get("error") or "")[:70]
        print(f"{name:32} GPU {rows[name].get('cuda_visible_devices')}  {rows[name]['wall_s']:>6.1f} s  {shown}")
    print(f"{len(rows)} rows, span {span(rows):.1f} s; overlapping evaluations on one GPU: "
          + ("; ".join(overlaps(rows)) or "none"))


def main(argv):
    if len(argv) == 1:
        return listing(argv[0])
    singles = argv[0] == "--singles"
    if singles:
        folder, other = argv[1], rows_of(argv[2])
        base = {name: means_of_single(os.path.join(folder, name[:-3] + ".json")) for name in other
                if os.path.exists(os.path.join(folder, name[:-3] + ".json"))}
        labels = ("single run", "batch")
    else:
        base_rows, other = rows_of(argv[0]), rows_of(argv[1])
        base = {name: means_of_row(r) for name, r in base_rows.items()}
        labels = ("batch, GPU 0 alone", "batch, every GPU")
    print(f"{'submission':32} {'case':>4} {labels[0]:>20} {labels[1]:>18} {'diff':>8}  GPU")
    worst = 0.0
    for name in sorted(other):
        mine = means_of_row(other[name])
        for index, mean in sorted(mine.items()):
            ref = base.get(name, {}).get(index)
            if ref is None:
                continue
            diff = (mean / ref - 1) * 100
            worst = max(worst, abs(diff))
            print(f"{name:32} {index:>4} {ref:>20.2f} {mean:>18.2f} {diff:>+7.2f}%  "
                  f"{other[name].get('cuda_visible_devices')}")
        if not mine:
            print(f"{name:32} {'—':>4} {'(no times: ' + (other[name].get('error') or 'failed')[:60] + ')'}")
    print(f"largest difference: {worst:.2f} %")
    gpus = sorted({str(r.get("cuda_visible_devices")) for r in other.values()})
    print(f"{labels[1]}: {len(other)} rows, GPUs used {', '.join(gpus)}, span {span(other):.1f} s")
    if not singles:
        print(f"{labels[0]}: span {span(base_rows):.1f} s; ratio {span(other) / span(base_rows):.2f}")
    clash = overlaps(other)
    print("overlapping evaluations on one GPU: " + ("; ".join(clash) if clash else "none"))


if __name__ == "__main__":
    main(sys.argv[1:])
