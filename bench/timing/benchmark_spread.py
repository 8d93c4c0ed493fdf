"""Spread of repeated `eval.py benchmark --json` runs: per case, the means of each run, (max-min)/min and the
largest within-run standard error (% of that run's mean).
Usage: python bench/timing/benchmark_spread.py run1.json run2.json run3.json
"""
import json
import sys


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    print(f"{'case':52} " + " ".join(f"{'run ' + str(i + 1) + ' us':>12}" for i in range(len(runs))) + "   spread  max err")
    worst = 0.0
    for i, case in enumerate(runs[0]["cases"]):
        means = [r["cases"][i]["stats"]["mean"] / 1e3 if r["cases"][i]["stats"] else float("nan") for r in runs]
        spread = (max(means) - min(means)) / min(means) * 100
        worst = max(worst, spread)
        errs = [r["cases"][i]["stats"]["err"] / r["cases"][i]["stats"]["mean"] * 100
                for r in runs if r["cases"][i]["stats"]]
        print(f"{case['spec']:52} " + " ".join(f"{m:12.3f}" for m in means) + f"   {spread:5.2f}%"
              + (f"   {max(errs):5.2f}%" if errs else ""))
    geos = [r.get("geomean_us") for r in runs]
    if all(geos):
        print(f"{'geomean':52} " + " ".join(f"{g:12.3f}" for g in geos) +
              f"   {(max(geos) - min(geos)) / min(geos) * 100:5.2f}%")
    print(f"largest spread of a case mean: {worst:.2f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
