// Host-side check of the emulation library's shared-memory descriptor rules (tests/test_tcgen05_isa_rules.py):
// the library is included whole and its __host__ __device__ decoder `emu_sdesc` runs on the CPU. Prints, per
// descriptor given on stdin (hex), "<descriptor hex> -> <error code>".
#include <cstdio>
#include <cstdint>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

int main() {
  unsigned long long d;
  while (std::scanf("%llx", &d) == 1) std::printf("%016llx -> %u\n", d, emu_sdesc(d).err);
  return 0;
}
