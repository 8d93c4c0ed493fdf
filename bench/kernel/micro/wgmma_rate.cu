// How fast can the Hopper kernel's instruction mix run the tensor cores, with no loads at all? Two consumer
// warpgroups per CTA (one CTA per SM, every SM) issue wgmma.m64nNk16 f16 -> f32 over a fixed shared-memory
// operand, in groups of 4 with wait_group 1 between register buffers, as kernels/sm90 does. Variants:
//   RS / SS:   A fragment from registers (the shipped kernel) or from shared memory
//   N, MB:     n128 with MB m64 blocks per warpgroup (MB = 2: the 256-row tile) or n256 with one block
//   decode:    each group's fragments decoded from fp4 words read from shared memory first (the consumer's
//              bit placement + scale multiply), so the issue cost of the decode sits between the wgmmas
//   fine:      decode one k16 step, fence, issue its wgmma, then the next step (the first wgmma of a group
//              starts after a quarter of the group's decode instead of all of it)
//   unused:    the same decode into other registers, the wgmmas reading fragments no instruction rewrote; the
//              group's first descriptor depends on the decoded words (min(d, d | x) == d), so the decode
//              still has to finish before the group issues
//   lds:       the fragments loaded straight from shared memory (16 loads a group, no arithmetic)
//   e4m3:      the decode the kernel uses (dec4_e4m3: nibbles placed as e4m3 bytes,
//              one hardware e4m3x2 -> f16x2 conversion and one HMUL2 per pair)
//   NB:        fragment buffers (wait_group NB-1): more groups in flight per warpgroup
//   pingpong:  the two warpgroups take turns to issue their groups (named barriers), so one decodes while
//              the other's wgmmas are being issued
//   ahead:     the fp4 words of the next group loaded right after this group's wgmmas are issued, so their
//              shared-memory latency (long while the tensor cores read their operand) is off the critical path
// Prints TFLOP/s (median of 7, CUDA events). Build and run on the device:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a wgmma_rate.cu -o w && ./w
#include <stdio.h>

#include "micro_common.cuh"

constexpr int THREADS = 256;    // two consumer warpgroups
constexpr int OPERAND_BYTES = 65536;   // B operand: up to 256 rows x 128 k fp16 (two 128B-swizzled atoms)

// One warpgroup's loop: `iters` k-blocks of 16 k16 steps per m64 block (128 k, as a stage of the kernel).
enum Dec { NONE, ALU, UNUSED, LDS, E4M3 };   // E4M3: dec4_e4m3 (fewer ALU operations, one F2FP per pair)
__device__ __forceinline__ void bar_sync(int id) { asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id) { asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory"); }

template <int N, int MB, bool RS, int DEC, bool FINE = false, int NB = 2, bool AHEAD = false, bool PP = false>
__global__ void __launch_bounds__(THREADS, 1) rate_kernel(int iters, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (su(smem_raw) & 1023)) & 1023);
  for (int i = threadIdx.x; i < OPERAND_BYTES / 4 + 4096; i += THREADS)
    ((uint32_t*)smem)[i] = 0x3C003C00u ^ (i * 0x9E3779B9u & 0x03FF03FFu);   // fp16 values near 1
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint32_t base = su(smem);
  const uint64_t bdesc = sw128_desc(base);
  const uint64_t adesc = sw128_desc(base + 32768);   // SS: an A tile over the same bytes (values do not matter)
  const int lane = threadIdx.x & 31;
  constexpr int ACC = N / 2;
  float acc[MB][ACC];
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < ACC; ++i) asm volatile("mov.b32 %0, 0;" : "=f"(acc[b][i]));   // (with a plain 0.f, ptxas
                                                                                  // serialized the MB 1 and n256 wgmmas: C7514)
  uint32_t frag[NB][4][4], junk[4][4];
#pragma unroll
  for (int u = 0; u < NB; ++u)
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int r = 0; r < 4; ++r) frag[u][k][r] = 0x3C003C00u ^ (threadIdx.x * 131 + u * 7 + k * 3 + r);
  const uint32_t words = base + OPERAND_BYTES + 64 * lane;   // fp4 words the decode reads
  uint32_t wn[4], s2n;   // AHEAD: the next group's words
