// Host-side check of the emulation library's tcgen05.alloc rules (tests/test_tcgen05_isa_rules.py): the library
// is included whole and its __host__ __device__ `emu_alloc_verdict`, `emu_alloc_size` and `emu_alloc_pick` run on
// the CPU. Reads lines from stdin:
//   "<count>"                        prints "<count> -> <verdict code> <columns taken>"
//   "pick <free> <settled> <need>"   (masks in hex, one bit per 32-column granule) prints "pick -> <granule or -1>"
//   "deadlock <owners> <waiters>"    owners: 16 comma-separated CTA tags, one per granule (0 = free); waiters:
//                                    comma-separated tag:granules pairs ("-" for none); prints "deadlock -> 0|1"
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
    } else if (std::strcmp(word, "deadlock") == 0) {
      char owners_text[256], waiters_text[512];
      if (std::scanf("%255s %511s", owners_text, waiters_text) != 2) return 1;
      unsigned long long owner[EMU_GRANULES] = {0}, waiter[EMU_ALLOC_WAITERS] = {0};
      uint32_t need[EMU_ALLOC_WAITERS] = {0};
      char* p = owners_text;
      for (int g = 0; g < EMU_GRANULES && *p; ++g) {
        owner[g] = std::strtoull(p, &p, 10);
        if (*p == ',') ++p;
      }
      p = waiters_text;
      for (int w = 0; w < EMU_ALLOC_WAITERS && *p && *p != '-'; ++w) {
        waiter[w] = std::strtoull(p, &p, 10);
        if (*p == ':') ++p;
        need[w] = (uint32_t)std::strtoul(p, &p, 10);
        if (*p == ',') ++p;
      }
      std::printf("deadlock -> %d\n", emu_alloc_deadlocked(owner, waiter, need) ? 1 : 0);
    } else {
      const unsigned n = (unsigned)std::strtoul(word, nullptr, 10);
      std::printf("%u -> %u %u\n", n, emu_alloc_verdict(n), emu_alloc_size(n));
    }
  }
  return 0;
}
