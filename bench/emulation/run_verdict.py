"""One eval.py run's verdict for the emulation checks' tables: `passed/total | first error line`.

    python3 bench/emulation/run_verdict.py RUN.json RUN.out EXIT_STATUS [WIDTH]

The first error comes from the JSON's failed case; without one (no JSON, or a run that stopped), from the run's
output: its first line naming the emulation or an error, marked "timed out (LIMIT)" for exit status 124 or 137.
Exits 0 when every case passed, else 1.
"""
import json
import sys


def main() -> int:
    json_path, out_path, rc = sys.argv[1:4]
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    cases, first = [], ""
    try:
        with open(json_path) as f:
            report = json.load(f)
        cases = report.get("cases") or report.get("results") or []
        first = next((c.get("error") or c.get("diagnosis") or "wrong output" for c in cases if not c.get("passed")), "")
    except (OSError, ValueError, AttributeError):
        pass
    if not cases or not first and rc != "0":
        try:
            with open(out_path, errors="replace") as f:
                lines = [x.strip() for x in f if x.strip()]
        except OSError:
            lines = []
        first = next((x for x in lines if "emulate" in x or "Error" in x or "error" in x), lines[-1] if lines else "")
        if rc in ("124", "137"):
            first = f"timed out (LIMIT); {first}"
    ok = sum(1 for c in cases if c.get("passed"))
    print(f"{ok}/{len(cases)} | " + " ".join(str(first).split())[:width])
    return 0 if cases and ok == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