#pragma unroll
  for (int i = 0; i < 4; ++i) wn[i] = lds32(words + 4 * (i & 15));
  s2n = lds32(words + 16) | 0x3C003C00u;
  const int wg = threadIdx.x >> 7;
  if (PP && wg == 1) bar_arrive(1);   // warpgroup 0 issues first
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int b = 0; b < MB; ++b) {
#pragma unroll
      for (int g2 = 0; g2 < 2; ++g2) {   // two groups of 4 k16 steps per scale column pair, as the kernel
        const int gi = (b * 2 + g2) % NB;   // fragment buffer
        wgmma_wait<NB - 1>();   // the group that last read frag[gi] is done
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)   // (re)written after the wait, as the kernel's fragments are
          asm volatile("" : "+r"(frag[gi][kk][0]), "+r"(frag[gi][kk][1]), "+r"(frag[gi][kk][2]), "+r"(frag[gi][kk][3]) :: "memory");
        uint32_t w[4] = {0, 0, 0, 0}, s2 = 0;
        if (AHEAD) {
#pragma unroll
          for (int i = 0; i < 4; ++i) w[i] = wn[i];
          s2 = s2n;
        } else if (DEC == ALU || DEC == UNUSED || DEC == E4M3) {   // rows g and g + 8, words q and q + 1 (kk 0-1, 2-3), scales
#pragma unroll
          for (int i = 0; i < 4; ++i) w[i] = lds32(words + 4 * ((it + gi + i) & 15));
          s2 = lds32(words + 4 * ((it + gi + 4) & 15)) | 0x3C003C00u;
        }
        uint32_t dep = 0;   // UNUSED: a word of every decoded register
        auto decode = [&](int kk) {
          const uint32_t w0 = w[(kk >> 1) * 2], w1 = w[(kk >> 1) * 2 + 1];
          uint32_t (&f)[4] = DEC == UNUSED ? junk[kk] : frag[gi][kk];
          if (DEC == E4M3) {   // both steps of a word pair at the even step
            if ((kk & 1) == 0) {
              uint32_t p[4], q[4];
              dec4_e4m3(w0, s2, p);
              dec4_e4m3(w1, s2, q);
              uint32_t (&g)[4] = frag[gi][kk + 1];
              f[0] = p[0]; f[1] = q[0]; f[2] = p[2]; f[3] = q[2];
              g[0] = p[1]; g[1] = q[1]; g[2] = p[3]; g[3] = q[3];
              asm volatile("" :: "r"(g[0]), "r"(g[1]), "r"(g[2]), "r"(g[3]) : "memory");
            }
          } else if ((kk & 1) == 0) {
            f[0] = dec<0>(w0, s2); f[1] = dec<0>(w1, s2); f[2] = dec<1>(w0, s2); f[3] = dec<1>(w1, s2);
          } else {
            f[0] = dec<2>(w0, s2); f[1] = dec<2>(w1, s2); f[2] = dec<3>(w0, s2); f[3] = dec<3>(w1, s2);
          }
          asm volatile("" :: "r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]) : "memory");
          if (DEC == UNUSED) dep |= f[0] ^ f[1] ^ f[2] ^ f[3];
        };
        if (DEC == LDS) {
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) frag[gi][kk][r] = lds32(words + 4 * ((it + g2 + 4 * kk + r) & 15));
        }
        auto issue = [&](int kk) {
          uint64_t bd = bdesc + (uint64_t)(((g2 * 16384) + kk * 32) >> 4);
          if (DEC == UNUSED && kk == 0) {
            uint32_t lo = (uint32_t)bd;
            asm volatile("min.u32 %0, %0, %1;" : "+r"(lo) : "r"(lo | dep));
            bd = (bd & ~0xFFFFFFFFull) | lo;
          }
          if constexpr (N == 128) {
            if constexpr (RS) mma128_rs(acc[b], frag[gi][kk], bd);
            else mma128_ss(acc[b], adesc + (uint64_t)((kk * 32) >> 4), bd);
          } else {
            if constexpr (RS) mma256_rs(acc[b], frag[gi][kk], bd);
            else mma256_ss(acc[b], adesc + (uint64_t)((kk * 32) >> 4), bd);
          }
        };
        if (PP) {   // decode, then wait for our turn, issue, hand the turn over
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            if (DEC == ALU || DEC == UNUSED) decode(kk);
          bar_sync(1 + wg);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) issue(kk);
          bar_arrive(2 - wg);
        } else if (FINE) {
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            if (DEC == ALU) decode(kk);
            wgmma_fence();
            issue(kk);
          }
        } else {
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            if (DEC == ALU || DEC == UNUSED || DEC == E4M3) decode(kk);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) issue(kk);
        }
        if (AHEAD) {   // (after the commit below in program order would be the same: loads are not wgmmas)
#pragma unroll
          for (int i = 0; i < 4; ++i) wn[i] = lds32(words + 4 * ((it + g2 + 1 + i) & 15));
          s2n = lds32(words + 4 * ((it + g2 + 5) & 15)) | 0x3C003C00u;
        }
        wgmma_commit();
      }
    }
  }
  wgmma_wait<0>();
  float s = 0.f;
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < ACC; ++i) s += acc[b][i];
  if (s == 12345.f) sink[threadIdx.x] = s;   // keeps the accumulators live
}

