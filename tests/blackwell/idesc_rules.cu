// Host-side check of the emulation library's instruction-descriptor rules (tests/test_tcgen05_isa_rules.py):
// the library is included whole and its __host__ __device__ decoder runs on the CPU. Prints, per line,
// "<kind> <idesc hex> <vec> -> <error code> <second value>" for each descriptor given on stdin.
#include <cstdio>
#include <cstdint>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

int main() {
  unsigned kind, idesc, vec;
  while (std::scanf("%u %x %u", &kind, &idesc, &vec) == 3) {
    EmuMma m;
    const uint32_t err = emu_idesc(kind, idesc, vec, m);
    std::printf("%u %08x %u -> %u %x\n", kind, idesc, vec, err, err == E_IDESC_RESERVED ? emu_idesc_reserved(kind, idesc) : 0u);
  }
  return 0;
}
