// Host-only unit test of the tcgen05 descriptor encoders (tcgen05_desc.h, used by the kernel) and the
// emulator's decoders (tcgen05_emu_decode.h, used by the emulation build). Build: g++ -std=c++17 -O1.
// Prints one "PASS name" / "FAIL name ..." line per check and "ALL PASS" at the end; exit code 0 iff all pass.
// Driven by tests/test_tcgen05_descriptors.py.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "tcgen05_desc.h"
#include "tcgen05_emu_decode.h"

static int g_fail = 0;
#define CHECK(name, cond, ...)                                   \
  do {                                                           \
    if (cond) std::printf("PASS %s\n", name);                    \
    else { std::printf("FAIL %s: ", name); std::printf(__VA_ARGS__); std::printf("\n"); ++g_fail; } \
  } while (0)

int main() {
  using namespace t5;
  using namespace t5emu;
  // ---- instruction descriptor: documented values (tcgen05.md section 1.1)
  CHECK("idesc_128x256", make_idesc_mxf4nvf4(128, 256) == 0x08400480u, "got 0x%08x", make_idesc_mxf4nvf4(128, 256));
  CHECK("idesc_128x128", make_idesc_mxf4nvf4(128, 128) == 0x08200480u, "got 0x%08x", make_idesc_mxf4nvf4(128, 128));
  CHECK("idesc_128x64", make_idesc_mxf4nvf4(128, 64) == 0x08100480u, "got 0x%08x", make_idesc_mxf4nvf4(128, 64));
  CHECK("idesc_256x256_ctagroup2_value", make_idesc_mxf4nvf4(256, 256) == 0x10400480u, "got 0x%08x",
        make_idesc_mxf4nvf4(256, 256));
  // the recipe GN used on B200: (1<<7)|(1<<10)|(N>>3)<<17|(128>>7)<<27
  for (unsigned n = 8; n <= 256; n += 8) {
    unsigned want = (1u << 7) | (1u << 10) | ((n >> 3) << 17) | ((128u >> 7) << 27);
    if (make_idesc_mxf4nvf4(128, n) != want) { CHECK("idesc_recipe_all_N", false, "N=%u", n); break; }
    IDesc d = decode_idesc_mxf4nvf4(want);
    if (d.error || d.M != 128 || d.N != n || d.atype != 1 || d.btype != 1 || d.scale_type != 0) {
      CHECK("idesc_decode_all_N", false, "N=%u err=%u M=%u N=%u", n, d.error, d.M, d.N); break;
    }
  }
  CHECK("idesc_recipe_and_decode_all_N", true, "-");
  {
    IDesc d = decode_idesc_mxf4nvf4(0x08100480u | (1u << 4));  // kind::f16 habit "F32 accumulate" = SFB id 1
    CHECK("idesc_sfb_id_trap", d.error == kErrIdescSfId, "err=%u", d.error);
    d = decode_idesc_mxf4nvf4((0x08100480u & ~(7u << 7)) | (5u << 7));  // E2M1 code of kind::mxf8f6f4
    CHECK("idesc_atype5_rejected", d.error == kErrIdescAType, "err=%u", d.error);
    d = decode_idesc_mxf4nvf4(0x08100480u | (1u << 23));
    CHECK("idesc_ue8m0_rejected", d.error == kErrIdescScaleType, "err=%u", d.error);
    d = decode_idesc_mxf4nvf4(0x08100480u | (1u << 13));
    CHECK("idesc_negate_a_decoded", d.error == 0 && d.neg_a == 1, "err=%u", d.error);
    d = decode_idesc_mxf4nvf4(0x08100480u | (1u << 15));
    CHECK("idesc_transpose_rejected", d.error == kErrIdescTranspose, "err=%u", d.error);
    // CUTLASS writes M>>4 at bits 24-28: identical word for M = 128
    CHECK("idesc_cutlass_m_encoding", ((128u >> 4) << 24) == ((128u >> 7) << 27), "-");
  }
  // ---- shared-memory descriptor
  {
    const uint32_t addr = 0x1C400;
    const uint64_t d = make_operand_desc_kmajor_sw128(addr);
    const uint64_t want = (uint64_t)(addr >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 46) | (2ull << 61);
    CHECK("sdesc_operand_value", d == want, "got 0x%016llx want 0x%016llx", (unsigned long long)d, (unsigned long long)want);
    SDesc s = decode_smem_desc(d);
    CHECK("sdesc_operand_decode", s.error == 0 && s.start == addr && s.sbo == 1024 && s.lbo == 16 && s.version == 1 &&
          s.swizzle == 2 && s.base_offset == 0 && s.lbo_mode == 0, "err=%u start=%x sbo=%u", s.error, s.start, s.sbo);
    CHECK("sdesc_advance_32B_is_plus2", make_operand_desc_kmajor_sw128(addr + 32) == d + 2, "-");
    const uint64_t f = make_sf_desc(0x2000);
    const uint64_t fw = (uint64_t)(0x2000 >> 4) | (8ull << 32) | (1ull << 46);
    CHECK("sdesc_sf_value", f == fw, "got 0x%016llx", (unsigned long long)f);
    CHECK("sdesc_sf_advance_atom_is_plus32", make_sf_desc(0x2000 + 512) == f + 32, "-");
    s = decode_smem_desc(d & ~(1ull << 46));
    CHECK("sdesc_missing_version_bit_rejected", s.error == kErrSdescVersion, "err=%u", s.error);
    s = decode_smem_desc((d & ~(7ull << 61)) | (3ull << 61));  // TMA enum value for 128B is 3: invalid here
    CHECK("sdesc_swizzle3_rejected", s.error == kErrSdescSwizzle, "err=%u", s.error);
    CHECK("sm90_layout_type_coincides", (1ull << 62) == (2ull << 61) && (2ull << 62) == (4ull << 61) && (3ull << 62) == (6ull << 61), "-");
  }
  // ---- TMEM addresses and the kernel's column plan
  CHECK("tmem_addr", tmem_addr(0, 32, 7) == ((32u << 16) | 7u) && tmem_lane(tmem_addr(0, 96, 3)) == 96 && tmem_col(tmem_addr(0, 96, 3)) == 3, "-");
  {
    bool ok = true;
    for (int s = 0; s < kStages; ++s)
      for (int j = 0; j < 4; ++j)
        for (int n0 = 0; n0 < 256; n0 += kBlockN) {
          if (sfb_col(s, j, n0) & 1u) ok = false;                       // 8-byte aligned SFB
          if (sfa_col(s, j) + 4 > (uint32_t)kTmemCols || sfb_cp_col(s, j) + 4 > (uint32_t)kTmemCols) ok = false;
          if (sfa_col(s, j) < (uint32_t)kAccCols) ok = false;
        }
    CHECK("tmem_column_plan", ok, "-");
  }
  // ---- number formats
  {
    const float lut[8] = {0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    bool ok = true;
    for (unsigned c = 0; c < 16; ++c) if (e2m1_to_float(c) != (c & 8 ? -lut[c & 7] : lut[c & 7])) ok = false;
    CHECK("e2m1_lut", ok, "-");
    CHECK("ue4m3_values", ue4m3_to_float(0x38) == 1.f && ue4m3_to_float(0x40) == 2.f && ue4m3_to_float(0x44) == 3.f &&
          ue4m3_to_float(0x01) == std::ldexp(1.f, -9) && ue4m3_to_float(0x7E) == 448.f && ue4m3_to_float(0) == 0.f &&
          std::isnan(ue4m3_to_float(0x7F)), "-");
  }
  // ---- swizzled operand addressing == TMA SWIZZLE_128B placement (chunk c of row r at c ^ (r % 8))
  {
    bool ok = true;
    const uint32_t base = 0x8000;  // 1024-aligned tile
    for (int j = 0; j < 4; ++j) {
      SDesc s = decode_smem_desc(make_operand_desc_kmajor_sw128(base + 32 * j));
      for (uint32_t r = 0; r < 128; ++r)
        for (uint32_t kb = 0; kb < 32; kb += 16) {
          const uint32_t chunk = (uint32_t)(2 * j) + kb / 16;
          if (kmajor_chunk_addr(s, r, kb) != base + r * 128 + ((chunk ^ (r % 8)) * 16)) ok = false;
        }
    }
    CHECK("sw128_kmajor_matches_tma_placement", ok, "-");
  }
  // ---- end to end on the CPU: TMA-placed tiles + blocked scale atoms -> cp -> 4 MMAs -> compare
  {
    const int M = 128, N = 64, K = 256, n0 = 64;  // B rows 64..127 of a 128-row scale atom group
    srand(7);
    std::vector<uint8_t> A(M * K / 2), B(128 * K / 2), SA(M * K / 16), SB(128 * K / 16);
    for (auto& x : A) x = rand() & 0xFF;
    for (auto& x : B) x = rand() & 0xFF;
    const uint8_t sfv[4] = {0x00, 0x38, 0x40, 0x44};  // 0,1,2,3
    for (auto& x : SA) x = sfv[rand() & 3];
    for (auto& x : SB) x = sfv[rand() & 3];
    std::vector<uint8_t> smem(1 << 16, 0xEE);
    const uint32_t a_off = 0x0000, b_off = 0x4000, sfa_off = 0x6000, sfb_off = 0x6800;
    for (int r = 0; r < M; ++r)
      for (int byte = 0; byte < 128; ++byte)
        smem[a_off + r * 128 + (((byte / 16) ^ (r % 8)) * 16) + byte % 16] = A[r * 128 + byte];
    for (int r = 0; r < N; ++r)
      for (int byte = 0; byte < 128; ++byte)
        smem[b_off + r * 128 + (((byte / 16) ^ (r % 8)) * 16) + byte % 16] = B[(n0 + r) * 128 + byte];
    // blocked layout (harness.md section 2): atom cb (64 K), byte r32*16 + r4*4 + c4
    for (int r = 0; r < 128; ++r)
      for (int kb = 0; kb < K / 16; ++kb) {
        smem[sfa_off + (kb / 4) * 512 + (r % 32) * 16 + (r / 32) * 4 + kb % 4] = SA[r * 16 + kb];
        smem[sfb_off + (kb / 4) * 512 + (r % 32) * 16 + (r / 32) * 4 + kb % 4] = SB[r * 16 + kb];
      }
    std::vector<uint32_t> tmem(128 * 512, 0xFFC0DEADu);
    auto cp = [&](uint32_t taddr, uint64_t desc) {
      SDesc s = decode_smem_desc(desc);
      for (uint32_t t = 0; t < 32; ++t) {
        uint32_t w[4];
        std::memcpy(w, &smem[cp32x128b_src_row_addr(s, t)], 16);
        for (uint32_t q = 0; q < 4; ++q)
          for (uint32_t c = 0; c < 4; ++c) tmem[(32 * q + t) * 512 + taddr_col(taddr) + c] = w[c];
      }
    };
    float D[128][64];
    for (int j = 0; j < 4; ++j) {
      cp(sfa_col(0, j), make_sf_desc(sfa_off + j * 512));
      cp(sfb_cp_col(0, j), make_sf_desc(sfb_off + j * 512));
    }
    const IDesc id = decode_idesc_mxf4nvf4(make_idesc_mxf4nvf4(M, N));
    for (int j = 0; j < 4; ++j) {
      SDesc da = decode_smem_desc(make_operand_desc_kmajor_sw128(a_off + 32 * j));
      SDesc db = decode_smem_desc(make_operand_desc_kmajor_sw128(b_off + 32 * j));
      const uint32_t ac = sfa_col(0, j), bc = sfb_col(0, j, n0);
      for (uint32_t m = 0; m < id.M; ++m)
        for (uint32_t n = 0; n < id.N; ++n) {
          float acc = j ? D[m][n] : 0.f;
          const uint32_t saw = tmem[sf4x_lane(m) * 512 + sf4x_col(ac, m)], sbw = tmem[sf4x_lane(n) * 512 + sf4x_col(bc, n)];
          for (int blk = 0; blk < 4; ++blk) {
            float s = 0;
            for (int e = 0; e < 16; ++e) {
              const int kk = blk * 16 + e, byte = kk / 2, sh = (kk & 1) * 4;
              const uint8_t ab = smem[kmajor_chunk_addr(da, m, byte & ~15) + (byte & 15)];
              const uint8_t bb = smem[kmajor_chunk_addr(db, n, byte & ~15) + (byte & 15)];
              s += e2m1_to_float((ab >> sh) & 15) * e2m1_to_float((bb >> sh) & 15);
            }
            acc += s * ue4m3_to_float((saw >> (8 * blk)) & 0xFF) * ue4m3_to_float((sbw >> (8 * blk)) & 0xFF);
          }
          D[m][n] = acc;
        }
    }
    double maxerr = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0;
        for (int k = 0; k < K; ++k) {
          const uint8_t ab = A[m * 128 + k / 2], bb = B[(n0 + n) * 128 + k / 2];
          const int sh = (k & 1) * 4;
          ref += (double)e2m1_to_float((ab >> sh) & 15) * ue4m3_to_float(SA[m * 16 + k / 16]) *
                 (double)e2m1_to_float((bb >> sh) & 15) * ue4m3_to_float(SB[(n0 + n) * 16 + k / 16]);
        }
        maxerr = std::fmax(maxerr, std::fabs(ref - D[m][n]));
      }
    CHECK("cpu_cp_mma_pipeline_exact", maxerr == 0.0, "max abs err %g", maxerr);
  }
  if (g_fail == 0) std::printf("ALL PASS\n");
  return g_fail ? 1 : 0;
}
