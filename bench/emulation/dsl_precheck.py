"""CPU pre-check of CuTe DSL and Triton submissions under --emulate-blackwell: does each compile for sm_100 and
does the emulation's rewriter accept its PTX? No GPU needed; it stops where a driver would be.

    python3 bench/emulation/dsl_precheck.py TASK:FILE [TASK:FILE ...]     (TASK: `.` or tasks/<name>)

One row per file:  file | task | verdict | seconds, the verdict being "compiles: ..." or the one line that stops it.
Each file runs in its own process (the DSL keeps state per process).

CuTe DSL: the hook of arena/blackwell/cute_dsl.py is installed (CUTE_DSL_ARCH=sm_100a, the DSL's PTX through the
ptxas shim, an sm_90a cubin embedded); `Compiler.jit`, the step that needs a driver, is replaced by a stop that
reads the compiled module. The submission is called as the harness would, on the task's first test case, with
the inputs on the CPU (make_ptr-style submissions only read data_ptr()).
Triton: every @triton.jit kernel the submission launches is compiled (triton.compile, target cuda:100) from the
launch's arguments, through the same ptxas shim, instead of being launched.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r'''
import importlib.util, os, re, sys, traceback
sys.path.insert(0, ROOT)
from arena.blackwell import toolchain
os.environ.update(toolchain.prepare())
task_dir = os.path.join(ROOT, TASK)
sys.path.insert(0, task_dir)
for name in ("task", "reference", "utils"):
    sys.modules.pop(name, None)
import yaml
case = yaml.safe_load(open(os.path.join(task_dir, "task.yml")))["tests"][0]
source = open(FILE).read()
uses_dsl = re.search(r"^\s*(import cutlass|from cutlass)", source, re.M) is not None
uses_triton = re.search(r"^\s*(import triton|from triton)", source, re.M) is not None
from arena.blackwell import dsl_versions       # a pinned CuTe DSL version that the checkout holds, as the worker
from arena.blackwell.missing import installed_dsl_version
if dsl_versions.activate(source, installed_dsl_version()):
    print("CuTe DSL", dsl_versions.pinned_version(source), "from", dsl_versions.VERSIONS_DIR, file=sys.stderr)

class Stop(Exception):
    pass

found = []
if uses_dsl:
    from arena.blackwell import cute_dsl
    cute_dsl.install()
    from cutlass.base_dsl import compiler
    from cutlass._mlir import ir
    def jit(self, module, *args, **kwargs):
        for op in module.body.operations:
            o = op.operation
            if o.name == "llvm.mlir.global" and "value" in o.attributes:
                try:
                    blob = ir.StringAttr(o.attributes["value"]).value_bytes
                except ValueError:
                    continue
                if blob[:4] == b"\x7fELF":
                    found.append((blob[48:52], len(blob)))
        raise Stop()
    compiler.Compiler.jit = jit
if uses_triton:
    from arena.blackwell import triton_target
    triton_target.install()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton import knobs
    from triton.compiler import ASTSource, compile as triton_compile, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature
    def stop_run(self, *args, grid, warmup, **kwargs):
        # JITFunction.run up to its compile, for cuda:100 and without a driver; the launch is where it stops
        kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        for hook in self.pre_run_hooks:
            hook(*args, **kwargs)
        target = GPUTarget("cuda", 100, 32)
        backend = make_backend(target)
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound_args, specialization, options)
        kernel = triton_compile(ASTSource(self, signature, constexprs, attrs), target=target, options=options.__dict__)
        raise Stop(("triton", kernel))
    JITFunction.run = stop_run

import torch
_dev = torch.cuda.get_device_properties
class _Props:
    multi_processor_count = 148
torch.cuda.get_device_properties = lambda *a, **k: _Props()

spec = importlib.util.spec_from_file_location("submission", FILE)
module = importlib.util.module_from_spec(spec)
sys.modules["submission"] = module
import reference
try:
    spec.loader.exec_module(module)
    data = reference.generate_input(**case)
    module.custom_kernel(data)
    print("VERDICT ran to the end without reaching a compile (nothing to check)")
except BaseException as raised:     # the DSL wraps our Stop in its own DSLRuntimeError ("ICE", cause=Stop)
    chain, e = [], raised
    while e is not None and e not in chain:
        chain.append(e)
        e = getattr(e, "cause", None) or e.__cause__ or e.__context__
    stop = next((x for x in chain if isinstance(x, Stop)), None)
    if stop is None:
        e = raised
        lines = [l for l in str(e).strip().splitlines() if l.strip()]
        where = traceback.extract_tb(e.__traceback__)
        tail = where[-1] if where else None
        line = lines[0] if lines else ""
        if len(lines) > 1:
            pick = [l for l in lines if "emulate-blackwell:" in l] or [l for l in lines if "error" in l.lower()]
            line = (pick or lines)[0]
        origin = f" [{os.path.basename(tail.filename)}:{tail.lineno}]" if tail else ""
        if os.environ.get("PRECHECK_VERBOSE"):
            traceback.print_exc()
        print(f"VERDICT {type(e).__name__}: {line.strip()[:400]}{origin}")
        sys.exit(0)
    if stop.args and isinstance(stop.args[0], tuple):
        kernel = stop.args[0][1]
        ptx, cubin = kernel.asm["ptx"], kernel.asm["cubin"]
        sm = (int.from_bytes(cubin[48:52], "little") >> 8) & 0xFF
        kind = re.search(r"tcgen05\.mma\S*kind::(\w+)", ptx)
        print(f"VERDICT compiles: cuda:100 PTX ({'tcgen05.mma .kind::' + kind.group(1) if kind else 'no tcgen05.mma'})"
              f" rewritten, sm_{sm}a cubin of {len(cubin)} bytes")
    elif found:
        flags, size = found[-1]
        sm = (int.from_bytes(flags, "little") >> 8) & 0xFF
        print(f"VERDICT compiles: sm_100a PTX rewritten, sm_{sm}a cubin of {size} bytes embedded ({len(found)} module(s))")
    else:
        print("VERDICT stopped before any embedded cubin")
'''


def check(task: str, path: str, limit: int) -> tuple[str, float]:
    start = time.time()
    script = f"ROOT = {ROOT!r}\nTASK = {task!r}\nFILE = {os.path.abspath(path)!r}\n" + CHILD
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=limit,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"timed out after {limit} s", time.time() - start
    if os.environ.get("PRECHECK_VERBOSE"):
        sys.stderr.write(done.stderr)
    verdicts = [x[len("VERDICT "):] for x in done.stdout.splitlines() if x.startswith("VERDICT ")]
    if verdicts:
        return verdicts[-1], time.time() - start
    err = [x for x in done.stderr.strip().splitlines() if x.strip()]
    return f"exit {done.returncode}: {(err[-1] if err else '')[:400]}", time.time() - start


def main(argv: list[str]) -> int:
    limit = int(os.environ.get("LIMIT", "900"))
    for item in argv:
        task, _, path = item.partition(":")
        if not os.path.exists(path):
            print(f"{path} | {task} | missing | 0")
            continue
        verdict, seconds = check(task, path, limit)
        print(f"{path} | {task} | {verdict} | {seconds:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