template <int N, int MB, bool RS, int DEC, bool FINE = false, int NB = 2, bool AHEAD = false, bool PP = false>
void run(const char* name, int sms, float* sink) {
  auto k = rate_kernel<N, MB, RS, DEC, FINE, NB, AHEAD, PP>;
  const int smem = OPERAND_BYTES + 16384 + 1024;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int iters = 4000;
  const float us = median_us(8, [&] { k<<<sms, THREADS, smem>>>(iters, sink); });
  print_tflops(name, 48, 2.0 * sms * 2 /*warpgroups*/ * (double)iters * MB * 8 /*k16 steps*/ * 64 * N * 16, us);
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int sms = prop.multiProcessorCount;
  float* sink;
  cudaMalloc(&sink, THREADS * sizeof(float));
  printf("%s, %d SMs; 2 warpgroups x wgmma groups of 4, wait_group 1\n", prop.name, sms);
  run<128, 2, true, NONE>("RS m64n128k16, MB 2", sms, sink);
  run<128, 2, true, ALU>("RS m64n128k16, MB 2, + decode", sms, sink);
  run<128, 2, true, E4M3>("RS m64n128k16, MB 2, + e4m3 decode", sms, sink);
  run<128, 2, true, E4M3, false, 2, true>("RS m64n128k16, MB 2, + e4m3 decode, ahead", sms, sink);
  run<128, 1, true, E4M3>("RS m64n128k16, MB 1, + e4m3 decode", sms, sink);
  run<256, 1, true, E4M3>("RS m64n256k16, + e4m3 decode", sms, sink);
  run<128, 2, true, ALU, true>("RS m64n128k16, MB 2, + decode, fine", sms, sink);
  run<128, 2, true, ALU, false, 4>("RS m64n128k16, MB 2, + decode, NB 4", sms, sink);
  run<128, 2, true, UNUSED>("RS m64n128k16, MB 2, decode unused", sms, sink);
  run<128, 2, true, LDS>("RS m64n128k16, MB 2, frags by lds", sms, sink);
  run<128, 2, true, ALU, false, 2, true>("RS m64n128k16, MB 2, + decode, ahead", sms, sink);
  run<128, 2, true, ALU, false, 4, true>("RS m64n128k16, MB 2, + decode, ahead, NB 4", sms, sink);
  run<128, 2, true, UNUSED, false, 2, true>("RS m64n128k16, MB 2, unused, ahead", sms, sink);
  run<128, 2, true, ALU, false, 2, false, true>("RS m64n128k16, MB 2, + decode, pingpong", sms, sink);
  run<128, 2, true, ALU, false, 2, true, true>("RS m64n128k16, MB 2, + decode, ahead, pingpong", sms, sink);
  run<128, 2, true, NONE, false, 2, false, true>("RS m64n128k16, MB 2, pingpong, no decode", sms, sink);
  run<128, 1, true, NONE>("RS m64n128k16, MB 1", sms, sink);
  run<128, 1, true, ALU>("RS m64n128k16, MB 1, + decode", sms, sink);
  run<128, 2, false, NONE>("SS m64n128k16, MB 2", sms, sink);
  run<128, 2, false, UNUSED>("SS m64n128k16, MB 2, decode unused", sms, sink);
  run<256, 1, true, NONE>("RS m64n256k16", sms, sink);
  run<256, 1, true, ALU>("RS m64n256k16, + decode", sms, sink);
  run<256, 1, false, NONE>("SS m64n256k16", sms, sink);
  return 0;
}
