// Host-side check of where the emulation library reads an MMA operand element in shared memory
// (tests/test_tcgen05_isa_rules.py): the library is included whole and its __host__ __device__ position
// functions run on the CPU. Prints, per line "<kind> <fmt> <bits> <k>" on stdin, "<width> <bit offset>".
#include <cstdio>
#include <cstdint>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

int main() {
  unsigned kind, fmt, bits, k;
  while (std::scanf("%u %u %u %u", &kind, &fmt, &bits, &k) == 4) {
    const uint32_t width = emu_smem_width(kind, fmt, bits);
    std::printf("%u %u\n", width, emu_smem_bit(k, bits, width));
  }
  return 0;
}
