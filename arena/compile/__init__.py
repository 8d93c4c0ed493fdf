"""`eval.py compile`: build a submission's CUDA sources with nvcc, without a GPU, and summarise them.

The modules, each importing only those named before it: archs.py (what each arch is: flags, MMA instructions, a
source's targets), sources.py (finding the sources in the submission's syntax tree), nvcc.py (tools, the
command line, torch's and CUTLASS's headers), diagnosis.py (one line naming why a build
failed, also the worker's for load_inline), build.py (one source for one arch in the jail, ptxas usage and SASS),
verdict.py (problems, the table). A source is built for the archs it is written for; for others it is
"not targeted", never failed. Tensor-core instructions are required only where the task or `--expect mma`
asks. This face hands on the names eval.py, arena/worker/spawn.py, tests and bench use.
"""
from arena.compile.archs import EMULATED, split_arch_flags, target_archs
from arena.compile.diagnosis import build_failure, load_inline_failure
from arena.compile.build import BUILT, FAILED, NOT_TARGETED, Build, compile_submission, parse_ptxas
from arena.compile.nvcc import cutlass_include_dirs, find_tool
from arena.compile.sources import CompileError, Source, cuda_sources, find_sources
from arena.compile.verdict import problems, report

__all__ = ["BUILT", "EMULATED", "FAILED", "NOT_TARGETED", "Build", "CompileError", "Source", "build_failure",
           "compile_submission", "cuda_sources", "cutlass_include_dirs", "find_sources", "find_tool",
           "load_inline_failure", "parse_ptxas", "problems", "report", "split_arch_flags", "target_archs"]
