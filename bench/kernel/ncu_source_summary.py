"""Summarise an Nsight Compute source page (ncu --page source --csv --print-source sass): stall samples by
reason, and the SASS instructions with the most samples, with their neighbours.
    python3 bench/kernel/ncu_source_summary.py out/ncu_2304x4608x7168.csv [--top 25]"""
import argparse
import csv
from collections import Counter


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = list(csv.reader(f))
    print(rows[0][1][:100])
    head = rows[1]
    col = {name: i for i, name in enumerate(head)}
    body = [r for r in rows[2:] if len(r) == len(head)]
    num = lambda r, name: int(float(r[col[name]] or 0)) if r[col[name]] not in ("", "-") else 0  # noqa: E731
    reasons = [h for h in head if h.startswith("stall_") and not h.endswith("(Not Issued)")]
    total = sum(num(r, "Warp Stall Sampling (All Samples)") for r in body)
    by_reason = Counter({h: sum(num(r, h) for r in body) for h in reasons})
    print(f"{len(body)} instructions, {total} samples")
    for h, v in by_reason.most_common(10):
        print(f"  {h:24s} {v:8d} {100 * v / max(total, 1):5.1f} %")
    ops = Counter()
    for r in body:
        op = r[col["Source"]].split()[0] if r[col["Source"]].split() else "?"
        if op.startswith("@"):
            op = r[col["Source"]].split()[1]
        ops[op.split(".")[0]] += num(r, "Warp Stall Sampling (All Samples)")
    print("samples by opcode: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(12)))
    ranked = sorted(range(len(body)), key=lambda i: -num(body[i], "Warp Stall Sampling (All Samples)"))
    print(f"top {args.top} instructions (samples, main reasons):")
    for i in ranked[:args.top]:
        r = body[i]
        s = num(r, "Warp Stall Sampling (All Samples)")
        why = Counter({h[6:]: num(r, h) for h in reasons}).most_common(2)
        print(f"  [{i:5d}] {s:6d} {r[col['Source']].strip()[:60]:60s} {why}")


if __name__ == "__main__":
    main()
