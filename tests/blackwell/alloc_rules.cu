// Host-side check of the emulation library's tcgen05.alloc column-count rule (tests/test_tcgen05_isa_rules.py):
// the library is included whole and its __host__ __device__ `emu_alloc_verdict` and `emu_alloc_size` run on the
// CPU. Prints, per column count given on stdin, "<count> -> <verdict code> <columns taken>".
#include <cstdio>
#include <cstdint>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

int main() {
  unsigned n;
  while (std::scanf("%u", &n) == 1) std::printf("%u -> %u %u\n", n, emu_alloc_verdict(n), emu_alloc_size(n));
  return 0;
}
