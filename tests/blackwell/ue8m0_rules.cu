// Host-side check of the emulation library's UE8M0 conversions (tests/test_tcgen05_isa_rules.py): the library is
// included whole and its __host__ __device__ conversion functions run on the CPU, next to cuda_fp8.h's host code
// (NVIDIA's software version of cvt.{rz,rp}{.satfinite}.ue8m0x2 and cvt.rn.bf16x2.ue8m0x2).
// stdin, one request a line:
//   "f <mode> <hex f32 bits>"  -> "<hex ue8m0>"   mode: bit 0 .rp (else .rz), bit 1 .satfinite
//   "b <hex ue8m0>"            -> "<hex bf16>"
//   "sweep"                    -> "<cases> <mismatches> <first mismatch or ->" against cuda_fp8.h: every bf16
//                                 input, f32 inputs (every high half with six low halves), both roundings, with
//                                 and without .satfinite; every ue8m0 -> bf16.
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cuda_fp8.h>
#include "../../arena/blackwell/tcgen05_library.cu"
extern "C" { __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS]; }   // emulation_host.h defines it in a real build

static uint32_t header_f32(uint32_t bits, uint32_t mode) {
  float x;
  std::memcpy(&x, &bits, 4);
  return __nv_cvt_float_to_e8m0(x, (mode & 2u) ? __NV_SATFINITE : __NV_NOSAT,
                                (mode & 1u) ? cudaRoundPosInf : cudaRoundZero);
}

static uint32_t header_bf16(uint32_t bits, uint32_t mode) {
  __nv_bfloat16_raw r;
  r.x = (unsigned short)bits;
  return __nv_cvt_bfloat16raw_to_e8m0(r, (mode & 2u) ? __NV_SATFINITE : __NV_NOSAT,
                                      (mode & 1u) ? cudaRoundPosInf : cudaRoundZero);
}

int main() {
  char what[16];
  while (std::scanf("%15s", what) == 1) {
    if (!std::strcmp(what, "f")) {
      unsigned mode, bits;
      if (std::scanf("%u %x", &mode, &bits) != 2) return 2;
      std::printf("%02x\n", emu_ue8m0_from_f32_bits(bits, mode & 1u, mode & 2u));
    } else if (!std::strcmp(what, "b")) {
      unsigned e;
      if (std::scanf("%x", &e) != 1) return 2;
      std::printf("%04x\n", emu_bf16_from_ue8m0(e));
    } else if (!std::strcmp(what, "sweep")) {
      unsigned long long cases = 0, bad = 0;
      char first[128] = "-";
      const uint32_t lows[6] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
      for (uint32_t mode = 0; mode < 4; ++mode) {
        for (uint32_t hi = 0; hi < 0x10000u; ++hi) {
          const uint32_t got_b = emu_ue8m0_from_f32_bits(hi << 16, mode & 1u, mode & 2u), want_b = header_bf16(hi, mode);
          ++cases;
          if (got_b != want_b && !bad++) std::snprintf(first, sizeof first, "bf16:%u:%04x:%02x:%02x", mode, hi, got_b, want_b);
          for (uint32_t lo : lows) {
            const uint32_t bits = hi << 16 | lo;
            const uint32_t got = emu_ue8m0_from_f32_bits(bits, mode & 1u, mode & 2u), want = header_f32(bits, mode);
            ++cases;
            if (got != want && !bad++) std::snprintf(first, sizeof first, "f32:%u:%08x:%02x:%02x", mode, bits, got, want);
          }
        }
      }
      for (uint32_t e = 0; e < 256; ++e) {
        const uint32_t got = emu_bf16_from_ue8m0(e), want = __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)e).x;
        ++cases;
        if (got != want && !bad++) std::snprintf(first, sizeof first, "to_bf16:%02x:%04x:%04x", e, got, want);
      }
      std::printf("%llu %llu %s\n", cases, bad, first);
    } else {
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
