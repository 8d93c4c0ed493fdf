// Host-side check of the emulation library's tcgen05.alloc rules (tests/test_tcgen05_isa_rules.py): the library
// is included whole and its __host__ __device__ `emu_alloc_verdict`, `emu_alloc_size` and `emu_alloc_pick` run on
// the CPU. Reads lines from stdin:
//   "<count>"                        prints "<count> -> <verdict code> <columns taken>"
//   "pick <free> <settled> <need>"   (masks in hex, one bit per 32-column granule) prints "pick -> <granule or -1>"
#include <cstdio>
#include <cstdint>
#include <cstring>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

int main() {
  char word[16];
  while (std::scanf("%15s", word) == 1) {
    if (std::strcmp(word, "pick") == 0) {
      unsigned free_mask, settled, need;
      if (std::scanf("%x %x %u", &free_mask, &settled, &need) != 3) return 1;
      std::printf("pick -> %d\n", emu_alloc_pick(free_mask, settled, need));
    } else {
      const unsigned n = (unsigned)std::strtoul(word, nullptr, 10);
      std::printf("%u -> %u %u\n", n, emu_alloc_verdict(n), emu_alloc_size(n));
    }
  }
  return 0;
}
