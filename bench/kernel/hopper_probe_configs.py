"""One probe build of the Hopper kernel (bench/kernel/hopper_gemm.py --probes MODE), timed under forced (MB, C, G)
configurations on the three M = 128 shapes: which part of a configuration's time is its loads?
    python3 bench/kernel/hopper_probe_configs.py MODE MB:C[:G] ...     e.g. 78 1:1 1:2 1:2:2 2:4"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hopper_gemm as h  # noqa: E402

mode = int(sys.argv[1])
mod = h.build_probe(mode) if mode else h.submission._sm90_module()
main = h.submission._sm90_module()   # the workspace and counters every build shares live in submission's cache
h.submission._sm90_buffers(main, h.torch.device("cuda", 0), 4096, 7168, 1)
shapes = h.BENCH
print(f"mode {mode}, us: " + " / ".join(f"{m}x{n}x{k}" for (m, n, k, _) in shapes))
for spec in sys.argv[2:]:
    mb, cl, gr = ([int(x) for x in spec.split(":")] + [1])[:3]
    row = []
    for (m, n, k, l) in shapes:
        try:
            row.append(f"{h.time_probe(mod, m, n, k, l, 30, mb, cl, gr):7.1f}")
        except RuntimeError as e:   # a configuration the launcher refuses for this shape: say why, go on
            row.append("refused")
            print(f"  {spec} {m}x{n}x{k}: {str(e).splitlines()[0][:160]}", flush=True)
    print(f"  {spec:7s} " + " ".join(row), flush=True)
