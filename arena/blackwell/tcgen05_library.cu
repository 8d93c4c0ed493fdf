// Software tcgen05 for `--emulate-blackwell`: the functions that arena/blackwell/ptx_rewrite.py calls in
// place of each tcgen05 instruction of a user's sm_100a PTX, so that the module assembles for sm_90a and
// runs on a Hopper GPU. Written from the PTX ISA text (tcgen05 sections); correctness only, never timed.
//
// Model:
//  - Tensor memory is per SM, as on the B200: 128 lanes x 512 columns x 32 bit in global memory, indexed
//    by %smid. alloc takes 32-column granules of its SM (blocking while they are taken, as the hardware
//    does), tags them with the CTA, fills them with a NaN pattern (TMEM is not zeroed); every access checks
//    that the columns belong to the accessing CTA and that a warp touches only its own 32-lane quarter.
//  - mma / cp are asynchronous, as on the hardware: the issuing thread checks them and queues them (one queue
//    per CTA); commit queues an arrival on its mbarrier. Nothing runs until a thread of the CTA finds that
//    mbarrier's phase incomplete (the rewriter routes every failed mbarrier.try_wait/test_wait here): then the
//    queue runs in order up to that commit, so an operation completes as late as the PTX memory model allows.
//    An MMA's accumulator columns are shared out among the CTA's threads that wait meanwhile (emu_help).
//    An operation checks at completion that the shared memory it reads is what it saw at issue (a stage
//    reused too early), a tcgen05.ld of columns an operation still writes is an error (a missing commit or
//    wait), and so is a dealloc with operations in flight. Word 17 of the state = 1 runs them synchronously
//    at issue instead, for comparison. ld / st return a pointer to the thread's first
//    cell; the rewriter emits the plain loads and stores at fixed offsets. A warp's load counts as reading
//    tensor memory until tcgen05.wait::ld or the first use of one of its registers: an mma, cp, st or
//    dealloc of those columns meanwhile is an error.
//  - A violation records the first error (code, call site, two values) in __nvfp4emu_state, which the
//    force-included header (emulation_host.h) defines and the host reads after each call; the kernel goes on.
//    A lint finding (legal PTX that is very likely a bug) records the first warning the same way, in words
//    8-15 of the record; the host prints it and the call goes on.
// Every function is extern "C" and prefixed __nvfp4emu_ so the rewriter can call it from PTX.
#include <stdint.h>
#include <cuda_fp16.h>

#define EMU_MAX_SM 160
#define EMU_LANES 128
#define EMU_COLS 512
#define EMU_GRANULES (EMU_COLS / 32)

extern "C" {
#define EMU_STATE_WORDS (32 + 64 * 32)   // as NVFP4EMU_STATE_WORDS in emulation_host.h
extern __device__ unsigned int __nvfp4emu_state[EMU_STATE_WORDS];  // defined by emulation_host.h in the user's module
__device__ uint32_t __nvfp4emu_tmem[EMU_MAX_SM * EMU_LANES * EMU_COLS];
__device__ unsigned long long __nvfp4emu_owner[EMU_MAX_SM * EMU_GRANULES];
__device__ unsigned long long __nvfp4emu_freed_by[EMU_MAX_SM * EMU_GRANULES];   // the CTA that freed a free granule
__device__ unsigned long long __nvfp4emu_freed_at[EMU_MAX_SM * EMU_GRANULES];   // globaltimer of that dealloc
__device__ int __nvfp4emu_lock[EMU_MAX_SM];
__device__ unsigned long long __nvfp4emu_touched[EMU_MAX_SM];   // globaltimer of the last use of the SM's TMEM
__device__ uint32_t __nvfp4emu_dummy[EMU_LANES * EMU_COLS];
// CTAs waiting in tcgen05.alloc, per SM (a CTA's tag, 0 = free slot) and the granules each asks for.
#define EMU_ALLOC_WAITERS 32
__device__ unsigned long long __nvfp4emu_alloc_waiter[EMU_MAX_SM * EMU_ALLOC_WAITERS];
__device__ uint32_t __nvfp4emu_alloc_need[EMU_MAX_SM * EMU_ALLOC_WAITERS];
}

// One queued asynchronous operation (mma, cp) or commit. A CTA's queue is the slot of the first 32-column
// granule it holds on its SM (alloc resets it), so it lives exactly as long as the CTA's tensor memory.
#define EMU_QLEN 32
enum : uint32_t { OP_MMA = 1, OP_CP = 2, OP_COMMIT = 3, OP_MMA2 = 4, OP_CP2 = 5 };   // 4, 5: .cta_group::2
struct EmuOp {
  uint32_t verb, site, thread, kind;      // kind: mma kind; commit: 1 with .multicast::cluster
  uint32_t vec, d_taddr, a_in_tmem, idesc;
  uint32_t accumulate, sfa, sfb, shape;
  uint32_t hash_a, hash_b, mbar, mask;    // shared-memory hashes at issue; commit: mbarrier and CTA mask
  uint32_t col0, ncols, pad0, pad1;       // tensor-memory columns the operation writes
  uint32_t a_lo, a_hi, b_lo, b_hi;        // shared-memory bytes it reads: A (none in tensor memory), B or source
  unsigned long long a, b;                // mma: A operand and B descriptor; cp: source descriptor in b
};
extern "C" {
__device__ EmuOp __nvfp4emu_queue[EMU_MAX_SM * EMU_GRANULES * EMU_QLEN];
__device__ uint32_t __nvfp4emu_qhead[EMU_MAX_SM * EMU_GRANULES];   // next to complete
__device__ uint32_t __nvfp4emu_qtail[EMU_MAX_SM * EMU_GRANULES];   // next free
// A ticket lock per queue (next ticket, ticket served): threads get it in the order they asked. An unfair lock let
// the thread that issues each MMA outrun a CTA's other threads by two commit phases while they queued their own
// tcgen05.cp, so they then waited on a phase parity that had come round again (a public GEMM whose 128 threads
// all issue the scale copies hung under emulation, and passes on a B200).
__device__ unsigned int __nvfp4emu_qticket[EMU_MAX_SM * EMU_GRANULES];
__device__ unsigned int __nvfp4emu_qserving[EMU_MAX_SM * EMU_GRANULES];
// Loads still reading tensor memory, one per warp of the CTA: (site, first column, columns, 0), site 0 = none. A
// load is finished by tcgen05.wait::ld or by the first use of one of its registers (the register dependence
// orders it; NVIDIA's CuTe DSL examples rely on that and never wait).
__device__ uint32_t __nvfp4emu_ldpend[EMU_MAX_SM * EMU_GRANULES * 32 * 4];
// An MMA being completed, shared out by columns among the CTA's threads that wait meanwhile (in an mbarrier wait
// or for the queue's lock): one thread alone took about 1 us per accumulator cell. Per queue: the claim word
// (the CTA's key << 32 | columns << 16 | next column), the columns finished, and the operation.
__device__ unsigned long long __nvfp4emu_share_claim[EMU_MAX_SM * EMU_GRANULES];
__device__ uint32_t __nvfp4emu_share_done[EMU_MAX_SM * EMU_GRANULES];
__device__ EmuOp __nvfp4emu_share_op[EMU_MAX_SM * EMU_GRANULES];
}
// Ordering of tcgen05.st before another warp's MMA, one record per hardware warp slot of an SM (%warpid): the
// warp's stores since its last barrier operation (its CTA, its warp in the CTA, the site of the latest store,
// columns [lo, hi) of its lane quarter, the SM's event count at the latest), the warp's count of barrier operations
// (arrive or wait) and the SM's event count when the warp last left a barrier wait (bar.sync, barrier.cluster.wait,
// a completed mbarrier wait). The rewriter updates `epoch` and `synced` with plain atomics in the user's code, not
// with a call: a call in a divergent branch (one thread's TMA) let ptxas keep a kernel parameter in a uniform
// register across it, which the branch's other calls then overwrote (a public GEMM read its B operand from address
// 0). Events (stores and MMA issues) are counted per SM, so their counts compare across warps.
// The PTX memory model orders a store before another warp's MMA only through such a barrier. B200 runs of public
// GEMMs whose warps store scale factors and whose warp 0 issues the MMA after its own tcgen05.wait::st alone agree
// with this model: the MMA reads tensor memory as the stores issued before it left it. One whose warps 1-3 loaded
// their scale factors from global memory first (and stored late) got rows 32-127 wrong on some tiles; one whose
// warps stored from shared memory, in step with warp 0, passed. So a store issued before the MMA counts (a warning
// names the missing barrier), and a store issued after it never reaches it (emu_store_lands).
#define EMU_WARP_SLOTS 64
struct EmuWarpSync {   // 64 bytes: the rewriter's atomics address `epoch` at byte 28 and `synced` at byte 32
  unsigned long long tag;
  uint32_t site, lo, hi, epoch_at, seq, epoch, synced, warp, pad[6];
};
static_assert(sizeof(EmuWarpSync) == 64, "the rewriter's barrier notes index 64-byte records");
extern "C" {
__device__ EmuWarpSync __nvfp4emu_warpsync[EMU_MAX_SM * EMU_WARP_SLOTS];
__device__ uint32_t __nvfp4emu_sm_events[EMU_MAX_SM];                 // tcgen05.st and MMA issues on the SM so far
__device__ uint32_t __nvfp4emu_last_mma_at[EMU_MAX_SM * EMU_GRANULES];   // by queue: the event count at the last MMA
__device__ EmuOp __nvfp4emu_last_mma[EMU_MAX_SM * EMU_GRANULES];          // that MMA
}
static __device__ __forceinline__ volatile EmuWarpSync& emu_warp_sync(uint32_t sm) {
  uint32_t w;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(w));
  return __nvfp4emu_warpsync[sm * EMU_WARP_SLOTS + w % EMU_WARP_SLOTS];
}
static __device__ __forceinline__ uint4 emu_ldpend_get(uint32_t i) {
  const volatile uint32_t* p = __nvfp4emu_ldpend + 4u * i;
  return make_uint4(p[0], p[1], p[2], p[3]);
}
static __device__ __forceinline__ void emu_ldpend_set(uint32_t i, uint32_t site, uint32_t col, uint32_t n) {
  volatile uint32_t* p = __nvfp4emu_ldpend + 4u * i;
  p[1] = col; p[2] = n; p[0] = site;
}

// Error codes: kept in step with the messages in arena/blackwell/runtime.py.
enum : uint32_t {
  E_NONE = 0,
  E_TOO_MANY_SMS = 1, E_ALLOC_NCOLS, E_ALLOC_TIMEOUT, E_DEALLOC_NOT_OWNED, E_DEALLOC_ARGS, E_NOT_ALLOCATED,
  E_LANE_QUARTER, E_LANE_RANGE, E_COL_RANGE, E_NOT_CONVERGED, E_ALLOC_DEADLOCK,
  E_IDESC_RESERVED = 20, E_IDESC_SPARSE, E_IDESC_TYPE, E_IDESC_SHAPE, E_IDESC_SFID, E_IDESC_K96,
  E_IDESC_TRANSPOSE, E_IDESC_DTYPE, E_SCALE_TYPE, E_SCALE_ALIGN, E_IDESC_N, E_IDESC_M64, E_IDESC_MXF4_MAJOR,
  E_SDESC_VERSION = 40, E_SDESC_SWIZZLE, E_SDESC_BASE_OFFSET, E_SDESC_LBO_MODE,
  E_CP_SHAPE = 50, E_CP_SWIZZLE,
  W_SCALE_QUARTERS = 60, W_SBO_OVERLAP,
  E_TMAP_TYPE = 62, W_LD_FREED, W_LD_AFTER_DEALLOC, W_BEYOND_ALLOC,
  E_LD_OVERWRITTEN = 70, E_LD_INFLIGHT, E_DEALLOC_INFLIGHT, E_SMEM_CHANGED, E_SMEM_OVERWRITE, E_LD_TAKEN,
  W_ST_UNDER_MMA = 66, W_ST_UNORDERED, W_ALLOC_NCOLS, W_ST_OVER_QUEUED,
  E_PAIR_CLUSTER = 80, E_PAIR_TIMEOUT, E_PAIR_NO_PEER, E_PAIR_M, E_PAIR_N, E_PAIR_MASK, E_PAIR_PEER_COLS,
  E_PAIR_TMA, E_PAIR_TMA_MULTICAST, E_TMA_BOX_BYTES, W_PAIR_ODD_MMA,
};

enum : uint32_t {  // mma kinds (the rewriter passes these)
  K_F16 = 0, K_TF32 = 1, K_F8F6F4 = 2, K_I8 = 3, K_MXF8F6F4 = 4, K_MXF4 = 5, K_MXF4NVF4 = 6,
};
enum : uint32_t {  // ld/st shapes
  S_32x32b = 0, S_16x64b = 1, S_16x128b = 2, S_16x256b = 3,
};
enum : uint32_t {  // cp shapes
  C_128x256b = 0, C_4x256b = 1, C_128x128b = 2, C_64x128b_02_13 = 3, C_64x128b_01_23 = 4, C_32x128b_x4 = 5,
};

// ------------------------------------------------------------------------------------------- basics
static __device__ __forceinline__ uint32_t emu_smid() { uint32_t r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }
static __device__ __forceinline__ uint32_t emu_nsmid() { uint32_t r; asm volatile("mov.u32 %0, %%nsmid;" : "=r"(r)); return r; }
static __device__ __forceinline__ unsigned long long emu_gridid() {
  unsigned long long r; asm volatile("mov.u64 %0, %%gridid;" : "=l"(r)); return r;
}
static __device__ __forceinline__ uint32_t emu_lane() { return threadIdx.x & 31u; }
static __device__ __forceinline__ uint32_t emu_warp_in_cta() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32u;
}
static __device__ __forceinline__ unsigned long long emu_my_tag() {
  const unsigned long long cta = blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
  return (emu_gridid() << 32) ^ (cta + 1ull);
}

static __device__ __forceinline__ unsigned long long emu_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- The work counts of the B200 time model (arena/predict/b200.py): words 18-31 of __nvfp4emu_state, summed or
// maximized by every issuing thread and read and cleared after each call (__nvfp4emu_read_counts). Counted at
// issue, so a kernel that fails still shows what it issued. Sizes in 16-byte units and MMA work in units of
// 8192 multiply-adds (the smallest MMA, 64x8x16) keep a benchmark's counts far inside 32 bits.
struct EmuMmaShape { uint32_t M, N, K; };
#define EMU_COUNT_MMAS 18          // tcgen05.mma issues (either CTA group)
#define EMU_COUNT_MMA_WORK 19      // sum of M*N*K / 8192 over them
#define EMU_COUNT_PAIR_MMAS 20     // ... of which .cta_group::2 (one issue for both CTAs of a pair)
#define EMU_COUNT_TMA_LOADS 21     // tensor TMAs (cp.async.bulk.tensor) issued
#define EMU_COUNT_TMA_BYTES16 22   // their box bytes / 16 (each multicast counted once)
#define EMU_COUNT_GRID_CTAS 23     // the most CTAs of a grid that issued an MMA
#define EMU_COUNT_CTA_THREADS 24   // the most threads of such a CTA
#define EMU_COUNT_CLUSTER 25       // the largest cluster such a CTA was in
#define EMU_COUNT_ALLOCS 26        // tcgen05.alloc issues
#define EMU_COUNT_MAX_N 27         // the widest MMA (N)
#define EMU_COUNT_MAX_M 28         // the tallest MMA (M; 256 for a pair)
#define EMU_COUNT_COMMITS 29       // tcgen05.commit issues
#define EMU_COUNT_SCALE_COPIES 30  // tcgen05.cp issues
#define EMU_COUNT_DYN_SMEM 31      // the most dynamic shared memory of a CTA that issued an MMA (bytes)
static __device__ __forceinline__ void emu_count(uint32_t word, uint32_t v) { atomicAdd(&__nvfp4emu_state[word], v); }
static __device__ __forceinline__ void emu_count_max(uint32_t word, uint32_t v) { atomicMax(&__nvfp4emu_state[word], v); }
static __device__ void emu_count_mma(const EmuMmaShape& s, uint32_t pair) {
  uint32_t cluster, smem;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(cluster));
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem));
  emu_count(EMU_COUNT_MMAS, 1u);
  emu_count(EMU_COUNT_MMA_WORK, (uint32_t)((unsigned long long)s.M * s.N * s.K / 8192ull));
  if (pair) emu_count(EMU_COUNT_PAIR_MMAS, 1u);
  emu_count_max(EMU_COUNT_GRID_CTAS, gridDim.x * gridDim.y * gridDim.z);
  emu_count_max(EMU_COUNT_CTA_THREADS, blockDim.x * blockDim.y * blockDim.z);
  emu_count_max(EMU_COUNT_CLUSTER, cluster);
  emu_count_max(EMU_COUNT_MAX_N, s.N);
  emu_count_max(EMU_COUNT_MAX_M, s.M);
  emu_count_max(EMU_COUNT_DYN_SMEM, smem);
}

// One record of 8 words from `base`: the first to claim it keeps it (words 0-7: the error; 8-15: the warning).
static __device__ __forceinline__ uint32_t emu_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
// `thread`: the CTA's thread the record names (the issuing thread of a queued operation that another thread
// completes).
static __device__ __noinline__ void emu_record(uint32_t base, uint32_t code, uint32_t site, uint32_t a, uint32_t b,
                                               uint32_t thread) {
  if (atomicCAS(&__nvfp4emu_state[base], 0u, code) == 0u) {
    __nvfp4emu_state[base + 1] = site;
    __nvfp4emu_state[base + 2] = a;
    __nvfp4emu_state[base + 3] = b;
    __nvfp4emu_state[base + 4] = blockIdx.x;
    __nvfp4emu_state[base + 5] = blockIdx.y;
    __nvfp4emu_state[base + 6] = blockIdx.z;
    __nvfp4emu_state[base + 7] = thread;
    __threadfence();
  }
}

static __device__ void emu_fail(uint32_t code, uint32_t site, uint32_t a, uint32_t b) {
  emu_record(0, code, site, a, b, emu_thread());
}
static __device__ void emu_fail_by(uint32_t thread, uint32_t code, uint32_t site, uint32_t a, uint32_t b) {
  emu_record(0, code, site, a, b, thread);
}

// The first warning: words 8-15, laid out as the error record.
static __device__ void emu_warn(uint32_t code, uint32_t site, uint32_t a, uint32_t b) {
  if (code == W_ST_UNDER_MMA || code == W_ST_UNORDERED) {   // a race says more than a lint finding before it
    const uint32_t old = *(volatile uint32_t*)&__nvfp4emu_state[8];
    if (old == W_SCALE_QUARTERS || old == W_SBO_OVERLAP) atomicCAS(&__nvfp4emu_state[8], old, 0u);
  }
  emu_record(8, code, site, a, b, emu_thread());
}
static __device__ void emu_warn_by(uint32_t thread, uint32_t code, uint32_t site, uint32_t a, uint32_t b) {
  emu_record(8, code, site, a, b, thread);
}

static __device__ __forceinline__ uint32_t emu_sm_checked(uint32_t site) {
  const uint32_t sm = emu_smid();
  if (sm >= EMU_MAX_SM) { emu_fail(E_TOO_MANY_SMS, site, sm, EMU_MAX_SM); return 0; }
  return sm;
}
static __device__ __forceinline__ uint32_t* emu_tmem_sm(uint32_t sm) { return __nvfp4emu_tmem + (size_t)sm * EMU_LANES * EMU_COLS; }

// True when columns [col, col + n) of this SM's tensor memory belong to this CTA.
static __device__ __forceinline__ bool emu_cols_owned(uint32_t sm, uint32_t col, uint32_t n) {
  if (n == 0) return true;
  if (col + n > EMU_COLS) return false;
  const unsigned long long me = emu_my_tag();
  for (uint32_t g = col / 32u; g <= (col + n - 1u) / 32u; ++g)
    if (*(volatile unsigned long long*)&__nvfp4emu_owner[sm * EMU_GRANULES + g] != me) return false;
  return true;
}

// True when this CTA holds columns on this SM and every column of [col, col + n) is its own or held by nobody: an
// access past its allocation that a B200 serves all the same (tensor memory is there; only another CTA's alloc
// of those columns would clash).
static __device__ __forceinline__ bool emu_cols_unclaimed_beside_mine(uint32_t sm, uint32_t col, uint32_t n) {
  const unsigned long long me = emu_my_tag();
  bool mine = false;
  for (uint32_t g = 0; g < EMU_GRANULES; ++g)
    mine = mine || *(volatile unsigned long long*)&__nvfp4emu_owner[sm * EMU_GRANULES + g] == me;
  if (!mine || n == 0u || col + n > EMU_COLS) return false;
  for (uint32_t g = col / 32u; g <= (col + n - 1u) / 32u; ++g) {
    const unsigned long long owner = *(volatile unsigned long long*)&__nvfp4emu_owner[sm * EMU_GRANULES + g];
    if (owner != 0ull && owner != me) return false;
  }
  return true;
}

// Columns [col, col + n) that this CTA freed: 1 when all are still free, 2 when another CTA has taken some since,
// 0 when this CTA did not free them all.
static __device__ __forceinline__ uint32_t emu_cols_freed_by_me(uint32_t sm, uint32_t col, uint32_t n) {
  const unsigned long long me = emu_my_tag();
  uint32_t state = 1u;
  for (uint32_t g = col / 32u; g <= (col + n - 1u) / 32u; ++g) {
    if (*(volatile unsigned long long*)&__nvfp4emu_freed_by[sm * EMU_GRANULES + g] != me) return 0u;
    if (*(volatile unsigned long long*)&__nvfp4emu_owner[sm * EMU_GRANULES + g] != 0ull) state = 2u;
  }
  return state;
}

// Checked pointer to (lane, col) for a block of `lanes` x `cols` cells; the dummy block on a violation. A load
// (`load`) of columns this CTA has freed and nobody has taken since reads what they hold, with a warning: a warp
// that frees them while another warp still loads passes on a B200 unless another CTA takes them first.
static __device__ uint32_t* emu_block(uint32_t site, uint32_t lane, uint32_t col, uint32_t lanes, uint32_t cols,
                                      bool load = false) {
  const uint32_t sm = emu_sm_checked(site);
  if (lane + lanes > EMU_LANES) { emu_fail(E_LANE_RANGE, site, lane, lanes); return __nvfp4emu_dummy; }
  if (col + cols > EMU_COLS) { emu_fail(E_COL_RANGE, site, col, cols); return __nvfp4emu_dummy; }
  if (!emu_cols_owned(sm, col, cols)) {
    const uint32_t freed = load && cols > 0u ? emu_cols_freed_by_me(sm, col, cols) : 0u;
    if (freed == 1u) {
      emu_warn(W_LD_AFTER_DEALLOC, site, col, cols);
    } else if (freed == 0u && emu_cols_unclaimed_beside_mine(sm, col, cols)) {
      emu_warn(W_BEYOND_ALLOC, site, col, cols);
    } else {
      emu_fail(freed == 2u ? E_LD_TAKEN : E_NOT_ALLOCATED, site, col, cols);
      return __nvfp4emu_dummy;
    }
  }
  *(volatile unsigned long long*)&__nvfp4emu_touched[sm] = emu_now();
  return emu_tmem_sm(sm) + lane * EMU_COLS + col;
}

static __device__ __forceinline__ uint32_t emu_leader(uint32_t mask) { return __ffs(mask) - 1u; }

// ------------------------------------------------------------------------------------------- allocation
static __host__ __device__ __forceinline__ bool emu_valid_cols(uint32_t n) { return n >= 32u && n <= 512u && !(n & (n - 1u)); }
// What a count that is not a power of two from 32 to 512 takes (the kernel runs on, with a warning or an error
// recorded): the next power of two, within 32..512. dealloc frees the same amount for the same count.
static __host__ __device__ __forceinline__ uint32_t emu_alloc_size(uint32_t n) {
  if (n <= 32u) return 32u;
  if (n >= 512u) return 512u;
  uint32_t p = 32u;
  while (p < n) p <<= 1;
  return p;
}
// What tcgen05.alloc's column count gets: E_NONE (a power of two from 32 to 512); W_ALLOC_NCOLS, a warning, within
// 32..512 otherwise (B200s ran public kernels allocating 136 and 144 columns: five GEMMs benchmarked on them); an
// error outside. Either way the allocation takes emu_alloc_size.
static __host__ __device__ __forceinline__ uint32_t emu_alloc_verdict(uint32_t n) {
  return emu_valid_cols(n) ? (uint32_t)E_NONE : n >= 32u && n <= 512u ? (uint32_t)W_ALLOC_NCOLS : (uint32_t)E_ALLOC_NCOLS;
}

// Columns another CTA freed within the last EMU_FREED_GRACE_NS are not handed out yet (alloc waits for them rather
// than take higher ones: see emu_alloc_pick). That CTA's other warps may
// still have loads of them to do (a dealloc with no barrier after them): on a B200 those loads finish within a
// few microseconds, long before a new owner has written the columns, but emulated warps are slower and
// scheduled otherwise, so without the grace the emulation would fail a race the hardware does not show. A load
// after the dealloc still warns (W_LD_AFTER_DEALLOC); one after the grace, once another CTA holds them, fails.
// Evaluations sharing a GPU stop a CTA's warps for milliseconds at a time, so a run that failed so is run again
// synchronously (arena/blackwell/runtime.py) with a grace of 200 ms.
#define EMU_FREED_GRACE_NS 2000000ull
#define EMU_FREED_GRACE_SYNCHRONOUS_NS 200000000ull
static __device__ __forceinline__ bool emu_synchronous();
static __device__ __forceinline__ bool emu_settled(uint32_t granule, unsigned long long me, unsigned long long now) {
  const unsigned long long by = ((volatile unsigned long long*)__nvfp4emu_freed_by)[granule];
  const unsigned long long grace = emu_synchronous() ? EMU_FREED_GRACE_SYNCHRONOUS_NS : EMU_FREED_GRACE_NS;
  return by == 0ull || by == me || now > ((volatile unsigned long long*)__nvfp4emu_freed_at)[granule] + grace;
}

// Where alloc takes `need` granules of an SM: the lowest aligned run of free granules, as a B200 hands them out
// (kernels that run one CTA per SM read column 0 without reading alloc's result, and passed on B200s). `free`
// and `settled` have bit g set for a granule no CTA holds and one past another CTA's grace. Returns the first
// granule, or -1 to wait: none free, or the lowest free run still in its grace (a higher run is not taken
// instead, which would move such a kernel off column 0).
static __host__ __device__ __forceinline__ int emu_alloc_pick(uint32_t free, uint32_t settled, uint32_t need) {
  const uint32_t run = (1u << need) - 1u;   // need <= EMU_GRANULES = 16
  for (uint32_t g = 0; g + need <= EMU_GRANULES; g += need) {
    if (((free >> g) & run) != run) continue;
    return ((settled >> g) & run) == run ? (int)g : -1;
  }
  return -1;
}

// A deadlock of tcgen05.alloc on one SM: some CTA waits, no waiter's request fits in the free granules (those in
// another CTA's grace count as free: they come free by themselves), and every CTA holding granules is itself one
// of the waiters, so none will ever free any. A B200 waits there until the run is killed. `owner`: the SM's 16
// granules; `waiter`, `need`: EMU_ALLOC_WAITERS slots (tag 0 = empty; need 0 = not yet known, which never
// counts as stuck).
static __host__ __device__ bool emu_alloc_deadlocked(const volatile unsigned long long* owner,
                                                     const volatile unsigned long long* waiter,
                                                     const volatile uint32_t* need) {
  uint32_t free = 0u;
  for (uint32_t g = 0; g < EMU_GRANULES; ++g) free |= (owner[g] == 0ull ? 1u : 0u) << g;
  bool waits = false;
  for (uint32_t w = 0; w < EMU_ALLOC_WAITERS; ++w) {
    if (waiter[w] == 0ull) continue;
    waits = true;
    const uint32_t n = need[w];
    if (n == 0u || emu_alloc_pick(free, free, n) >= 0) return false;
  }
  if (!waits) return false;
  for (uint32_t g = 0; g < EMU_GRANULES; ++g) {
    if (owner[g] == 0ull) continue;
    bool waiting = false;
    for (uint32_t w = 0; w < EMU_ALLOC_WAITERS && !waiting; ++w) waiting = waiter[w] == owner[g];
    if (!waiting) return false;
  }
  return true;
}

// This CTA's slot among the SM's alloc waiters (-1 when all are taken: it then never sees a deadlock).
static __device__ int emu_alloc_wait_begin(uint32_t sm, unsigned long long me, uint32_t need) {
  for (uint32_t w = 0; w < EMU_ALLOC_WAITERS; ++w) {
    const uint32_t i = sm * EMU_ALLOC_WAITERS + w;
    if (atomicCAS(&__nvfp4emu_alloc_waiter[i], 0ull, me) == 0ull) {
      *(volatile uint32_t*)&__nvfp4emu_alloc_need[i] = need;
      __threadfence();
      return (int)i;
    }
  }
  return -1;
}
static __device__ void emu_alloc_wait_end(int slot) {
  if (slot < 0) return;
  *(volatile uint32_t*)&__nvfp4emu_alloc_need[slot] = 0u;
  __threadfence();
  atomicExch(&__nvfp4emu_alloc_waiter[slot], 0ull);
}

extern "C" __device__ __noinline__ void __nvfp4emu_alloc(uint32_t site, uint32_t dst_smem, uint32_t ncols) {
  // .sync.aligned: every lane of the warp executes it (the ISA's rule), so the library waits for all 32 even
  // where the warp runs in two groups (a lane that completed queued operations in a wait loop comes late).
  const uint32_t mask = 0xFFFFFFFFu;
  uint32_t start = 0;
  if (emu_lane() == emu_leader(mask)) {
    emu_count(EMU_COUNT_ALLOCS, 1u);
    const uint32_t sm = emu_sm_checked(site);
    if (emu_nsmid() > EMU_MAX_SM) emu_fail(E_TOO_MANY_SMS, site, emu_nsmid(), EMU_MAX_SM);
    const uint32_t verdict = emu_alloc_verdict(ncols);
    if (verdict == W_ALLOC_NCOLS) emu_warn(W_ALLOC_NCOLS, site, ncols, emu_alloc_size(ncols));
    else if (verdict != E_NONE) emu_fail(verdict, site, ncols, 0);
    const uint32_t need = emu_alloc_size(ncols) / 32u;
    const unsigned long long me = emu_my_tag();
    unsigned long long* owner = __nvfp4emu_owner + sm * EMU_GRANULES;
    const unsigned long long t0 = emu_now();
    bool stole = false;
    int slot = -1;                       // among the SM's alloc waiters, from the first failed try
    unsigned long long stuck_since = 0ull;
    uint32_t stuck_polls = 0;
    unsigned long long last_touched = 0ull;
    uint32_t polls = 0;   // since the SM's tensor memory was last used: time-slicing with other processes can
                          // stop this CTA and the holder together for seconds, so 2 s of clock alone is not enough
    for (;;) {
      while (atomicCAS(&__nvfp4emu_lock[sm], 0, 1) != 0) {}
      __threadfence();
      const unsigned long long now = emu_now();
      uint32_t free = 0u, settled = 0u;
      for (uint32_t g = 0; g < EMU_GRANULES; ++g) {
        free |= (((volatile unsigned long long*)owner)[g] == 0ull ? 1u : 0u) << g;
        settled |= (emu_settled(sm * EMU_GRANULES + g, me, now) ? 1u : 0u) << g;
      }
      const int found = emu_alloc_pick(free, settled, need);
      // A deadlock stands once it has held for 20 ms and 1000 polls (a waiter's request or a holder that
      // just registered can lag a poll behind).
      const bool stuck = found < 0 && slot >= 0 &&
          emu_alloc_deadlocked(owner, __nvfp4emu_alloc_waiter + sm * EMU_ALLOC_WAITERS,
                               __nvfp4emu_alloc_need + sm * EMU_ALLOC_WAITERS);
      if (!stuck) stuck_since = 0ull, stuck_polls = 0u;
      else if (stuck_since == 0ull) stuck_since = now;
      const bool deadlocked = stuck && ++stuck_polls > 1000u && now - stuck_since > 20000000ull;
      if (found >= 0) {
        for (uint32_t i = 0; i < need; ++i) owner[found + i] = me;
        __nvfp4emu_qhead[sm * EMU_GRANULES + found] = __nvfp4emu_qtail[sm * EMU_GRANULES + found] = 0u;
        for (uint32_t w = 0; w < 32u; ++w) emu_ldpend_set((sm * EMU_GRANULES + found) * 32u + w, 0u, 0u, 0u);
        __nvfp4emu_last_mma_at[sm * EMU_GRANULES + found] = 0u;
      }
      __threadfence();
      atomicExch(&__nvfp4emu_lock[sm], 0);
      if (found >= 0) { start = (uint32_t)found * 32u; break; }
      if (deadlocked) {   // the CTA goes on without columns (column 512: every use is refused), so the call ends
        emu_fail(E_ALLOC_DEADLOCK, site, ncols, sm);
        start = EMU_COLS;
        break;
      }
      if (slot < 0) slot = emu_alloc_wait_begin(sm, me, need);
      // Columns held by a CTA that never deallocated: 2 s in which nothing used this SM's tensor memory, over
      // 200000 polls. (A holder still at work touches it with every emulated mma/cp/ld/st and every failed
      // mbarrier wait, however slow the emulation.)
      const unsigned long long touched = *(volatile unsigned long long*)&__nvfp4emu_touched[sm];
      if (touched != last_touched) { last_touched = touched; polls = 0; }
      ++polls;
      if (!stole && polls > 200000u && emu_now() - (touched > t0 ? touched : t0) > 2000000000ull) {
        emu_fail(E_ALLOC_TIMEOUT, site, ncols, sm);
        while (atomicCAS(&__nvfp4emu_lock[sm], 0, 1) != 0) {}
        for (uint32_t i = 0; i < EMU_GRANULES; ++i) owner[i] = 0ull;
        __threadfence();
        atomicExch(&__nvfp4emu_lock[sm], 0);
        stole = true;
      }
      __nanosleep(1000);
    }
    emu_alloc_wait_end(slot);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst_smem), "r"(start) : "memory");  // lane 0, column start
  }
  start = __shfl_sync(mask, start, emu_leader(mask));
  if (start >= EMU_COLS) { __syncwarp(mask); return; }   // after a deadlock: nothing to poison
  // Poison the new columns (real TMEM is not zeroed): a kernel that reads before writing sees NaN.
  const uint32_t sm = emu_smid() < EMU_MAX_SM ? emu_smid() : 0u;
  uint32_t* base = emu_tmem_sm(sm);
  const uint32_t nc = emu_alloc_size(ncols);
  const uint32_t workers = __popc(mask), me = __popc(mask & ((1u << emu_lane()) - 1u));
  for (uint32_t i = me; i < EMU_LANES * nc; i += workers) base[(i / nc) * EMU_COLS + start + (i % nc)] = 0x7FC0DEADu;
  __threadfence();
  __syncwarp(mask);
}

// ------------------------------------------------------------------------------------------- ld / st
// Pointer to this thread's first cell for a tcgen05.ld/st of `shape` with `nreg` registers per thread; the
// rewriter adds the per-register offsets, which do not depend on the thread (PTX "Matrix fragments for
// tcgen05.ld and tcgen05.st"):
//   32x32b : thread l, register r -> lane l,                         column r
//   16x64b : thread l, register r -> lane l/4 + 8*(l%2),             column (l/2)%2 + 2r
//   16x128b: thread l, register r -> lane l/4 + 8*(r%2),             column l%4 + 4*(r/2)
//   16x256b: thread l, register r -> lane l/4 + 8*((r/2)%2),         column r%2 + 2*(l%4) + 8*(r/4)
static __device__ void emu_track_load_store(uint32_t site, uint32_t is_load, uint32_t col, uint32_t n, uint32_t lane0,
                                            uint32_t warp);
extern "C" __device__ __noinline__ unsigned long long __nvfp4emu_tmem_ptr(uint32_t site, uint32_t taddr,
                                                                          uint32_t shape, uint32_t nreg,
                                                                          uint32_t is_load) {
  // .sync.aligned: every lane of the warp executes it (the ISA's rule), so the library waits for all 32 even
  // where the warp runs in two groups (a lane that completed queued operations in a wait loop comes late).
  const uint32_t mask = 0xFFFFFFFFu;
  const uint32_t l = emu_lane();
  const uint32_t lane0 = taddr >> 16, col0 = taddr & 0xFFFFu;
  uint32_t rows, cols, dl, dc;
  switch (shape) {
    case S_32x32b: rows = 32; cols = nreg; dl = l; dc = 0; break;
    case S_16x64b: rows = 16; cols = 2 * nreg; dl = l / 4 + 8 * (l % 2); dc = (l / 2) % 2; break;
    case S_16x128b: rows = 16; cols = 2 * nreg; dl = l / 4; dc = l % 4; break;
    default: rows = 16; cols = 2 * nreg; dl = l / 4; dc = 2 * (l % 4); break;
  }
  // A warp reaches only its own 32-lane quarter (warp id % 4): the quarter comes from the warp, the lane
  // field of the address picks the lane inside it. (Public kernels that passed on B200s pass lane 0 from
  // every epilogue warp, and others pass 32 * (warp % 4): both must read the warp's own quarter.)
  const uint32_t quarter = emu_warp_in_cta() % 4u;
  if ((lane0 % 32u) + rows > 32u) {
    if (l == emu_leader(mask)) emu_fail(E_LANE_QUARTER, site, taddr, emu_warp_in_cta());
    return (unsigned long long)(__nvfp4emu_dummy + dl * EMU_COLS + dc);
  }
  uint32_t* block = emu_block(site, 32u * quarter + lane0 % 32u, col0, rows, cols, is_load != 0u);
  if (l == 0u && block != __nvfp4emu_dummy) emu_track_load_store(site, is_load, col0, cols, 32u * quarter, emu_warp_in_cta());
  if (!is_load) __syncwarp(mask);   // a store lands after lane 0 has run the MMAs that read these columns
  return (unsigned long long)(block + dl * EMU_COLS + dc);
}

// ------------------------------------------------------------------------------------------- descriptors
struct EmuSDesc { uint32_t start, lbo, sbo, swizzle, err; };

static __host__ __device__ __forceinline__ EmuSDesc emu_sdesc(unsigned long long d) {
  EmuSDesc r;
  r.start = (uint32_t)(d & 0x3FFFull) << 4;
  r.lbo = (uint32_t)((d >> 16) & 0x3FFFull) << 4;
  r.sbo = (uint32_t)((d >> 32) & 0x3FFFull) << 4;
  const uint32_t version = (uint32_t)((d >> 46) & 7ull), base_offset = (uint32_t)((d >> 49) & 7ull);
  const uint32_t lbo_mode = (uint32_t)((d >> 52) & 1ull);
  r.swizzle = (uint32_t)((d >> 61) & 7ull);
  r.err = E_NONE;
  if (version != 1u) r.err = E_SDESC_VERSION;
  else if (!(r.swizzle == 0u || r.swizzle == 2u || r.swizzle == 4u || r.swizzle == 6u)) r.err = E_SDESC_SWIZZLE;
  // The ISA's base offset is (pattern start >> 7) & 7 for a swizzle pattern that does not start at its repeat
  // boundary: the swizzle then acts on the absolute address, as emu_kmajor_chunk computes it (Triton's
  // tl.dot_scaled sets it so). Any other non-zero value is refused.
  else if (base_offset != 0u && (r.swizzle == 0u || base_offset != ((r.start >> 7) & 7u))) r.err = E_SDESC_BASE_OFFSET;
  else if (lbo_mode != 0u) r.err = E_SDESC_LBO_MODE;
#ifdef __CUDA_ARCH__
  // The descriptor holds an offset in the CTA's own shared memory (18 bits). In a cluster launch on a Hopper GPU
  // a CTA's shared::cta addresses carry its cluster rank above those bits, and the bare offset is the rank-0
  // CTA's: the start takes the executing CTA's rank back (mapa), so a one-CTA MMA or cp of any CTA of a cluster
  // reads its own operands. The pair functions' offsets to either CTA (emu_rank_delta) hold either way.
  uint32_t ctas;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ctas));
  if (ctas > 1u) {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r.start) : "r"(r.start), "r"(rank));
  }
#endif
  return r;
}

// Shared address of the 16-byte chunk holding bytes [kbyte, kbyte + 16) of row r of a K-major operand:
// swizzled: 8-row atoms, row pitch = swizzle span, next 8 rows at SBO, XOR of address bits [4,7) with [7,10);
// no swizzle: core matrices of 8 rows x 16 bytes, next along K at LBO, next 8 rows at SBO.
static __device__ __forceinline__ uint32_t emu_kmajor_chunk(const EmuSDesc& d, uint32_t r, uint32_t kbyte) {
  if (d.swizzle == 0u) return d.start + (r / 8u) * d.sbo + (r % 8u) * 16u + (kbyte / 16u) * d.lbo;
  const uint32_t span = d.swizzle == 2u ? 128u : d.swizzle == 4u ? 64u : 32u;
  const uint32_t bits = d.swizzle == 2u ? 7u : d.swizzle == 4u ? 3u : 1u;
  const uint32_t lin = d.start + (r / 8u) * d.sbo + (r % 8u) * span + kbyte;
  return lin ^ (((lin >> 7) & bits) << 4);
}

// Lint: a no-swizzle K-major source whose 8-row groups (core matrices of 8 rows x 16 bytes, 128 bytes each)
// start less than 128 bytes apart reads rows twice and skips others (legal PTX, almost surely a bug). An
// operand of 8 rows or fewer never uses SBO.
static __device__ __forceinline__ void emu_lint_sbo(const EmuSDesc& d, uint32_t site, unsigned long long desc,
                                                    uint32_t rows) {
  if (d.swizzle == 0u && d.sbo < 128u && rows > 8u) emu_warn(W_SBO_OVERLAP, site, (uint32_t)(desc >> 32), d.sbo);
}

static __device__ __forceinline__ uint4 emu_lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

// ------------------------------------------------------------------------------------------- the queue
static __device__ __forceinline__ bool emu_synchronous() { return *(volatile uint32_t*)&__nvfp4emu_state[17] != 0u; }

// This CTA's queue on SM `sm`: the slot of its first granule; -1 when it holds no tensor memory.
static __device__ int emu_queue_of(uint32_t sm) {
  const unsigned long long me = emu_my_tag();
  for (uint32_t g = 0; g < EMU_GRANULES; ++g)
    if (*(volatile unsigned long long*)&__nvfp4emu_owner[sm * EMU_GRANULES + g] == me) return (int)(sm * EMU_GRANULES + g);
  return -1;
}
static __device__ bool emu_help(int q);   // works on the MMA the lock's holder shares out (after the mma section)
static __device__ __forceinline__ void emu_qlock(int q) {
  const unsigned int ticket = atomicAdd(&__nvfp4emu_qticket[q], 1u);
  while (*(volatile unsigned int*)&__nvfp4emu_qserving[q] != ticket)
    if (!emu_help(q)) __nanosleep(100);
  __threadfence();
}
// The lock when nobody holds it or waits for it; false otherwise.
static __device__ __forceinline__ bool emu_qtrylock(int q) {
  const unsigned int serving = *(volatile unsigned int*)&__nvfp4emu_qserving[q];
  if (*(volatile unsigned int*)&__nvfp4emu_qticket[q] != serving) return false;
  if (atomicCAS(&__nvfp4emu_qticket[q], serving, serving + 1u) != serving) return false;
  __threadfence();
  return true;
}
static __device__ __forceinline__ void emu_qunlock(int q) { __threadfence(); atomicAdd(&__nvfp4emu_qserving[q], 1u); }
static __device__ __forceinline__ EmuOp& emu_qop(int q, uint32_t i) { return __nvfp4emu_queue[(size_t)q * EMU_QLEN + i % EMU_QLEN]; }

// A position-dependent hash of a K-major shared-memory operand (`chunks` 16-byte chunks of every 8th row and the
// last): what an operation saw at issue must be what it reads when it completes. A refilled stage changes every
// row; sampling keeps the cost near 1 % of the emulated MMA (hashing every row cost 9 % on the H200), and a
// bulk copy over queued operands is caught exactly at the copy (__nvfp4emu_smem_write).
static __device__ uint32_t emu_hash_rows(const EmuSDesc& d, uint32_t rows, uint32_t chunks) {
  if (emu_synchronous()) return 0u;
  uint32_t h = 0x811C9DC5u;
  for (uint32_t r = 0; r < rows; r = (r + 8u < rows || r + 1u == rows) ? r + 8u : rows - 1u)
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint4 v = emu_lds128(emu_kmajor_chunk(d, r, 16u * c));
      h = (h ^ v.x) * 0x01000193u; h = (h ^ v.y) * 0x01000193u;
      h = (h ^ v.z) * 0x01000193u; h = (h ^ v.w) * 0x01000193u;
    }
  return h;
}

// The shared-memory bytes [lo, hi) that `rows` rows x `chunks` chunks of a K-major operand occupy: swizzled, whole
// 128-byte rows of 8-row groups SBO apart (the XOR stays inside a row); no swizzle, 8 x 16-byte core matrices.
static __device__ void emu_operand_range(const EmuSDesc& d, uint32_t rows, uint32_t chunks, uint32_t& lo, uint32_t& hi) {
  const uint32_t groups = (rows + 7u) / 8u;
  if (d.swizzle == 0u) {
    lo = d.start;
    hi = d.start + (groups - 1u) * d.sbo + (chunks - 1u) * d.lbo + (rows < 8u ? rows : 8u) * 16u;
  } else {
    const uint32_t span = d.swizzle == 2u ? 128u : d.swizzle == 4u ? 64u : 32u;
    lo = d.start & ~127u;
    hi = lo + (groups - 1u) * d.sbo + 8u * span;
  }
}

static __device__ void emu_run(const EmuOp& op, int q);   // completes one operation (after the mma section)

// Complete entries [qhead, end) of queue q in order (the caller holds its lock).
static __device__ void emu_run_until(int q, uint32_t end) {
  for (uint32_t i = __nvfp4emu_qhead[q]; i != end; ++i) emu_run(emu_qop(q, i), q);
  __nvfp4emu_qhead[q] = end;
  __threadfence();
}

// Queue an issued operation; with the queue full, the oldest commit group completes first (the hardware may
// finish work at any time). Synchronous mode, or a CTA without tensor memory: run it now.
static __device__ void emu_issue(uint32_t site, const EmuOp& op) {
  const uint32_t sm = emu_sm_checked(site);
  const int q = emu_synchronous() ? -1 : emu_queue_of(sm);
  if (q < 0) { emu_run(op, -1); return; }
  emu_qlock(q);
  const uint32_t head = __nvfp4emu_qhead[q], tail = __nvfp4emu_qtail[q];
  if (tail - head >= EMU_QLEN) {
    uint32_t end = head + 1;
    for (uint32_t i = head; i != tail; ++i)
      if (emu_qop(q, i).verb == OP_COMMIT) { end = i + 1; break; }
    emu_run_until(q, end);
  }
  emu_qop(q, tail) = op;
  __threadfence();
  __nvfp4emu_qtail[q] = tail + 1u;
  emu_qunlock(q);
  *(volatile unsigned long long*)&__nvfp4emu_touched[sm] = emu_now();
}

// The first queued mma/cp that writes a column of [col, col + n): its index, or `tail` when none.
static __device__ uint32_t emu_pending_writer(int q, uint32_t col, uint32_t n) {
  const uint32_t tail = __nvfp4emu_qtail[q];
  for (uint32_t i = __nvfp4emu_qhead[q]; i != tail; ++i) {
    const EmuOp& op = emu_qop(q, i);
    if (op.verb != OP_COMMIT && op.col0 < col + n && col < op.col0 + op.ncols) return i;
  }
  return tail;
}
// 0 when no commit follows entry i in queue q (the operation was never committed), else its mbarrier + 1.
static __device__ uint32_t emu_commit_after(int q, uint32_t i) {
  const uint32_t tail = __nvfp4emu_qtail[q];
  for (++i; i != tail; ++i)
    if (emu_qop(q, i).verb == OP_COMMIT) return emu_qop(q, i).mbar + 1u;
  return 0u;
}

// An instruction at `site` writes (or, `frees`, deallocates) columns [col, col + n) of lanes [lane0, lane0 + lanes)
// while a warp's load of them is not finished (a = the load's site, b = the warp). A write is an error: the load
// may read the new values. A dealloc is a warning: the load reads wrong values only if another CTA allocates and
// writes the columns first, which B200 runs of public kernels that free without waiting never show.
static __device__ void emu_check_unfinished_loads(uint32_t site, int q, uint32_t col, uint32_t n, uint32_t lane0,
                                                  uint32_t lanes, bool frees = false) {
  for (uint32_t w = 0; w < 32u; ++w) {
    const uint4 p = emu_ldpend_get((uint32_t)q * 32u + w);
    const uint32_t quarter = 32u * (w % 4u);
    if (p.x && p.y < col + n && col < p.y + p.z && quarter < lane0 + lanes && lane0 < quarter + 32u) {
      if (frees) emu_warn(W_LD_FREED, site, p.x, w);
      else emu_fail(E_LD_OVERWRITTEN, site, p.x, w);
      return;
    }
  }
}

// tcgen05.wait::ld (site 0: every load of the warp) or the first use of a register of the load at `site`.
extern "C" __device__ __noinline__ void __nvfp4emu_ld_finished(uint32_t site) {
  const uint32_t sm = emu_smid();
  const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
  if (q < 0) return;
  const uint32_t i = (uint32_t)q * 32u + emu_warp_in_cta() % 32u;
  if (site == 0u || emu_ldpend_get(i).x == site) emu_ldpend_set(i, 0u, 0u, 0u);
}

// A thread found the mbarrier at `mbar` (shared window) with its phase incomplete: complete this CTA's queue up
// to the last commit that arrives on it. Returns 1 when that commit ran (the caller tests the barrier again).
// Another thread completing operations makes this return 0 at once; the caller's wait loop comes back.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_wait_failed(uint32_t site, uint32_t mbar) {
  (void)site;
  if (emu_synchronous()) return 0u;
  const uint32_t sm = emu_smid();
  if (sm >= EMU_MAX_SM) return 0u;
  *(volatile unsigned long long*)&__nvfp4emu_touched[sm] = emu_now();   // a CTA waiting here is alive
  const int q = emu_queue_of(sm);
  if (q < 0) return 0u;
  if (emu_help(q)) return 0u;
  // Without the lock first: most failed waits are for a TMA or a thread's arrival, and the waiting threads must
  // not slow the one completing operations.
  bool wanted = false;
  for (uint32_t i = *(volatile uint32_t*)&__nvfp4emu_qhead[q], tail = *(volatile uint32_t*)&__nvfp4emu_qtail[q];
       i != tail && !wanted; ++i) {
    const volatile EmuOp& op = emu_qop(q, i);
    wanted = op.verb == OP_COMMIT && op.mbar == mbar;
  }
  if (!wanted || !emu_qtrylock(q)) {
    __nanosleep(500);
    return 0u;
  }
  const uint32_t head = __nvfp4emu_qhead[q], tail = __nvfp4emu_qtail[q];
  uint32_t end = head;
  for (uint32_t i = head; i != tail; ++i)
    if (emu_qop(q, i).verb == OP_COMMIT && emu_qop(q, i).mbar == mbar) end = i + 1u;
  if (end != head) emu_run_until(q, end);
  emu_qunlock(q);
  return end != head ? 1u : 0u;
}

// A bulk copy (TMA) into shared memory at `dst`, issued while a queued operation still reads those bytes: the
// stage is refilled before the commit that frees it has completed. Reported at the copy.
extern "C" __device__ __noinline__ void __nvfp4emu_smem_write(uint32_t site, uint32_t dst) {
  if (emu_synchronous()) return;
  const uint32_t sm = emu_smid();
  if (sm >= EMU_MAX_SM) return;
  const int q = emu_queue_of(sm);
  if (q < 0) return;
  emu_qlock(q);
  const uint32_t tail = __nvfp4emu_qtail[q];
  for (uint32_t i = __nvfp4emu_qhead[q]; i != tail; ++i) {
    const EmuOp& op = emu_qop(q, i);
    if (op.verb == OP_COMMIT) continue;
    if ((op.a_lo <= dst && dst < op.a_hi) || (op.b_lo <= dst && dst < op.b_hi)) {
      emu_fail(E_SMEM_OVERWRITE, site, op.site, emu_commit_after(q, i));
      break;
    }
  }
  emu_qunlock(q);
}

// dealloc (after the queue: operations still in flight are reported)
extern "C" __device__ __noinline__ void __nvfp4emu_dealloc(uint32_t site, uint32_t taddr, uint32_t ncols) {
  // .sync.aligned: every lane of the warp executes it (the ISA's rule), so the library waits for all 32 even
  // where the warp runs in two groups (a lane that completed queued operations in a wait loop comes late).
  const uint32_t mask = 0xFFFFFFFFu;
  __syncwarp(mask);
  if (emu_lane() == emu_leader(mask)) {
    const uint32_t sm = emu_sm_checked(site), col = taddr & 0xFFFFu;
    // what alloc took is freed (alloc warned of a count that is not a power of two); outside 32..512 an error
    if (emu_alloc_verdict(ncols) == E_ALLOC_NCOLS) emu_fail(E_DEALLOC_ARGS, site, taddr, ncols);
    ncols = emu_alloc_size(ncols);
    if ((taddr >> 16) != 0u || col % 32u || col + ncols > EMU_COLS) {
      emu_fail(E_DEALLOC_ARGS, site, taddr, ncols);
    } else if (!emu_cols_owned(sm, col, ncols)) {
      emu_fail(E_DEALLOC_NOT_OWNED, site, taddr, ncols);
    } else {
      const int q = emu_synchronous() ? -1 : emu_queue_of(sm);
      if (q >= 0) {   // operations still queued: an error when one writes these columns; the queue is dropped
        emu_qlock(q);
        const uint32_t i = emu_pending_writer(q, col, ncols);
        if (i != __nvfp4emu_qtail[q]) emu_fail(E_DEALLOC_INFLIGHT, site, emu_qop(q, i).site, emu_commit_after(q, i));
        emu_check_unfinished_loads(site, q, col, ncols, 0u, EMU_LANES, true);
        if (q == (int)(sm * EMU_GRANULES + col / 32u)) __nvfp4emu_qhead[q] = __nvfp4emu_qtail[q];
        emu_qunlock(q);
      }
      __threadfence();
      while (atomicCAS(&__nvfp4emu_lock[sm], 0, 1) != 0) {}
      for (uint32_t g = col / 32u; g < (col + ncols) / 32u; ++g) {
        __nvfp4emu_freed_by[sm * EMU_GRANULES + g] = emu_my_tag();
        __nvfp4emu_freed_at[sm * EMU_GRANULES + g] = emu_now();
        __nvfp4emu_owner[sm * EMU_GRANULES + g] = 0ull;
      }
      __threadfence();
      atomicExch(&__nvfp4emu_lock[sm], 0);
    }
  }
  __syncwarp(mask);
}

// An mma or cp about to write columns [col, col + n) of lanes [lane0, lane0 + lanes): unfinished loads of them?
static __device__ void emu_check_loads_before_write(uint32_t site, uint32_t col, uint32_t n, uint32_t lane0, uint32_t lanes) {
  if (emu_synchronous()) return;
  const uint32_t sm = emu_smid();
  const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
  if (q >= 0) emu_check_unfinished_loads(site, q, col, n, lane0, lanes);
}

// ------------------------------------------------------------------------------------------- cp
struct EmuCpShape { uint32_t rows, chunks, dst_rows; };   // source rows, 16-byte chunks per row, lanes written

static __device__ __forceinline__ bool emu_cp_shape(uint32_t shape, EmuCpShape& c) {
  switch (shape) {
    case C_128x256b: c = {128, 2, 128}; return true;
    case C_4x256b: c = {4, 2, 4}; return true;
    case C_128x128b: c = {128, 1, 128}; return true;
    case C_64x128b_02_13: case C_64x128b_01_23: c = {64, 1, 128}; return true;
    case C_32x128b_x4: c = {32, 1, 128}; return true;
    default: return false;
  }
}

// The tensor-memory lanes (relative to the address's lane) that source row r of a cp of `shape` goes to; returns
// how many: .64x128b.warpx2 copies each row to two quarters, .32x128b.warpx4 to all four.
static __device__ __forceinline__ uint32_t emu_cp_lanes(uint32_t shape, uint32_t r, uint32_t (&lanes)[4]) {
  switch (shape) {
    case C_64x128b_02_13: lanes[0] = (r < 32 ? 0u : 32u) + r % 32u; lanes[1] = lanes[0] + 64u; return 2;
    case C_64x128b_01_23: lanes[0] = (r < 32 ? 0u : 64u) + r % 32u; lanes[1] = lanes[0] + 32u; return 2;
    case C_32x128b_x4: for (uint32_t q = 0; q < 4; ++q) lanes[q] = 32u * q + r; return 4;
    default: lanes[0] = r; return 1;
  }
}

// Issue: check the descriptor and the destination, then queue (or run, in the synchronous mode).
extern "C" __device__ __noinline__ void __nvfp4emu_cp(uint32_t site, uint32_t taddr, unsigned long long sdesc, uint32_t shape) {
  emu_count(EMU_COUNT_SCALE_COPIES, 1u);
  const EmuSDesc d = emu_sdesc(sdesc);
  if (d.err) { emu_fail(d.err, site, (uint32_t)(sdesc >> 32), (uint32_t)sdesc); return; }
  emu_lint_sbo(d, site, sdesc, shape == C_4x256b ? 4u : shape == C_32x128b_x4 ? 32u : 64u);
  EmuCpShape c;
  if (!emu_cp_shape(shape, c)) { emu_fail(E_CP_SHAPE, site, shape, 0); return; }
  if (emu_block(site, taddr >> 16, taddr & 0xFFFFu, c.dst_rows, 4u * c.chunks) == __nvfp4emu_dummy) return;
  EmuOp op = {};
  op.verb = OP_CP; op.site = site; op.thread = emu_thread(); op.shape = shape; op.d_taddr = taddr; op.b = sdesc;
  op.col0 = taddr & 0xFFFFu; op.ncols = 4u * c.chunks;
  op.hash_b = emu_hash_rows(d, c.rows, c.chunks);
  emu_operand_range(d, c.rows, c.chunks, op.b_lo, op.b_hi);
  emu_check_loads_before_write(site, op.col0, op.ncols, taddr >> 16, c.dst_rows);
  emu_issue(site, op);
}

static __device__ void emu_cp_run(const EmuOp& op) {
  const EmuSDesc d = emu_sdesc(op.b);
  EmuCpShape c;
  emu_cp_shape(op.shape, c);
  if (!emu_synchronous() && emu_hash_rows(d, c.rows, c.chunks) != op.hash_b)
    emu_fail_by(op.thread, E_SMEM_CHANGED, op.site, 2u, d.start);
  uint32_t* block = emu_tmem_sm(emu_smid()) + (op.d_taddr >> 16) * EMU_COLS + (op.d_taddr & 0xFFFFu);
  for (uint32_t r = 0; r < c.rows; ++r) {
    for (uint32_t ch = 0; ch < c.chunks; ++ch) {
      const uint4 v = emu_lds128(emu_kmajor_chunk(d, r, 16u * ch));
      uint32_t lanes[4];
      const uint32_t nl = emu_cp_lanes(op.shape, r, lanes);
      for (uint32_t i = 0; i < nl; ++i) {
        uint32_t* cell = block + lanes[i] * EMU_COLS + 4u * ch;
        cell[0] = v.x; cell[1] = v.y; cell[2] = v.z; cell[3] = v.w;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------- number formats
static __device__ __forceinline__ float emu_e2m1(uint32_t c) {
  const float mag = (float)((0xC8643210u >> (4u * (c & 7u))) & 0xFu) * 0.5f;
  return (c & 8u) ? -mag : mag;
}
static __device__ __forceinline__ float emu_ldexp(float v, int e) {
  while (e > 0) { v *= 2.0f; --e; }
  while (e < 0) { v *= 0.5f; ++e; }
  return v;
}
// Generic small float: 1 sign bit (if `sign`), `eb` exponent bits, `mb` mantissa bits, bias 2^(eb-1)-1,
// subnormals; `nan_all_ones` marks e4m3's single NaN (S.1111.111); e5m2 has IEEE inf/NaN.
static __device__ float emu_minifloat(uint32_t bits, uint32_t eb, uint32_t mb, bool sign, int kind_special) {
  const uint32_t m = bits & ((1u << mb) - 1u), e = (bits >> mb) & ((1u << eb) - 1u);
  const bool neg = sign && ((bits >> (eb + mb)) & 1u);
  const int bias = (1 << (eb - 1)) - 1;
  float v;
  if (kind_special == 1 && e == (1u << eb) - 1u && m == (1u << mb) - 1u) return __int_as_float(0x7FC00000);  // e4m3 NaN
  if (kind_special == 2 && e == (1u << eb) - 1u) {  // e5m2 inf / NaN
    if (m) return __int_as_float(0x7FC00000);
    return neg ? -__int_as_float(0x7F800000) : __int_as_float(0x7F800000);
  }
  if (e == 0) v = emu_ldexp((float)m, 1 - bias - (int)mb);
  else v = emu_ldexp(1.0f + (float)m / (float)(1u << mb), (int)e - bias);
  return neg ? -v : v;
}
static __device__ __forceinline__ float emu_ue8m0(uint32_t b) {
  b &= 0xFFu;
  if (b == 0xFFu) return __int_as_float(0x7FC00000);
  return b == 0u ? __int_as_float(0x00400000) : __int_as_float((int)(b << 23));  // 2^-127 is subnormal
}
static __device__ __forceinline__ float emu_ue4m3(uint32_t b) { return emu_minifloat(b & 0x7Fu, 4, 3, false, 1); }

// Element k of an operand row as float. fmt: kind-specific code from the instruction descriptor.
// f16 kind: 0 f16, 1 bf16; tf32: 2; f8f6f4 family: 0 e4m3, 1 e5m2, 3 e2m3, 4 e3m2, 5 e2m1 (one byte each);
// i8: 0 u8, 1 s8; mxf4 family: packed e2m1 (two per byte, low nibble first).
static __device__ __forceinline__ float emu_decode(uint32_t kind, uint32_t fmt, uint32_t raw) {
  switch (kind) {
    case K_F16: return fmt == 0 ? __half2float(__ushort_as_half((unsigned short)(raw & 0xFFFFu))) : __uint_as_float((raw & 0xFFFFu) << 16);
    case K_TF32: return __uint_as_float(raw & 0xFFFFE000u);
    case K_I8: return fmt == 1 ? (float)(int)(signed char)(raw & 0xFFu) : (float)(raw & 0xFFu);
    case K_F8F6F4: case K_MXF8F6F4:
      switch (fmt) {
        case 0: return emu_minifloat(raw & 0xFFu, 4, 3, true, 1);
        case 1: return emu_minifloat(raw & 0xFFu, 5, 2, true, 2);
        case 3: return emu_minifloat(raw & 0x3Fu, 2, 3, true, 0);
        case 4: return emu_minifloat(raw & 0x3Fu, 3, 2, true, 0);
        default: return emu_e2m1(raw & 0xFu);
      }
    default: return emu_e2m1(raw & 0xFu);
  }
}

struct EmuMma {
  uint32_t kind, M, N, K, bits, afmt, bfmt, dtype_f32, neg_a, neg_b, scaled, sf_block, scale_ue8m0, sfa_id, sfb_id;
};

// Instruction descriptor (PTX ISA "Instruction descriptor"): common bits 0-1 sparsity selector, 2 sparse,
// 13/14 negate A/B, 15/16 transpose A/B, 17-22 N>>3. Non-scaled kinds: 3 saturate, 4-5 D type, 7-9 atype,
// 10-12 btype, 24-28 M>>4, 30-31 max shift. Block-scaled kinds: 4-5 SFB id, 7-9 atype, 10-11 (mxf4*) or
// 10-12 btype, 23 scale type (1 = UE8M0), 27-28 M>>7, 29-30 SFA id, 31 K = 96.
// Bits the descriptor table of each kind marks reserved, plus fields the table allows only elsewhere
// (saturate outside .kind::i8, the maximum shift outside .ws, negate under .kind::i8). `emu_idesc` reports
// them with E_IDESC_RESERVED and the mask.
static __host__ __device__ __forceinline__ uint32_t emu_idesc_reserved(uint32_t kind, uint32_t d) {
  if (kind >= K_MXF8F6F4) {
    uint32_t mask = 0x3u | (1u << 3) | (1u << 6) | (7u << 24);   // bits 0-1, 3, 6, 24-26
    if (kind != K_MXF8F6F4) mask |= 1u << 12;                     // btype is bits 10-11 under mxf4 kinds
    else mask |= 1u << 31;                                        // K = 96 exists for mxf4 kinds only
    return d & mask;
  }
  uint32_t mask = (1u << 6) | (1u << 23) | (1u << 29) | (3u << 30);   // reserved, and the .ws maximum shift
  if (kind != K_I8) mask |= 1u << 3;                                  // saturate: integer kinds only
  else mask |= 3u << 13;                                              // .kind::i8 has no negate
  return d & mask;
}

// N of cta_group::1 dense MMAs (PTX ISA "Matrix Shape", table of .kind and shapes): 8..256 in steps of 8,
// except .kind::i8: 8, 16, 24, 32, then steps of 16 up to 256.
static __host__ __device__ __forceinline__ bool emu_valid_n(uint32_t kind, uint32_t n) {
  if (n < 8u || n > 256u || n % 8u) return false;
  return kind != K_I8 || n <= 32u || n % 16u == 0u;
}

static __host__ __device__ uint32_t emu_idesc(uint32_t kind, uint32_t d, uint32_t vec, EmuMma& m) {
  m.kind = kind;
  m.neg_a = (d >> 13) & 1u; m.neg_b = (d >> 14) & 1u;
  m.N = ((d >> 17) & 0x3Fu) << 3;
  m.scaled = kind >= K_MXF8F6F4;
  if ((d >> 2) & 1u) return E_IDESC_SPARSE;
  if (emu_idesc_reserved(kind, d)) return E_IDESC_RESERVED;
  // .kind::mxf4 / mxf4nvf4 take K-major operands only (their descriptor table): a transpose bit there is the
  // kernel's error; other kinds allow MN-major operands, which this emulation does not model.
  if ((d >> 15) & 3u) return kind > K_MXF8F6F4 ? E_IDESC_MXF4_MAJOR : E_IDESC_TRANSPOSE;
  if (!m.scaled) {
    m.dtype_f32 = ((d >> 4) & 3u);
    m.afmt = (d >> 7) & 7u; m.bfmt = (d >> 10) & 7u;
    m.M = ((d >> 24) & 0x1Fu) << 4;
    if (kind == K_I8) { if (m.dtype_f32 != 2u) return E_IDESC_DTYPE; }   // s32 = 2
    else if (m.dtype_f32 != 1u) return E_IDESC_DTYPE;                    // this emulator: F32 accumulators
    if (kind == K_F16 && (m.afmt > 1u || m.bfmt > 1u || m.afmt != m.bfmt)) return E_IDESC_TYPE;
    if (kind == K_TF32 && (m.afmt != 2u || m.bfmt != 2u)) return E_IDESC_TYPE;
    if (kind == K_I8 && (m.afmt > 1u || m.bfmt > 1u)) return E_IDESC_TYPE;
    if (kind == K_F8F6F4 && (m.afmt == 2u || m.afmt > 5u || m.bfmt == 2u || m.bfmt > 5u)) return E_IDESC_TYPE;
    m.K = kind == K_F16 ? 16u : kind == K_TF32 ? 8u : 32u;
    m.bits = kind == K_F16 ? 16u : kind == K_TF32 ? 32u : 8u;
    m.sf_block = 0; m.scale_ue8m0 = 0; m.sfa_id = m.sfb_id = 0;
  } else {
    m.dtype_f32 = 1;
    m.sfb_id = (d >> 4) & 3u; m.sfa_id = (d >> 29) & 3u;
    m.afmt = (d >> 7) & 7u;
    m.bfmt = kind == K_MXF8F6F4 ? (d >> 10) & 7u : (d >> 10) & 3u;
    m.scale_ue8m0 = (d >> 23) & 1u;
    m.M = ((d >> 27) & 3u) << 7;
    if ((d >> 31) & 1u) return E_IDESC_K96;
    if (kind == K_MXF8F6F4) {
      if (m.afmt == 2u || m.afmt > 5u || m.bfmt == 2u || m.bfmt > 5u) return E_IDESC_TYPE;
      m.K = 32; m.bits = 8; m.sf_block = 32;
      if (!m.scale_ue8m0) return E_SCALE_TYPE;
    } else {
      if (m.afmt != 1u || m.bfmt != 1u) return E_IDESC_TYPE;
      m.K = 64; m.bits = 4;
      m.sf_block = vec == 4u ? 16u : 32u;  // the instruction's scale_vec::4X / block16 vs 2X / block32
      if (kind == K_MXF4 && (!m.scale_ue8m0 || vec == 4u)) return E_SCALE_TYPE;
      if (vec == 4u && m.scale_ue8m0) return E_SCALE_TYPE;
      if (vec != 4u && !m.scale_ue8m0) return E_SCALE_TYPE;
    }
    if (m.sf_block == 16u && (m.sfa_id || m.sfb_id)) return E_IDESC_SFID;
    if (m.sf_block == 32u && m.K == 64u && ((m.sfa_id & 1u) || (m.sfb_id & 1u))) return E_IDESC_SFID;
  }
  if (m.M == 64u && !m.scaled) return E_IDESC_M64;   // valid, but its D layout is not emulated
  if (m.M != 128u) return E_IDESC_SHAPE;            // cta_group::1 dense: M = 64 or 128 (128 for scaled kinds)
  if (!emu_valid_n(kind, m.N)) return E_IDESC_N;
  return E_NONE;
}

// Bits an element of format `fmt` takes in shared memory under `kind`, and where element k of a K-major row
// starts, in bits from the row's first byte (the descriptor then places each 16-byte chunk). PTX ISA "Packing
// format used for matrix A and B by .kind::mxf8f6f4 in Shared Memory": the 4-bit and 6-bit elements "must be
// contiguously packed along with padding": 16 elements packed (element 0 in the lowest bits), then padding to
// 16 bytes (the layouts .b4x16_p64 and .b6x16_p32 of "Padding and alignment of the sub-byte types"). A row of
// K = 32 elements thus spans 32 bytes, as with 8-bit elements. Every other case: `bits` per element, packed.
static __host__ __device__ __forceinline__ uint32_t emu_smem_width(uint32_t kind, uint32_t fmt, uint32_t bits) {
  if (kind != K_F8F6F4 && kind != K_MXF8F6F4) return bits;
  return fmt == 5u ? 4u : (fmt == 3u || fmt == 4u) ? 6u : bits;    // e2m1; e2m3, e3m2; e4m3, e5m2
}
static __host__ __device__ __forceinline__ uint32_t emu_smem_bit(uint32_t k, uint32_t bits, uint32_t width) {
  if (width == bits) return k * bits;
  return 128u * (k / 16u) + width * (k % 16u);
}

// Raw bits of element k of row r of an operand in shared memory (K-major), `width` bits wide (emu_smem_width).
static __device__ __forceinline__ uint32_t emu_raw_smem(const EmuSDesc& d, uint32_t r, uint32_t k, uint32_t bits,
                                                        uint32_t width) {
  const uint32_t bit = emu_smem_bit(k, bits, width), byte = bit / 8u;
  const uint32_t addr = emu_kmajor_chunk(d, r, byte & ~15u) + (byte & 15u);
  const uint32_t shift = 8u * (addr & 3u) + (bit & 7u);
  uint32_t v, hi = 0;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr & ~3u) : "memory");
  if (shift + width > 32u)   // a 6-bit element across two words (always inside its 16-byte chunk)
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(hi) : "r"((addr & ~3u) + 4u) : "memory");
  return (uint32_t)((((unsigned long long)hi << 32) | v) >> shift);
}

// Scale-factor cell for operand row r as the 32-lane quarter `quarter` holds it (scale_vec layouts in tensor
// memory: row r in lane r % 32 of every quarter, column base + r / 32; the byte(s) per K block start at the
// SF id). The PTX ISA ("Block Scaling") asks for the scale factors in all four lane quarters; the accumulator
// row d sits in quarter d / 32, and this emulation reads the copy in that quarter: SFA row d from quarter
// d / 32, SFB for accumulator row d from quarter d / 32 too. `emu_lint_quarters` warns when copies differ,
// so a kernel without that warning does not depend on which copy the hardware reads.
static __device__ __forceinline__ float emu_scale(const uint32_t* sf_col0, uint32_t quarter, uint32_t r, uint32_t blk,
                                                  uint32_t sf_id, const EmuMma& m) {
  const uint32_t cell = sf_col0[(32u * quarter + r % 32u) * EMU_COLS + r / 32u];
  const uint32_t byte = (cell >> (8u * ((sf_id + blk) & 3u))) & 0xFFu;
  return m.scale_ue8m0 ? emu_ue8m0(byte) : emu_ue4m3(byte);
}

// Lint: the bytes an MMA reads from a scale-factor block (rows x K blocks from `sf_id`) must be the same in
// all four lane quarters. Reports the first row that differs (a = 0 for SFA, 1 for SFB, plus row << 1; b = the
// quarter that differs from quarter 0).
static __device__ void emu_lint_quarters(const uint32_t* sf_col0, uint32_t rows, uint32_t which, uint32_t site,
                                         uint32_t nblk, uint32_t sf_id, uint32_t thread) {
  const uint32_t bits = 8u * nblk, mask = (bits >= 32u ? 0xFFFFFFFFu : ((1u << bits) - 1u)) << (8u * sf_id);
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t first = sf_col0[(r % 32u) * EMU_COLS + r / 32u] & mask;
    for (uint32_t q = 1; q < 4u; ++q) {
      if ((sf_col0[(32u * q + r % 32u) * EMU_COLS + r / 32u] & mask) != first) {
        emu_warn_by(thread, W_SCALE_QUARTERS, site, which | (r << 1), q);
        return;
      }
    }
  }
}

// Packed e2m1 fast path (mxf4 / mxf4nvf4): 2x values are small integers, so each 16- or 32-element block
// sum is exact in integers; the block scales multiply exactly in fp32, then one fma per block into D.
static __device__ __forceinline__ uint32_t emu_e2m1x4_to_s8x4(uint32_t nib16) {
  const uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, nib16 & 0x7777u);
  const uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, nib16 & 0x7777u);
  const uint32_t s = __byte_perm(0x0000FF00u, 0u, (nib16 >> 3) & 0x1111u);
  return (pos & ~s) | (neg & s);
}

// One B column's 64 e2m1 values (two 16-byte chunks) as sixteen s8x4 words, element order kept.
static __device__ __forceinline__ void emu_fp4_column_s8(const uint4 b0, const uint4 b1, uint32_t bq[16]) {
  const uint32_t bw[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) { bq[2 * i] = emu_e2m1x4_to_s8x4(bw[i] & 0xFFFFu); bq[2 * i + 1] = emu_e2m1x4_to_s8x4(bw[i] >> 16); }
}

// One accumulator cell's K step: the row's 64 e2m1 values (two 16-byte chunks) against the column's, an exact
// integer sum per scale block, then one fma per block with the two scales. Both MMA paths (one CTA, a CTA pair)
// run exactly this, so their arithmetic and its order are the same.
static __device__ __forceinline__ float emu_fp4_cell(const uint4 a0, const uint4 a1, const uint32_t bq[16],
                                                     const float sa[4], const float sb[4], uint32_t sf_block,
                                                     uint32_t nblk, float sign, float acc) {
  const uint32_t aw[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
  int part[4] = {0, 0, 0, 0};
#pragma unroll
  for (int w = 0; w < 8; ++w) {  // word w holds elements 8w .. 8w+7
    const int blk = (8 * w) / (int)sf_block;
    part[blk] = __dp4a((int)emu_e2m1x4_to_s8x4(aw[w] & 0xFFFFu), (int)bq[2 * w], part[blk]);
    part[blk] = __dp4a((int)emu_e2m1x4_to_s8x4(aw[w] >> 16), (int)bq[2 * w + 1], part[blk]);
  }
  for (uint32_t j = 0; j < nblk; ++j) acc = fmaf(sign * (float)part[j] * 0.25f, sa[j] * sb[j], acc);
  return acc;
}

static __device__ void emu_mma_ordering(uint32_t site, const EmuOp& op);   // (with ld / st tracking)

// Issue: every check that does not depend on the data (descriptors, shapes, columns owned), then queue.
extern "C" __device__ __noinline__ void __nvfp4emu_mma(uint32_t site, uint32_t kind, uint32_t vec, uint32_t d_taddr,
                                                      unsigned long long a_operand, uint32_t a_in_tmem,
                                                      unsigned long long b_desc, uint32_t idesc, uint32_t accumulate,
                                                      uint32_t sfa_taddr, uint32_t sfb_taddr) {
  EmuMma m;
  const uint32_t err = emu_idesc(kind, idesc, vec, m);
  if (err) { emu_fail(err, site, idesc, err == E_IDESC_RESERVED ? emu_idesc_reserved(kind, idesc) : kind); return; }
  emu_count_mma({m.M, m.N, m.K}, 0u);
  const EmuSDesc db = emu_sdesc(b_desc);
  EmuSDesc da = db;
  if (db.err) { emu_fail(db.err, site, (uint32_t)(b_desc >> 32), (uint32_t)b_desc); return; }
  emu_lint_sbo(db, site, b_desc, m.N);
  if (!a_in_tmem) {
    da = emu_sdesc(a_operand);
    if (da.err) { emu_fail(da.err, site, (uint32_t)(a_operand >> 32), (uint32_t)a_operand); return; }
    emu_lint_sbo(da, site, a_operand, m.M);
  }
  if ((d_taddr >> 16) != 0u) { emu_fail(E_LANE_RANGE, site, d_taddr, 0); return; }
  if (emu_block(site, 0, d_taddr & 0xFFFFu, m.M, m.N) == __nvfp4emu_dummy) return;
  if (a_in_tmem && emu_block(site, (uint32_t)a_operand >> 16, (uint32_t)a_operand & 0xFFFFu, m.M,
                             m.K * m.bits / 32u) == __nvfp4emu_dummy) return;
  if (m.scaled) {
    if ((sfa_taddr >> 16) || (sfb_taddr >> 16)) { emu_fail(E_LANE_RANGE, site, sfa_taddr, sfb_taddr); return; }
    if (emu_block(site, 0, sfa_taddr & 0xFFFFu, EMU_LANES, (m.M + 31u) / 32u) == __nvfp4emu_dummy ||
        emu_block(site, 0, sfb_taddr & 0xFFFFu, EMU_LANES, (m.N + 31u) / 32u) == __nvfp4emu_dummy) return;
  }
  EmuOp op = {};
  op.verb = OP_MMA; op.site = site; op.thread = emu_thread(); op.kind = kind; op.vec = vec; op.d_taddr = d_taddr;
  op.a = a_operand; op.a_in_tmem = a_in_tmem; op.b = b_desc; op.idesc = idesc; op.accumulate = accumulate;
  op.sfa = sfa_taddr; op.sfb = sfb_taddr; op.col0 = d_taddr & 0xFFFFu; op.ncols = m.N;
  op.hash_a = a_in_tmem ? 0u : emu_hash_rows(da, m.M, 2u);   // K * bits = 256 bits = two chunks per row
  op.hash_b = emu_hash_rows(db, m.N, 2u);
  if (!a_in_tmem) emu_operand_range(da, m.M, 2u, op.a_lo, op.a_hi);
  emu_operand_range(db, m.N, 2u, op.b_lo, op.b_hi);
  emu_check_loads_before_write(site, op.col0, op.ncols, 0u, m.M);
  emu_mma_ordering(site, op);
  emu_issue(site, op);
}

// The arithmetic of accumulator columns [n0, n1) of an MMA, on the operands as they are now.
static __device__ __noinline__ void emu_mma_columns(const EmuOp& op, uint32_t n0, uint32_t n1) {
  EmuMma m;
  emu_idesc(op.kind, op.idesc, op.vec, m);
  const uint32_t accumulate = op.accumulate, a_in_tmem = op.a_in_tmem;
  const EmuSDesc db = emu_sdesc(op.b);
  const EmuSDesc da = a_in_tmem ? db : emu_sdesc(op.a);
  uint32_t* tmem = emu_tmem_sm(emu_smid());
  uint32_t* D = tmem + (op.d_taddr & 0xFFFFu);
  const uint32_t* A_tmem = a_in_tmem ? tmem + ((uint32_t)op.a >> 16) * EMU_COLS + ((uint32_t)op.a & 0xFFFFu) : nullptr;
  const uint32_t* SFA = m.scaled ? tmem + (op.sfa & 0xFFFFu) : nullptr;
  const uint32_t* SFB = m.scaled ? tmem + (op.sfb & 0xFFFFu) : nullptr;
  const float sign = (m.neg_a ^ m.neg_b) ? -1.0f : 1.0f;

  if (m.bits == 4u && !a_in_tmem) {  // mxf4 / mxf4nvf4, both operands in shared memory
    const uint32_t nblk = 64u / m.sf_block;
    for (uint32_t n = n0; n < n1; ++n) {
      uint32_t bq[16];
      emu_fp4_column_s8(emu_lds128(emu_kmajor_chunk(db, n, 0)), emu_lds128(emu_kmajor_chunk(db, n, 16)), bq);
      float sb[4][4];   // [quarter of the accumulator row][K block]
      for (uint32_t q = 0; q < 4u; ++q)
        for (uint32_t j = 0; j < nblk; ++j) sb[q][j] = emu_scale(SFB, q, n, j, m.sfb_id, m);
      // Four rows at a time: their accumulators and scales are read before any is written, so the loads overlap
      // (M is 128 here). Each cell's arithmetic and its order are those of one row at a time.
      for (uint32_t r0 = 0; r0 < m.M; r0 += 4u) {
        float acc[4], sa[4][4];
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) {
          const uint32_t r = r0 + i;
          acc[i] = accumulate ? __uint_as_float(D[r * EMU_COLS + n]) : 0.0f;
          for (uint32_t j = 0; j < nblk; ++j) sa[i][j] = emu_scale(SFA, r / 32u, r, j, m.sfa_id, m);
        }
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) {
          const uint32_t r = r0 + i;
          acc[i] = emu_fp4_cell(emu_lds128(emu_kmajor_chunk(da, r, 0)), emu_lds128(emu_kmajor_chunk(da, r, 16)), bq,
                                sa[i], sb[r / 32u], m.sf_block, nblk, sign, acc[i]);
        }
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) D[(r0 + i) * EMU_COLS + n] = __float_as_uint(acc[i]);
      }
    }
    return;
  }

  // Generic path: every kind, A in shared or tensor memory (sub-byte f8f6f4 elements packed in shared memory,
  // one per byte in tensor memory).
  const uint32_t wa = emu_smem_width(m.kind, m.afmt, m.bits), wb = emu_smem_width(m.kind, m.bfmt, m.bits);
  for (uint32_t n = n0; n < n1; ++n) {
    for (uint32_t r = 0; r < m.M; ++r) {
      uint32_t* dc = D + r * EMU_COLS + n;
      if (m.kind == K_I8) {
        int acc = accumulate ? (int)*dc : 0;
        for (uint32_t k = 0; k < m.K; ++k) {
          const uint32_t ra = a_in_tmem ? (A_tmem[r * EMU_COLS + k / 4u] >> (8u * (k % 4u))) : emu_raw_smem(da, r, k, 8, 8);
          const uint32_t rb = emu_raw_smem(db, n, k, 8, 8);
          acc += (int)emu_decode(K_I8, m.afmt, ra) * (int)emu_decode(K_I8, m.bfmt, rb);
        }
        *dc = (uint32_t)acc;
        continue;
      }
      float acc = accumulate ? __uint_as_float(*dc) : 0.0f;
      const uint32_t per_scale = m.scaled ? m.sf_block : m.K;
      for (uint32_t k0 = 0; k0 < m.K; k0 += per_scale) {
        float s = 0.0f;
        for (uint32_t k = k0; k < k0 + per_scale; ++k) {
          uint32_t ra;
          if (a_in_tmem) {
            const uint32_t bit = k * m.bits;
            ra = A_tmem[r * EMU_COLS + bit / 32u] >> (bit % 32u);
          } else {
            ra = emu_raw_smem(da, r, k, m.bits, wa);
          }
          const uint32_t rb = emu_raw_smem(db, n, k, m.bits, wb);
          s = fmaf(emu_decode(m.kind, m.afmt, ra), emu_decode(m.kind, m.bfmt, rb), s);
        }
        if (m.scaled) {
          const uint32_t j = k0 / m.sf_block;
          s *= emu_scale(SFA, r / 32u, r, j, m.sfa_id, m) * emu_scale(SFB, r / 32u, n, j, m.sfb_id, m);
        }
        acc += sign * s;
      }
      *dc = __float_as_uint(acc);
    }
  }
}

// ---- Sharing an MMA's columns. The thread completing the queue publishes the operation and claims columns one at
// a time with the CTA's other waiting threads (emu_help), then waits until every claimed column is done. A
// claim is a compare-and-swap of the whole claim word, so a thread claims only for its own CTA's operation: a
// queue's slot passes to another CTA only after a dealloc.
static __device__ __forceinline__ uint32_t emu_share_key() {
  const unsigned long long tag = emu_my_tag();
  return (uint32_t)(tag ^ (tag >> 32)) | 1u;
}
// The next column of the operation shared on queue q, or -1 when none is left (or it is another CTA's).
static __device__ int emu_share_claim(int q, uint32_t key) {
  unsigned long long c = *(volatile unsigned long long*)&__nvfp4emu_share_claim[q];
  for (;;) {
    if ((uint32_t)(c >> 32) != key || (c & 0xFFFFu) >= ((c >> 16) & 0xFFFFu)) return -1;
    const unsigned long long seen = atomicCAS(&__nvfp4emu_share_claim[q], c, c + 1ull);
    if (seen == c) return (int)(c & 0xFFFFu);
    c = seen;
  }
}
static __device__ EmuOp emu_share_op(int q) {
  EmuOp op;
  const volatile uint32_t* from = (const volatile uint32_t*)&__nvfp4emu_share_op[q];
  uint32_t* to = (uint32_t*)&op;
  for (uint32_t i = 0; i < sizeof(EmuOp) / 4u; ++i) to[i] = from[i];
  return op;
}
static __device__ void emu_share_chunk(const EmuOp& op, int q, uint32_t chunk);   // (after the pair section)

// A thread of this CTA waiting anyway: complete columns of the MMA shared on its queue. True when it did any.
static __device__ bool emu_help(int q) {
  const uint32_t key = emu_share_key();
  int c = emu_share_claim(q, key);
  if (c < 0) return false;
  do {
    __threadfence();
    const EmuOp op = emu_share_op(q);     // read after each claim: the next claim may be of the next MMA
    emu_share_chunk(op, q, (uint32_t)c);
    __threadfence();
    atomicAdd(&__nvfp4emu_share_done[q], 1u);
    c = emu_share_claim(q, key);
  } while (c >= 0);
  return true;
}

// Publish `op` on queue q in `chunks` columns, complete what the CTA's waiting threads leave, and return once
// every column is done (the caller holds the queue's lock).
static __device__ void emu_share_run(const EmuOp& op, int q, uint32_t chunks) {
  const uint32_t key = emu_share_key();
  __nvfp4emu_share_op[q] = op;
  *(volatile uint32_t*)&__nvfp4emu_share_done[q] = 0u;
  __threadfence();
  atomicExch(&__nvfp4emu_share_claim[q], ((unsigned long long)key << 32) | ((unsigned long long)chunks << 16));
  uint32_t mine = 0u;
  for (int c = emu_share_claim(q, key); c >= 0; c = emu_share_claim(q, key), ++mine) emu_share_chunk(op, q, (uint32_t)c);
  if (mine) atomicAdd(&__nvfp4emu_share_done[q], mine);
  while (*(volatile uint32_t*)&__nvfp4emu_share_done[q] < chunks) __nanosleep(64);
  __threadfence();
}

// Completion: the checks (the shared-memory operands against the issue's hashes, the scale-factor copies), then
// the arithmetic, its columns shared with the CTA's waiting threads when the operation is queued (q >= 0).
static __device__ void emu_mma_run(const EmuOp& op, int q) {
  EmuMma m;
  emu_idesc(op.kind, op.idesc, op.vec, m);
  const uint32_t site = op.site, a_in_tmem = op.a_in_tmem;
  const EmuSDesc db = emu_sdesc(op.b);
  const EmuSDesc da = a_in_tmem ? db : emu_sdesc(op.a);
  if (!emu_synchronous()) {
    if (!a_in_tmem && emu_hash_rows(da, m.M, 2u) != op.hash_a) emu_fail_by(op.thread, E_SMEM_CHANGED, site, 0u, da.start);
    else if (emu_hash_rows(db, m.N, 2u) != op.hash_b) emu_fail_by(op.thread, E_SMEM_CHANGED, site, 1u, db.start);
  }
  if (m.scaled) {
    const uint32_t* tmem = emu_tmem_sm(emu_smid());
    const uint32_t nblk = m.K / m.sf_block;
    emu_lint_quarters(tmem + (op.sfa & 0xFFFFu), m.M, 0u, site, nblk, m.sfa_id, op.thread);
    emu_lint_quarters(tmem + (op.sfb & 0xFFFFu), m.N, 1u, site, nblk, m.sfb_id, op.thread);
  }
  if (q < 0) emu_mma_columns(op, 0u, m.N);
  else emu_share_run(op, q, m.N);
}

// ------------------------------------------------------------------------------------------- commit
// The cluster-window address of shared address `addr`'s offset in the CTA of cluster rank `rank`.
static __device__ __forceinline__ uint32_t emu_mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// Arrive once on the mbarrier (or on the same offset in every CTA of `cta_mask` with .multicast::cluster).
static __device__ void emu_arrive(uint32_t mbar, uint32_t multicast, uint32_t cta_mask) {
  __threadfence();
  if (!multicast) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(mbar) : "memory");
    return;
  }
  for (uint32_t rank = 0; rank < 16u; ++rank) {
    if (!((cta_mask >> rank) & 1u)) continue;
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(emu_mapa(mbar, rank)) : "memory");
  }
}

// The commit arrives once every operation before it has completed: queued behind them. A multicast commit
// completes at once (the other CTAs wait on barriers of their own, which their queues do not know).
extern "C" __device__ __noinline__ void __nvfp4emu_commit(uint32_t site, uint32_t mbar, uint32_t multicast, uint32_t cta_mask) {
  emu_count(EMU_COUNT_COMMITS, 1u);
  EmuOp op = {};
  op.verb = OP_COMMIT; op.site = site; op.thread = emu_thread(); op.kind = multicast; op.mbar = mbar; op.mask = cta_mask;
  emu_issue(site, op);
  if (multicast && !emu_synchronous()) {
    const uint32_t sm = emu_smid();
    const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
    if (q >= 0) { emu_qlock(q); emu_run_until(q, __nvfp4emu_qtail[q]); emu_qunlock(q); }
  }
}

static __device__ void emu_mma2_run(const EmuOp& op, int q);   // CTA pairs (.cta_group::2), at the end of this file
static __device__ void emu_cp2_run(const EmuOp& op);
static __device__ void emu_run(const EmuOp& op, int q) {
  switch (op.verb) {
    case OP_MMA: emu_mma_run(op, q); break;
    case OP_CP: emu_cp_run(op); break;
    case OP_MMA2: emu_mma2_run(op, q); break;
    case OP_CP2: emu_cp2_run(op); break;
    default: emu_arrive(op.mbar, op.kind, op.mask); break;
  }
  const uint32_t sm = emu_smid();
  if (sm < EMU_MAX_SM) *(volatile unsigned long long*)&__nvfp4emu_touched[sm] = emu_now();
}

// Whether a queued (or issuing) MMA reads tensor-memory columns [col, col + n) of lanes [lane0, lane0 + 32):
// its scale factors (every lane quarter), A in tensor memory, or D when it accumulates.
static __device__ bool emu_mma_reads(const EmuOp& op, uint32_t col, uint32_t n, uint32_t lane0) {
  if (op.verb != OP_MMA) return false;
  EmuMma m;
  if (emu_idesc(op.kind, op.idesc, op.vec, m) != E_NONE) return false;
  const auto hits = [&](uint32_t c, uint32_t cols, uint32_t l, uint32_t lanes) {
    return c < col + n && col < c + cols && l < lane0 + 32u && lane0 < l + lanes;
  };
  if (m.scaled && (hits(op.sfa & 0xFFFFu, (m.M + 31u) / 32u, 0u, EMU_LANES) ||
                   hits(op.sfb & 0xFFFFu, (m.N + 31u) / 32u, 0u, EMU_LANES))) return true;
  if (op.a_in_tmem && hits((uint32_t)op.a & 0xFFFFu, m.K * m.bits / 32u, (uint32_t)op.a >> 16, m.M)) return true;
  return op.accumulate && hits(op.d_taddr & 0xFFFFu, m.N, 0u, m.M);
}

// Whether a queued mma/cp writes columns [col, col + n) of lanes [lane0, lane0 + 32).
static __device__ bool emu_op_writes(const EmuOp& op, uint32_t col, uint32_t n, uint32_t lane0) {
  uint32_t l0 = 0u, lanes = EMU_LANES;
  if (op.verb == OP_CP) {
    EmuCpShape c;
    if (!emu_cp_shape(op.shape, c)) return false;
    l0 = op.d_taddr >> 16;
    lanes = c.dst_rows;
  } else if (op.verb != OP_MMA && op.verb != OP_MMA2) {
    return false;
  }
  return op.col0 < col + n && col < op.col0 + op.ncols && l0 < lane0 + 32u && lane0 < l0 + lanes;
}

// A tcgen05.st of warp `warp` into columns [col, col + n) of its quarter, where an MMA issued before it reads: a
// B200 runs an issued MMA at once, on the values before the store. An MMA still queued therefore completes now,
// and a warning names the race; so does an MMA already run here that was issued after the storing warp's last
// barrier wait (the store was meant for it and came too late). Likewise a queued cp or MMA issued before the store
// that writes the same cells (no wait completed it): a B200 has run it long before the store, so it completes
// now and the store's values stand (jIab-b's sub_dump.py @0c8dbdd passed on a B200 with uncommitted copies into
// its scale-factor columns ahead of the stores of the real ones), with a warning. Then the store joins the warp's
// record.
static __device__ void emu_store_lands(uint32_t site, int q, uint32_t col, uint32_t n, uint32_t lane0, uint32_t warp) {
  const uint32_t sm = emu_smid();
  volatile EmuWarpSync& s = emu_warp_sync(sm);
  bool warned = false;
  if (*(volatile uint32_t*)&__nvfp4emu_qhead[q] != *(volatile uint32_t*)&__nvfp4emu_qtail[q]) {
    emu_qlock(q);
    const uint32_t head = __nvfp4emu_qhead[q], tail = __nvfp4emu_qtail[q];
    uint32_t end = head, reader = 0u, writer = 0u;
    for (uint32_t i = head; i != tail; ++i) {
      if (emu_mma_reads(emu_qop(q, i), col, n, lane0)) { end = i + 1u; reader = emu_qop(q, i).site; }
      else if (emu_op_writes(emu_qop(q, i), col, n, lane0)) { end = i + 1u; writer = emu_qop(q, i).site; }
    }
    if (end != head) {
      emu_run_until(q, end);
      if (reader) emu_warn(W_ST_UNDER_MMA, site, reader, warp);
      else emu_warn(W_ST_OVER_QUEUED, site, writer, warp);
      warned = true;
    }
    emu_qunlock(q);
  }
  const uint32_t mma_at = *(volatile uint32_t*)&__nvfp4emu_last_mma_at[q];
  if (!warned && mma_at != 0u && (int)(mma_at - s.synced) > 0 &&
      emu_mma_reads(__nvfp4emu_last_mma[q], col, n, lane0))
    emu_warn(W_ST_UNDER_MMA, site, __nvfp4emu_last_mma[q].site, warp);
  const uint32_t seq = atomicAdd(&__nvfp4emu_sm_events[sm], 1u) + 1u;
  const unsigned long long me = emu_my_tag();
  const uint32_t epoch = s.epoch;
  if (s.tag != me || s.site == 0u || s.epoch_at != epoch) {
    s.tag = me; s.warp = warp; s.lo = col; s.hi = col + n; s.epoch_at = epoch;
  } else {
    s.lo = s.lo < col ? s.lo : col; s.hi = s.hi > col + n ? s.hi : col + n;
  }
  s.seq = seq;
  s.site = site;
  __threadfence();
}

// At an MMA's issue: another warp's stores into columns the MMA reads, made after the issuing warp last left a
// barrier wait, are not ordered before it (a warning: they were issued first, so a B200 most likely sees them).
// The MMA becomes the CTA's last, for stores that come after it.
static __device__ void emu_mma_ordering(uint32_t site, const EmuOp& op) {
  if (emu_synchronous()) return;
  const uint32_t sm = emu_smid();
  const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
  if (q < 0) return;
  volatile EmuWarpSync& mine = emu_warp_sync(sm);
  const uint32_t synced = mine.synced;
  const unsigned long long me = emu_my_tag();
  for (uint32_t w = 0; w < EMU_WARP_SLOTS; ++w) {
    const volatile EmuWarpSync& s = __nvfp4emu_warpsync[sm * EMU_WARP_SLOTS + w];
    if (&s == &mine || s.tag != me || s.site == 0u || (int)(s.seq - synced) <= 0) continue;
    if (emu_mma_reads(op, s.lo, s.hi - s.lo, 32u * (s.warp % 4u))) {
      emu_warn(W_ST_UNORDERED, site, s.site, s.warp);
      break;
    }
  }
  __nvfp4emu_last_mma[q] = op;
  __threadfence();
  *(volatile uint32_t*)&__nvfp4emu_last_mma_at[q] = atomicAdd(&__nvfp4emu_sm_events[sm], 1u) + 1u;
}

// tcgen05.ld of columns [col, col + n) (lanes of the warp's quarter): an error when a queued mma/cp still writes one
// of them (never committed, or its commit's mbarrier never waited on); the load is then pending until it is
// finished. tcgen05.st: an error when a warp's unfinished load reads them, then emu_store_lands.
static __device__ void emu_track_load_store(uint32_t site, uint32_t is_load, uint32_t col, uint32_t n, uint32_t lane0,
                                            uint32_t warp) {
  if (emu_synchronous()) return;
  const uint32_t sm = emu_smid();
  const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
  if (q < 0) return;
  if (!is_load) {
    emu_check_unfinished_loads(site, q, col, n, lane0, 32u);
    emu_store_lands(site, q, col, n, lane0, warp % 32u);
    return;
  }
  // An empty queue has no writer: epilogue loads skip the lock, so a CTA's warps load at an even pace (taking the
  // lock for each load let one warp free the columns while another had most of its loads still to do).
  if (*(volatile uint32_t*)&__nvfp4emu_qhead[q] != *(volatile uint32_t*)&__nvfp4emu_qtail[q]) {
    emu_qlock(q);
    const uint32_t i = emu_pending_writer(q, col, n);
    if (i != __nvfp4emu_qtail[q]) emu_fail(E_LD_INFLIGHT, site, emu_qop(q, i).site, emu_commit_after(q, i));
    emu_qunlock(q);
  }
  emu_ldpend_set((uint32_t)q * 32u + warp % 32u, site, col, n);
}

// ------------------------------------------------------------------------------------------- CTA pairs
// .cta_group::2 (PTX ISA "tcgen05": "Issue Granularity", "CTA Pair"; CUTLASS's 2x1SM MMA traits): the CTAs of
// cluster ranks 2k and 2k+1 form a pair ("peer CTAs"), each on its own SM with its own tensor memory.
//  - alloc / dealloc: each CTA's warp takes (frees) columns of its own SM as cta_group::1 does; alloc then meets
//    the peer's alloc (a table in global memory keyed by cluster and pair) and records the peer's SM, tag and
//    first column beside the CTA's queue slot. The hardware gives both CTAs the same columns; here they are the
//    same unless other CTAs hold columns on one of the two SMs (or both CTAs share one SM), and an operation
//    reaches the peer's columns at the peer's own allocation (its offset from the issuer's).
//  - mma (M = 256): one thread of the pair issues it. The CTA of pair index h (rank & 1) holds D rows
//    [128 h, 128 h + 128) in its own tensor memory (all N columns), reads its 128 rows of A from its own shared
//    memory (or tensor memory) at the descriptor's offset, and its scale factors (SFA for its rows, SFB for all
//    N) from its own tensor memory. B's N rows are split: rows [0, N/2) from the even CTA's shared memory,
//    [N/2, N) from the odd CTA's, both at the descriptor's offset.
//  - cp: each CTA's shared memory at the descriptor's offset into that CTA's tensor memory at the address.
//  - commit: arrives as cta_group::1 does (multicast: the same offset in every CTA of the mask), and completes
//    the issuer's queue up to it at once, in the issuing thread: a pair operation completes at its commit.
//  - Shared memory of either CTA is read through the cluster window (mapa + ld.shared::cluster).
extern "C" {
__device__ uint32_t __nvfp4emu_peer_sm[EMU_MAX_SM * EMU_GRANULES];    // by queue slot: the peer's SM + 1; 0 = none
__device__ uint32_t __nvfp4emu_peer_col[EMU_MAX_SM * EMU_GRANULES];   // the peer's first column
__device__ unsigned long long __nvfp4emu_peer_tag[EMU_MAX_SM * EMU_GRANULES];
}
#define EMU_PAIR_SLOTS 1024
struct EmuPairSlot { unsigned long long key, tag[2]; uint32_t sm[2], col[2], flags, reads; };
extern "C" {
__device__ EmuPairSlot __nvfp4emu_pairs[EMU_PAIR_SLOTS];
}

static __device__ __forceinline__ uint32_t emu_sreg_rank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
static __device__ __forceinline__ uint32_t emu_sreg_nrank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
static __device__ __forceinline__ unsigned long long emu_cluster_linear() {
  uint32_t x, y, z, nx, ny;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(x)); asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(y));
  asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(z)); asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(nx));
  asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(ny));
  return x + (unsigned long long)nx * (y + (unsigned long long)ny * z);
}
// Offset that turns a shared::cta address of this CTA into the cluster-window address of the same offset in the
// CTA of cluster rank `rank` (the window is contiguous per CTA).
static __device__ __forceinline__ uint32_t emu_rank_delta(uint32_t addr, uint32_t rank) {
  return emu_mapa(addr, rank) - addr;
}
static __device__ __forceinline__ uint4 emu_ldc128(uint32_t caddr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(caddr) : "memory");
  return v;
}
static __device__ __forceinline__ uint32_t emu_ldc32(uint32_t caddr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(caddr) : "memory");
  return v;
}
// emu_raw_smem through the cluster window: element k of row r, in the CTA whose window is `delta` away.
static __device__ __forceinline__ uint32_t emu_raw_smem_at(const EmuSDesc& d, uint32_t r, uint32_t k, uint32_t bits,
                                                           uint32_t width, uint32_t delta) {
  const uint32_t bit = emu_smem_bit(k, bits, width), byte = bit / 8u;
  const uint32_t addr = emu_kmajor_chunk(d, r, byte & ~15u) + (byte & 15u);
  const uint32_t shift = 8u * (addr & 3u) + (bit & 7u);
  const uint32_t v = emu_ldc32((addr & ~3u) + delta);
  const uint32_t hi = shift + width > 32u ? emu_ldc32((addr & ~3u) + 4u + delta) : 0u;
  return (uint32_t)((((unsigned long long)hi << 32) | v) >> shift);
}

struct EmuPair { uint32_t sm[2]; int delta[2]; unsigned long long tag[2]; uint32_t rank0; };
extern "C" {
__device__ EmuPair __nvfp4emu_share_pair[EMU_MAX_SM * EMU_GRANULES];   // the pair of a pair MMA being shared
}
// This CTA's pair: SM, tag and column offset of each half (index = cluster rank & 1). False (and an error) when
// the CTA holds no tensor memory from tcgen05.alloc.cta_group::2.
static __device__ bool emu_pair_of(uint32_t site, EmuPair& p, uint32_t thread) {
  const uint32_t sm = emu_smid(), rank = emu_sreg_rank();
  const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
  const uint32_t peer = q >= 0 ? *(volatile uint32_t*)&__nvfp4emu_peer_sm[q] : 0u;
  if (peer == 0u) { emu_fail_by(thread, E_PAIR_NO_PEER, site, rank, emu_sreg_nrank()); return false; }
  const uint32_t me = rank & 1u, col0 = (uint32_t)(q % EMU_GRANULES) * 32u;
  p.rank0 = rank & ~1u;
  p.sm[me] = sm; p.sm[me ^ 1u] = peer - 1u;
  p.delta[me] = 0; p.delta[me ^ 1u] = (int)*(volatile uint32_t*)&__nvfp4emu_peer_col[q] - (int)col0;
  p.tag[me] = emu_my_tag(); p.tag[me ^ 1u] = *(volatile unsigned long long*)&__nvfp4emu_peer_tag[q];
  return true;
}
// Columns [col, col + n) of the peer (half h) still belong to it.
static __device__ bool emu_pair_cols_owned(const EmuPair& p, uint32_t h, uint32_t col, uint32_t n) {
  const int c = (int)col + p.delta[h];
  if (c < 0 || c + (int)n > (int)EMU_COLS) return false;
  for (uint32_t g = (uint32_t)c / 32u; g <= ((uint32_t)c + n - 1u) / 32u; ++g)
    if (*(volatile unsigned long long*)&__nvfp4emu_owner[p.sm[h] * EMU_GRANULES + g] != p.tag[h]) return false;
  return true;
}
static __device__ bool emu_pair_check_cols(uint32_t site, const EmuPair& p, uint32_t col, uint32_t n, uint32_t thread) {
  for (uint32_t h = 0; h < 2u; ++h)
    if (!emu_pair_cols_owned(p, h, col, n)) { emu_fail_by(thread, E_PAIR_PEER_COLS, site, col, n | (h << 16)); return false; }
  return true;
}

// tcgen05.alloc.cta_group::2: this CTA's columns (as cta_group::1), then the meeting with the peer's alloc.
extern "C" __device__ __noinline__ void __nvfp4emu_alloc2(uint32_t site, uint32_t dst_smem, uint32_t ncols) {
  __nvfp4emu_alloc(site, dst_smem, ncols);
  if (emu_lane() == 0u) do {   // once; break = give up (the error is recorded)
    uint32_t col;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(col) : "r"(dst_smem) : "memory");
    col &= 0xFFFFu;
    const uint32_t sm = emu_smid(), rank = emu_sreg_rank(), n = emu_sreg_nrank();
    if (sm >= EMU_MAX_SM) break;
    if ((rank ^ 1u) >= n) { emu_fail(E_PAIR_CLUSTER, site, n, rank); break; }
    const unsigned long long cl = emu_cluster_linear();
    const unsigned long long key = (emu_gridid() << 40) ^ (cl << 4) ^ ((rank >> 1) + 1u);
    int s = -1;
    for (uint32_t i = 0; i < EMU_PAIR_SLOTS && s < 0; ++i) {
      const uint32_t at = (uint32_t)((cl * 8u + (rank >> 1) + i) % EMU_PAIR_SLOTS);
      const unsigned long long prev = atomicCAS(&__nvfp4emu_pairs[at].key, 0ull, key);
      if (prev == 0ull || prev == key) s = (int)at;
    }
    if (s < 0) { emu_fail(E_PAIR_TIMEOUT, site, rank ^ 1u, 1u); break; }
    EmuPairSlot& slot = __nvfp4emu_pairs[s];
    const uint32_t me = rank & 1u;
    slot.tag[me] = emu_my_tag(); slot.sm[me] = sm; slot.col[me] = col;
    __threadfence();
    atomicOr(&slot.flags, 1u << me);
    const unsigned long long t0 = emu_now();
    bool met = true;
    while (!(*(volatile uint32_t*)&slot.flags & (1u << (me ^ 1u)))) {
      if (emu_now() - t0 > 10000000000ull) { emu_fail(E_PAIR_TIMEOUT, site, rank ^ 1u, 0u); met = false; break; }
      __nanosleep(1000);
    }
    if (!met) break;
    __threadfence();
    const uint32_t q = sm * EMU_GRANULES + col / 32u;
    __nvfp4emu_peer_col[q] = *(volatile uint32_t*)&slot.col[me ^ 1u];
    __nvfp4emu_peer_tag[q] = *(volatile unsigned long long*)&slot.tag[me ^ 1u];
    __threadfence();
    __nvfp4emu_peer_sm[q] = *(volatile uint32_t*)&slot.sm[me ^ 1u] + 1u;
    __threadfence();
    if (atomicAdd(&slot.reads, 1u) == 1u) {   // the second to read frees the slot
      slot.flags = 0u; slot.reads = 0u;
      __threadfence();
      atomicExch(&slot.key, 0ull);
    }
  } while (false);
  __syncwarp();
}

// tcgen05.dealloc.cta_group::2: forget the peer, then free this CTA's columns (as cta_group::1).
extern "C" __device__ __noinline__ void __nvfp4emu_dealloc2(uint32_t site, uint32_t taddr, uint32_t ncols) {
  __syncwarp();
  if (emu_lane() == 0u) {
    const uint32_t sm = emu_smid(), col = taddr & 0xFFFFu;
    if (sm < EMU_MAX_SM && col < EMU_COLS && emu_cols_owned(sm, col, 32u)) __nvfp4emu_peer_sm[sm * EMU_GRANULES + col / 32u] = 0u;
    __threadfence();
  }
  __syncwarp();
  __nvfp4emu_dealloc(site, taddr, ncols);
}

// The instruction descriptor of a pair MMA: M = 256 (bits 24-28 = M >> 4, or 27-28 = M >> 7 for the scaled
// kinds), decoded as the M = 128 descriptor of each half; N a multiple of 16 from 16 to 256.
static __device__ uint32_t emu_idesc2(uint32_t kind, uint32_t d, uint32_t vec, EmuMma& m) {
  const bool scaled = kind >= K_MXF8F6F4;
  const uint32_t M = scaled ? ((d >> 27) & 3u) << 7 : ((d >> 24) & 0x1Fu) << 4;
  if (M != 256u) return E_PAIR_M;
  const uint32_t half = scaled ? (d & ~(3u << 27)) | (1u << 27) : (d & ~(0x1Fu << 24)) | (8u << 24);
  const uint32_t err = emu_idesc(kind, half, vec, m);
  if (err) return err;
  m.M = 256u;
  if (m.N % 16u || m.N < 16u) return E_PAIR_N;
  return E_NONE;
}

// Issue (any thread of the pair; CUTLASS issues from the even CTA): checks, then queued in the issuer's queue.
extern "C" __device__ __noinline__ void __nvfp4emu_mma2(uint32_t site, uint32_t kind, uint32_t vec, uint32_t d_taddr,
                                                       unsigned long long a_operand, uint32_t a_in_tmem,
                                                       unsigned long long b_desc, uint32_t idesc, uint32_t accumulate,
                                                       uint32_t sfa_taddr, uint32_t sfb_taddr, uint32_t lane_mask) {
  if (lane_mask) { emu_fail(E_PAIR_MASK, site, lane_mask, 0); return; }
  // A single thread of the pair issues it (PTX ISA, tcgen05 issue granularity); CUTLASS and CuTe DSL issue it from
  // the even CTA. A kernel whose odd CTA issues the same MMAs as well, never committed, passed on B200s: run only
  // the even CTA's (the odd CTA's would run here at a commit that never comes, or when its queue fills).
  if (emu_sreg_rank() & 1u) { emu_warn(W_PAIR_ODD_MMA, site, emu_sreg_rank(), 0); return; }
  EmuMma m;
  const uint32_t err = emu_idesc2(kind, idesc, vec, m);
  if (err) {
    emu_fail(err, site, idesc, err == E_IDESC_RESERVED ? emu_idesc_reserved(kind, idesc) : kind);
    return;
  }
  emu_count_mma({m.M, m.N, m.K}, 1u);
  const EmuSDesc db = emu_sdesc(b_desc);
  EmuSDesc da = db;
  if (db.err) { emu_fail(db.err, site, (uint32_t)(b_desc >> 32), (uint32_t)b_desc); return; }
  emu_lint_sbo(db, site, b_desc, m.N / 2u);
  if (!a_in_tmem) {
    da = emu_sdesc(a_operand);
    if (da.err) { emu_fail(da.err, site, (uint32_t)(a_operand >> 32), (uint32_t)a_operand); return; }
    emu_lint_sbo(da, site, a_operand, 128u);
  }
  EmuPair p;
  if (!emu_pair_of(site, p, emu_thread())) return;
  if ((d_taddr >> 16) != 0u) { emu_fail(E_LANE_RANGE, site, d_taddr, 0); return; }
  if (emu_block(site, 0, d_taddr & 0xFFFFu, 128u, m.N) == __nvfp4emu_dummy) return;
  if (!emu_pair_check_cols(site, p, d_taddr & 0xFFFFu, m.N, emu_thread())) return;
  if (a_in_tmem) {
    const uint32_t ac = (uint32_t)a_operand & 0xFFFFu, an = m.K * m.bits / 32u;
    if (emu_block(site, (uint32_t)a_operand >> 16, ac, 128u, an) == __nvfp4emu_dummy) return;
    if (!emu_pair_check_cols(site, p, ac, an, emu_thread())) return;
  }
  if (m.scaled) {
    if ((sfa_taddr >> 16) || (sfb_taddr >> 16)) { emu_fail(E_LANE_RANGE, site, sfa_taddr, sfb_taddr); return; }
    if (emu_block(site, 0, sfa_taddr & 0xFFFFu, EMU_LANES, 4u) == __nvfp4emu_dummy ||
        emu_block(site, 0, sfb_taddr & 0xFFFFu, EMU_LANES, (m.N + 31u) / 32u) == __nvfp4emu_dummy) return;
    if (!emu_pair_check_cols(site, p, sfa_taddr & 0xFFFFu, 4u, emu_thread()) ||
        !emu_pair_check_cols(site, p, sfb_taddr & 0xFFFFu, (m.N + 31u) / 32u, emu_thread())) return;
  }
  EmuOp op = {};
  op.verb = OP_MMA2; op.site = site; op.thread = emu_thread(); op.kind = kind; op.vec = vec; op.d_taddr = d_taddr;
  op.a = a_operand; op.a_in_tmem = a_in_tmem; op.b = b_desc; op.idesc = idesc; op.accumulate = accumulate;
  op.sfa = sfa_taddr; op.sfb = sfb_taddr; op.col0 = d_taddr & 0xFFFFu; op.ncols = m.N;
  if (!a_in_tmem) emu_operand_range(da, 128u, 2u, op.a_lo, op.a_hi);
  emu_operand_range(db, m.N / 2u, 2u, op.b_lo, op.b_hi);
  emu_issue(site, op);
}

// The arithmetic of accumulator columns [n0, n1) of half h (cluster rank p.rank0 + h) of a pair MMA: A's rows
// from that CTA's shared memory, B's row n from the CTA holding half n / (N/2) of B, through the cluster window.
static __device__ __noinline__ void emu_mma2_columns(const EmuOp& op, const EmuPair& p, uint32_t h, uint32_t n0,
                                                     uint32_t n1) {
  EmuMma m;
  emu_idesc2(op.kind, op.idesc, op.vec, m);
  const EmuSDesc db = emu_sdesc(op.b);
  const EmuSDesc da = op.a_in_tmem ? db : emu_sdesc(op.a);
  const uint32_t wa = emu_smem_width(m.kind, m.afmt, m.bits), wb = emu_smem_width(m.kind, m.bfmt, m.bits);
  const uint32_t half_n = m.N / 2u;
  const uint32_t db_delta[2] = {emu_rank_delta(db.start, p.rank0), emu_rank_delta(db.start, p.rank0 + 1u)};
  const float sign = (m.neg_a ^ m.neg_b) ? -1.0f : 1.0f;
  uint32_t* tmem = emu_tmem_sm(p.sm[h]);
  uint32_t* D = tmem + (int)(op.d_taddr & 0xFFFFu) + p.delta[h];
  const uint32_t da_delta = emu_rank_delta(da.start, p.rank0 + h);
  const uint32_t* A_tmem = op.a_in_tmem ? tmem + ((uint32_t)op.a >> 16) * EMU_COLS + (int)((uint32_t)op.a & 0xFFFFu) + p.delta[h] : nullptr;
  const uint32_t* SFA = m.scaled ? tmem + (int)(op.sfa & 0xFFFFu) + p.delta[h] : nullptr;
  const uint32_t* SFB = m.scaled ? tmem + (int)(op.sfb & 0xFFFFu) + p.delta[h] : nullptr;

  if (m.bits == 4u && !op.a_in_tmem) {  // mxf4 / mxf4nvf4 from shared memory: as emu_mma_columns' fast path
    const uint32_t nblk = 64u / m.sf_block;
    for (uint32_t n = n0; n < n1; ++n) {
      const uint32_t bh = n / half_n, bn = n % half_n;
      uint32_t bq[16];
      emu_fp4_column_s8(emu_ldc128(emu_kmajor_chunk(db, bn, 0) + db_delta[bh]),
                        emu_ldc128(emu_kmajor_chunk(db, bn, 16) + db_delta[bh]), bq);
      float sb[4][4];
      for (uint32_t q = 0; q < 4u; ++q)
        for (uint32_t j = 0; j < nblk; ++j) sb[q][j] = emu_scale(SFB, q, n, j, m.sfb_id, m);
      for (uint32_t r0 = 0; r0 < 128u; r0 += 4u) {
        float acc[4], sa[4][4];
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) {
          const uint32_t r = r0 + i;
          acc[i] = op.accumulate ? __uint_as_float(D[r * EMU_COLS + n]) : 0.0f;
          for (uint32_t j = 0; j < nblk; ++j) sa[i][j] = emu_scale(SFA, r / 32u, r, j, m.sfa_id, m);
        }
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) {
          const uint32_t r = r0 + i;
          acc[i] = emu_fp4_cell(emu_ldc128(emu_kmajor_chunk(da, r, 0) + da_delta),
                                emu_ldc128(emu_kmajor_chunk(da, r, 16) + da_delta), bq, sa[i], sb[r / 32u],
                                m.sf_block, nblk, sign, acc[i]);
        }
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) D[(r0 + i) * EMU_COLS + n] = __float_as_uint(acc[i]);
      }
    }
    return;
  }

  for (uint32_t n = n0; n < n1; ++n) {
    const uint32_t bh = n / half_n, bn = n % half_n;
    for (uint32_t r = 0; r < 128u; ++r) {
      uint32_t* dc = D + r * EMU_COLS + n;
      if (m.kind == K_I8) {
        int acc = op.accumulate ? (int)*dc : 0;
        for (uint32_t k = 0; k < m.K; ++k) {
          const uint32_t ra = op.a_in_tmem ? (A_tmem[r * EMU_COLS + k / 4u] >> (8u * (k % 4u))) : emu_raw_smem_at(da, r, k, 8, 8, da_delta);
          const uint32_t rb = emu_raw_smem_at(db, bn, k, 8, 8, db_delta[bh]);
          acc += (int)emu_decode(K_I8, m.afmt, ra) * (int)emu_decode(K_I8, m.bfmt, rb);
        }
        *dc = (uint32_t)acc;
        continue;
      }
      float acc = op.accumulate ? __uint_as_float(*dc) : 0.0f;
      const uint32_t per_scale = m.scaled ? m.sf_block : m.K;
      for (uint32_t k0 = 0; k0 < m.K; k0 += per_scale) {
        float s = 0.0f;
        for (uint32_t k = k0; k < k0 + per_scale; ++k) {
          uint32_t ra;
          if (op.a_in_tmem) {
            const uint32_t bit = k * m.bits;
            ra = A_tmem[r * EMU_COLS + bit / 32u] >> (bit % 32u);
          } else {
            ra = emu_raw_smem_at(da, r, k, m.bits, wa, da_delta);
          }
          const uint32_t rb = emu_raw_smem_at(db, bn, k, m.bits, wb, db_delta[bh]);
          s = fmaf(emu_decode(m.kind, m.afmt, ra), emu_decode(m.kind, m.bfmt, rb), s);
        }
        if (m.scaled) {
          const uint32_t j = k0 / m.sf_block;
          s *= emu_scale(SFA, r / 32u, r, j, m.sfa_id, m) * emu_scale(SFB, r / 32u, n, j, m.sfb_id, m);
        }
        acc += sign * s;
      }
      *dc = __float_as_uint(acc);
    }
  }
}

// Completion (in the issuing CTA, at the commit): the checks, then both halves' columns, shared with the CTA's
// waiting threads when the operation is queued (q >= 0).
static __device__ void emu_mma2_run(const EmuOp& op, int q) {
  EmuMma m;
  emu_idesc2(op.kind, op.idesc, op.vec, m);
  EmuPair p;
  if (!emu_pair_of(op.site, p, op.thread)) return;
  if (!emu_pair_check_cols(op.site, p, op.d_taddr & 0xFFFFu, m.N, op.thread)) return;
  if (m.scaled) {
    const uint32_t nblk_all = m.K / m.sf_block;
    for (uint32_t h = 0; h < 2u; ++h) {
      const uint32_t* tmem = emu_tmem_sm(p.sm[h]);
      emu_lint_quarters(tmem + (int)(op.sfa & 0xFFFFu) + p.delta[h], 128u, 0u, op.site, nblk_all, m.sfa_id, op.thread);
      emu_lint_quarters(tmem + (int)(op.sfb & 0xFFFFu) + p.delta[h], m.N, 1u, op.site, nblk_all, m.sfb_id, op.thread);
    }
  }
  if (q < 0) {
    for (uint32_t h = 0; h < 2u; ++h) emu_mma2_columns(op, p, h, 0u, m.N);
  } else {
    __nvfp4emu_share_pair[q] = p;
    emu_share_run(op, q, 2u * m.N);
  }
  for (uint32_t h = 0; h < 2u; ++h) *(volatile unsigned long long*)&__nvfp4emu_touched[p.sm[h]] = emu_now();
}

// tcgen05.cp.cta_group::2: each CTA's shared memory at the descriptor's offset into its own tensor memory.
extern "C" __device__ __noinline__ void __nvfp4emu_cp2(uint32_t site, uint32_t taddr, unsigned long long sdesc, uint32_t shape) {
  emu_count(EMU_COUNT_SCALE_COPIES, 1u);
  const EmuSDesc d = emu_sdesc(sdesc);
  if (d.err) { emu_fail(d.err, site, (uint32_t)(sdesc >> 32), (uint32_t)sdesc); return; }
  emu_lint_sbo(d, site, sdesc, shape == C_4x256b ? 4u : shape == C_32x128b_x4 ? 32u : 64u);
  EmuCpShape c;
  if (!emu_cp_shape(shape, c)) { emu_fail(E_CP_SHAPE, site, shape, 0); return; }
  if (emu_block(site, taddr >> 16, taddr & 0xFFFFu, c.dst_rows, 4u * c.chunks) == __nvfp4emu_dummy) return;
  EmuPair p;
  if (!emu_pair_of(site, p, emu_thread())) return;
  if (!emu_pair_check_cols(site, p, taddr & 0xFFFFu, 4u * c.chunks, emu_thread())) return;
  EmuOp op = {};
  op.verb = OP_CP2; op.site = site; op.thread = emu_thread(); op.shape = shape; op.d_taddr = taddr; op.b = sdesc;
  op.col0 = taddr & 0xFFFFu; op.ncols = 4u * c.chunks;
  emu_operand_range(d, c.rows, c.chunks, op.b_lo, op.b_hi);
  emu_issue(site, op);
}

static __device__ void emu_cp2_run(const EmuOp& op) {
  const EmuSDesc d = emu_sdesc(op.b);
  EmuCpShape c;
  emu_cp_shape(op.shape, c);
  EmuPair p;
  if (!emu_pair_of(op.site, p, op.thread)) return;
  if (!emu_pair_check_cols(op.site, p, op.d_taddr & 0xFFFFu, op.ncols, op.thread)) return;
  for (uint32_t h = 0; h < 2u; ++h) {
    const uint32_t delta = emu_rank_delta(d.start, p.rank0 + h);
    uint32_t* block = emu_tmem_sm(p.sm[h]) + (op.d_taddr >> 16) * EMU_COLS + (int)(op.d_taddr & 0xFFFFu) + p.delta[h];
    for (uint32_t r = 0; r < c.rows; ++r) {
      for (uint32_t ch = 0; ch < c.chunks; ++ch) {
        const uint4 v = emu_ldc128(emu_kmajor_chunk(d, r, 16u * ch) + delta);
        uint32_t lanes[4];
        const uint32_t nl = emu_cp_lanes(op.shape, r, lanes);
        for (uint32_t i = 0; i < nl; ++i) {
          uint32_t* cell = block + lanes[i] * EMU_COLS + 4u * ch;
          cell[0] = v.x; cell[1] = v.y; cell[2] = v.z; cell[3] = v.w;
        }
      }
    }
    *(volatile unsigned long long*)&__nvfp4emu_touched[p.sm[h]] = emu_now();
  }
}

// tcgen05.commit.cta_group::2: queued behind the issuer's operations, which then complete at once in this thread
// (the peer's waits never drain the issuer's queue).
extern "C" __device__ __noinline__ void __nvfp4emu_commit2(uint32_t site, uint32_t mbar, uint32_t multicast, uint32_t cta_mask) {
  emu_count(EMU_COUNT_COMMITS, 1u);
  EmuOp op = {};
  op.verb = OP_COMMIT; op.site = site; op.thread = emu_thread(); op.kind = multicast; op.mbar = mbar; op.mask = cta_mask;
  emu_issue(site, op);
  if (!emu_synchronous()) {
    const uint32_t sm = emu_smid();
    const int q = sm < EMU_MAX_SM ? emu_queue_of(sm) : -1;
    if (q >= 0) { emu_qlock(q); emu_run_until(q, __nvfp4emu_qtail[q]); emu_qunlock(q); }
  }
}

// TMA with .cta_group::2 (cp.async.bulk{.tensor}...cta_group::2 [dst], ..., [mbar]): the mbarrier may be the
// peer's. Kernels name it as CUTLASS does: their own shared::cta address with bit 24 (the pair bit of the
// cluster window) cleared for the even CTA's barrier, or set for the odd's. On a GPU whose shared::cta addresses
// carry the CTA's rank (mapa of an own address to its own rank changes nothing) the address is already that
// cluster address; otherwise bit 24 picks the pair's CTA and mapa gives its address. emu_pair_barrier_for gives
// the mbarrier a TMA for destination CTA `dest` (cluster rank) completes on: the same offset in that CTA's pair,
// in the even or odd CTA as `mbar` names it.
static __device__ __forceinline__ uint32_t emu_cta_rank_of(uint32_t cluster_address) {
  uint32_t r;
  asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(r) : "r"(cluster_address));
  return r;
}

static __device__ uint32_t emu_pair_barrier_for(uint32_t mbar, uint32_t dst, uint32_t dest) {
  uint32_t offset = mbar & ~(1u << 24), odd = (mbar >> 24) & 1u;
  if (emu_mapa(dst, emu_sreg_rank()) == dst) {   // addresses already carry the CTA's rank
    const uint32_t named = emu_cta_rank_of(mbar);
    if (named == (dest & ~1u) + (named & 1u)) return mbar;
    offset = mbar; odd = named & 1u;
  }
  return emu_mapa(offset, (dest & ~1u) | odd);
}

// sm_90's TMA completes its bytes only on an mbarrier in the destination's CTA; .cta_group::2 lets the pair's
// other CTA hold it (both CTAs of a 2-SM GEMM complete their boxes on the even CTA's full barrier). Such a load
// runs on a scratch mbarrier of the issuing warp: __nvfp4emu_pair_tma_begin prepares it and returns it in the low
// word, the pair's barrier in the high word (0 when the barrier is the destination CTA's own: the TMA completes on
// it as it is). After the TMA, __nvfp4emu_pair_tma_end waits for the bytes to land, then completes them on the
// pair's barrier (mbarrier.complete_tx across the cluster): that barrier's phase sees the same bytes, after the data.
static __shared__ __align__(8) unsigned long long emu_pair_scratch[32];   // one per warp (1024 threads at most)

// The issuing warp's scratch mbarrier, initialized to expect `bytes`: its shared address.
static __device__ uint32_t emu_scratch_begin(uint32_t bytes) {
  const uint32_t scratch = (uint32_t)__cvta_generic_to_shared(&emu_pair_scratch[emu_thread() / 32u]);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n\t"
               "fence.mbarrier_init.release.cluster;\n\t"
               "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(scratch), "r"(bytes) : "memory");
  return scratch;
}

extern "C" __device__ __noinline__ unsigned long long __nvfp4emu_pair_tma_begin(uint32_t mbar, uint32_t dst,
                                                                               uint32_t bytes) {
  const uint32_t target = emu_pair_barrier_for(mbar, dst, emu_sreg_rank());
  const uint32_t dst_rank = emu_cta_rank_of(dst);
  if (emu_cta_rank_of(target) == dst_rank) return target;
  if (dst_rank != emu_sreg_rank() || __popc(__activemask()) != 1) {
    emu_fail(E_PAIR_TMA, 0, dst_rank, __popc(__activemask()));
    return target;
  }
  return (unsigned long long)target << 32 | emu_scratch_begin(bytes);
}

static __device__ void emu_scratch_wait(uint32_t scratch) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(scratch) : "memory");
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(scratch) : "memory");
}

static __device__ __forceinline__ void emu_complete_tx(uint32_t cluster_barrier, uint32_t bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;"
               ::"r"(cluster_barrier), "r"(bytes) : "memory");
}

extern "C" __device__ __noinline__ void __nvfp4emu_pair_tma_end(unsigned long long began, uint32_t bytes) {
  const uint32_t pair_barrier = (uint32_t)(began >> 32), scratch = (uint32_t)began;
  if (pair_barrier == 0u) return;
  emu_scratch_wait(scratch);
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  emu_complete_tx(pair_barrier, bytes);
}

// The same with .multicast::cluster: the box lands in every CTA of `mask` at `dst`'s offset, and each destination
// completes the bytes on its pair's barrier. The TMA loads the box into the issuing CTA (which must be in the
// mask) on the scratch barrier; __nvfp4emu_pair_tma_multicast_end copies it to the other CTAs of the mask
// (16-byte stores across the cluster), then completes the bytes of every destination on its pair's barrier.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_pair_tma_multicast_begin(uint32_t dst, uint32_t bytes,
                                                                              uint32_t mask) {
  const uint32_t rank = emu_sreg_rank();
  if (!(mask >> rank & 1u) || emu_cta_rank_of(dst) != rank || __popc(__activemask()) != 1) {
    emu_fail(E_PAIR_TMA_MULTICAST, 0, mask, rank);
    return 0;
  }
  return emu_scratch_begin(bytes);
}

extern "C" __device__ __noinline__ void __nvfp4emu_pair_tma_multicast_end(uint32_t scratch, uint32_t mbar,
                                                                         uint32_t dst, uint32_t bytes, uint32_t mask) {
  if (scratch == 0u) return;
  emu_scratch_wait(scratch);
  const uint32_t rank = emu_sreg_rank();
  for (uint32_t d = 0; d < 16u; ++d) {
    if (!(mask >> d & 1u) || d == rank) continue;
    const uint32_t remote = emu_mapa(dst, d);
    for (uint32_t at = 0; at + 16u <= bytes; at += 16u) {
      const uint4 v = emu_ldc128(dst + at);
      asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(remote + at), "r"(v.x), "r"(v.y), "r"(v.z),
                   "r"(v.w) : "memory");
    }
  }
  asm volatile("fence.proxy.async;\n\tfence.acq_rel.cluster;" ::: "memory");
  for (uint32_t d = 0; d < 16u; ++d)
    if (mask >> d & 1u) emu_complete_tx(emu_pair_barrier_for(mbar, dst, d), bytes);
}

// ---- Cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel; the rewriter: ptx_sm100.rewrite_clc)
// A cancel succeeds while some cluster of the grid has not started, as on a B200, which then never launches it: a
// persistent kernel runs about one cluster per SM and those take over the other clusters' tiles (a kernel may size
// a per-cluster workspace by the SM count). Each cluster's state carries its launch's stamp (%gridid << 2) and 1
// (started) or 2 (canceled); another launch's stamp reads as not started. Every CTA of a kernel that uses CLC runs
// __nvfp4emu_clc_enter first and exits when its cluster was canceled. Clusters past EMU_CLC_CLUSTERS are never
// canceled (they run as they are).
#define EMU_CLC_CLUSTERS 16384u
extern "C" {
__device__ unsigned long long __nvfp4emu_clc_state[EMU_CLC_CLUSTERS];
__device__ unsigned long long __nvfp4emu_clc_cursor;   // the launch's low 32 bits of %gridid, then the next cluster
}
// 1 when this CTA's cluster was canceled before it started (the CTA must exit), else 0 (the cluster is started).
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_clc_enter() {
  const unsigned long long cluster = emu_cluster_linear(), stamp = emu_gridid() << 2;
  if (cluster >= EMU_CLC_CLUSTERS) return 0u;
  unsigned long long old = *(volatile unsigned long long*)&__nvfp4emu_clc_state[cluster];
  for (;;) {
    if ((old & ~3ull) == stamp) return (old & 3ull) == 2ull ? 1u : 0u;   // another CTA of the cluster, or a cancel
    const unsigned long long seen = atomicCAS(&__nvfp4emu_clc_state[cluster], old, stamp | 1ull);
    if (seen == old) return 0u;
    old = seen;
  }
}

// try_cancel: the first CTA of a cluster not yet started, which is then never run, as the response's words
// (1, x, y, z) packed: bit 63 set, x in bits 0-20, y in 21-41, z in 42-62; 0 when none is left (not canceled).
extern "C" __device__ __noinline__ unsigned long long __nvfp4emu_clc_try_cancel() {
  uint32_t nx, ny, nz, dx, dy, dz;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(nx)); asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(ny));
  asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(nz)); asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(dx));
  asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(dy)); asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(dz));
  const unsigned long long grid = emu_gridid(), stamp = grid << 2;
  const unsigned long long clusters = (unsigned long long)nx * ny * nz;
  const uint32_t total = clusters < EMU_CLC_CLUSTERS ? (uint32_t)clusters : EMU_CLC_CLUSTERS;
  const unsigned long long mine = (unsigned long long)(uint32_t)grid << 32;
  for (;;) {
    const unsigned long long cursor = *(volatile unsigned long long*)&__nvfp4emu_clc_cursor;
    const uint32_t next = (cursor & ~0xFFFFFFFFull) == mine ? (uint32_t)cursor : 0u;
    if (next >= total) return 0ull;
    if (atomicCAS(&__nvfp4emu_clc_cursor, cursor, mine | (next + 1u)) != cursor) continue;
    const unsigned long long x = (unsigned long long)(next % nx) * dx, y = (unsigned long long)(next / nx % ny) * dy,
                             z = (unsigned long long)(next / nx / ny) * dz;
    if ((x | y | z) >> 21) continue;     // past the response's packing: that cluster runs as it is
    const unsigned long long old = *(volatile unsigned long long*)&__nvfp4emu_clc_state[next];
    if ((old & ~3ull) == stamp || atomicCAS(&__nvfp4emu_clc_state[next], old, stamp | 2ull) != old) continue;
    return 1ull << 63 | x | y << 21 | z << 42;
  }
}

// ---- sm_100 conversion to FP4 (e2m1): cvt.rn.satfinite{.relu}.e2m1x2.f32 (the other direction, e2m1x2 to f16x2,
// is inline PTX: arena/blackwell/ptx_sm100.py) ----

// f32 -> e2m1, round to nearest even, saturating to +-6 (.satfinite); NaN -> +6 as the largest finite.
static __device__ uint32_t emu_e2m1_from_f32(float x, uint32_t relu) {
    if (x != x) return 0x7;
    uint32_t sign = signbit(x) ? 8 : 0;
    float a = fabsf(x);
    if (relu && sign) return 0;
    uint32_t code = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
                  : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
    return sign | code;
}

// cvt.rn.satfinite.e2m1x2.f32 d, a, b: a goes to the upper nibble, b to the lower.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_cvt_e2m1x2_f32(float a, float b, uint32_t relu) {
    return emu_e2m1_from_f32(a, relu) << 4 | emu_e2m1_from_f32(b, relu);
}


// ---- TMA on packed-FP4 maps (encoded as UINT8 by emulation_host.h): the kernel's innermost coordinate counts
// 4-bit elements, the map counts bytes. Halve it when `tmap` is one of the registered maps.
// ---- Tensor maps a kernel's host code encodes itself (CuTe DSL writes the descriptor's bits; the driver's encoder
// that emulation_host.h redirects is never called). Hopper's TMA faults on a Blackwell-only element type, so such
// a map of packed FP4 is copied to global memory as the same bytes in UINT8: element type 0, dim0 and box0
// halved (the kernel's innermost coordinate is halved by __nvfp4emu_tma_coord). The descriptor's words, as the
// driver lays them out (bench/emulation/tensormap_fields.py, measured on an H200): w2 bits 7-11 the element type
// (UINT8 0, UINT16 1, UINT32 2, INT32 3, FLOAT16 6, FLOAT32 7, BFLOAT16 10; TFLOAT32 is FLOAT32 with bit 16),
// w8 dim0 - 1, w13 bits 24-31 box0 - 1, w16 the bytes of one box (the same either way).
#define EMU_TMAP_SLOTS 64
extern "C" {
__device__ __align__(128) uint32_t __nvfp4emu_tmap_src[EMU_TMAP_SLOTS * 32];
__device__ __align__(128) uint32_t __nvfp4emu_tmap_new[EMU_TMAP_SLOTS * 32];
__device__ uint32_t __nvfp4emu_tmap_count;
__device__ int __nvfp4emu_tmap_lock;
}
static __device__ __forceinline__ uint32_t emu_tmap_type(const uint32_t* w) { return (w[2] >> 7) & 0x1Fu; }
static __device__ __forceinline__ bool emu_tmap_hopper_type(uint32_t t) { return t <= 10u; }
// Packed FP4 (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B) is type 11 in CuTe DSL's maps: the official NVFP4 GEMM,
// dual GEMM and group GEMM examples, whose A/B maps have it, pass under this retyping on an H200.
#define EMU_TMAP_PACKED_FP4 11u

static __device__ int emu_tmap_find(const uint32_t* w, uint32_t count) {
  for (uint32_t i = 0; i < count && i < EMU_TMAP_SLOTS; ++i) {
    bool same = true;
    for (uint32_t k = 0; k < 32u && same; ++k) same = ((volatile uint32_t*)__nvfp4emu_tmap_src)[32u * i + k] == w[k];
    if (same) return (int)i;
  }
  return -1;
}

// The map a TMA uses: `tmap` itself, or its UINT8 copy when its element type is not one Hopper's TMA knows.
extern "C" __device__ __noinline__ unsigned long long __nvfp4emu_tma_map(unsigned long long tmap) {
  const uint32_t* w = (const uint32_t*)tmap;
  if (emu_tmap_hopper_type(emu_tmap_type(w))) return tmap;
  int slot = emu_tmap_find(w, *(volatile uint32_t*)&__nvfp4emu_tmap_count);
  if (slot < 0) {
    while (atomicCAS(&__nvfp4emu_tmap_lock, 0, 1) != 0) __nanosleep(100);
    __threadfence();
    const uint32_t count = *(volatile uint32_t*)&__nvfp4emu_tmap_count;
    slot = emu_tmap_find(w, count);
    if (slot < 0 && count < EMU_TMAP_SLOTS) {
      slot = (int)count;
      uint32_t* src = __nvfp4emu_tmap_src + 32u * count;
      uint32_t* out = __nvfp4emu_tmap_new + 32u * count;
      for (uint32_t k = 0; k < 32u; ++k) src[k] = out[k] = w[k];
      out[2] = w[2] & ~(0x1Fu << 7);
      out[8] = (w[8] + 1u) / 2u - 1u;
      out[13] = (w[13] & 0x00FFFFFFu) | ((((w[13] >> 24) + 1u) / 2u - 1u) << 24);
      // Another Blackwell-only type (16U4_ALIGN16B, 16U6_ALIGN16B: padded in shared memory) is not this layout:
      // the copy keeps the kernel from faulting, and the error says why its results are wrong.
      if (emu_tmap_type(w) != EMU_TMAP_PACKED_FP4) emu_fail(E_TMAP_TYPE, 0, w[2], emu_tmap_type(w));
      asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
      __threadfence();
      *(volatile uint32_t*)&__nvfp4emu_tmap_count = count + 1u;
    }
    __threadfence();
    atomicExch(&__nvfp4emu_tmap_lock, 0);
    if (slot < 0) return tmap;   // more than EMU_TMAP_SLOTS such maps: the TMA faults as it would have
  }
  const uint32_t* out = __nvfp4emu_tmap_new + 32u * (uint32_t)slot;
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(out) : "memory");
  return (unsigned long long)out;
}

// The bits of one element by the descriptor's type code (word 2 bits 7-11; 0 where the code is not known here).
static __device__ __forceinline__ uint32_t emu_tmap_element_bits(uint32_t type) {
  switch (type) {
    case 0u: return 8u;                      // UINT8
    case 1u: case 6u: case 10u: return 16u;  // UINT16, FLOAT16, BFLOAT16
    case 2u: case 3u: case 7u: case 8u: return 32u;  // UINT32, INT32, FLOAT32, FLOAT32_FTZ (TFLOAT32: bit 16)
    case EMU_TMAP_PACKED_FP4: return 4u;     // 16U4_ALIGN8B: packed FP4, box0 counts 4-bit elements
    default: return 0u;
  }
}

// The bytes one TMA of this map moves. The driver's encoder writes them in word 16 (the same for the UINT8 copy of
// a packed-FP4 map); a map that CuTe DSL's host code encodes itself leaves word 16 at 0 (the TMA unit does not read
// it), and then they come from the box: rank - 1 in word 2 bits 4-6, box0 - 1 in word 13 bits 24-31, box1..box4 - 1
// a byte each of word 14, element stride 0 - 1 in word 13 bits 0-2 (bench/emulation/tensormap_fields.py, measured on
// an H200). 0 when the element type's size is not known here.
static __device__ uint32_t emu_tma_box_bytes(const uint32_t* w) {
  if (w[16] != 0u) return w[16];
  const uint32_t rank = ((w[2] >> 4) & 7u) + 1u, bits = emu_tmap_element_bits(emu_tmap_type(w));
  if (bits == 0u) return 0u;
  const uint32_t stride0 = (w[13] & 7u) + 1u;
  uint32_t elements = ((w[13] >> 24) + stride0) / stride0;
  for (uint32_t i = 1; i < rank && i < 5u; ++i) elements *= ((w[14] >> (8u * (i - 1u))) & 0xFFu) + 1u;
  return elements * bits / 8u;
}

// The bytes a pair TMA forwards (ptx_rewrite._rewrite_pair_bulk): 0 would complete the pair's barrier short, a hang,
// so an unknown size is an error naming the type.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_tma_box_bytes(unsigned long long tmap) {
  const uint32_t* w = (const uint32_t*)tmap;
  const uint32_t bytes = emu_tma_box_bytes(w);
  if (bytes == 0u) emu_fail(E_TMA_BOX_BYTES, 0, w[2], emu_tmap_type(w));
  return bytes;
}

// `load`: 1 for a load into shared memory (counted, with the box's bytes), 0 for a store, reduction or prefetch.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_tma_coord(unsigned long long tmap, uint32_t c0, uint32_t load) {
  if (load) {
    emu_count(EMU_COUNT_TMA_LOADS, 1u);
    emu_count(EMU_COUNT_TMA_BYTES16, emu_tma_box_bytes((const uint32_t*)tmap) / 16u);
  }
  if (!emu_tmap_hopper_type(emu_tmap_type((const uint32_t*)tmap))) return (uint32_t)((int32_t)c0 >> 1);
  const uint32_t n = *(volatile uint32_t*)&__nvfp4emu_state[16];
  const unsigned long long* map = (const unsigned long long*)tmap;
  const unsigned long long first = map[0];
  for (uint32_t i = 0; i < n && i < 64u; ++i) {
    const unsigned long long* known = (const unsigned long long*)&__nvfp4emu_state[32 + 32 * i];
    if (known[0] != first) continue;
    bool same = true;
    for (int w = 1; w < 16 && same; ++w) same = known[w] == map[w];
    if (same) return (uint32_t)((int32_t)c0 >> 1);
  }
  return c0;
}

// ---- sm_100 conversions with UE8M0 (power-of-two scale factor) operands: cvt.{rz,rp}{.satfinite}.ue8m0x2.f32,
// cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2 and cvt.rn.bf16x2.ue8m0x2 (what CUTLASS's SM100 block-scaled epilogues
// emit when they generate output scale factors). PTX ISA, "Alternate Floating Point Data Formats": ue8m0 is an
// 8-bit exponent with no mantissa and no sign, bias 127; no infinity; 0xff is its only NaN (so 0x00 is 2^-127,
// and there is no zero). "cvt", Floating Point Notes: .rz rounds toward zero, .rp toward +infinity; .satfinite:
// a NaN input gives NaN, and an input whose absolute value (ignoring sign) exceeds MAX_NORM gives positive
// MAX_NORM (0xfe = 2^127) "in .ue8m0x2 for which the destination sign is not supported". Without .satfinite an
// overflow (infinity, or a value rounded up past 2^127) has nowhere to go but the NaN 0xff. The ISA text does not
// say what a negative input or one below 2^-127 gives: here, as in cuda_fp8.h's host conversion
// (__nv_cvt_float_to_e8m0, __nv_cvt_bfloat16raw_to_e8m0, NVIDIA's software version of these instructions), the
// sign is ignored and every magnitude up to 2^-127 (zero included) gives 0x00; tests/test_tcgen05_isa_rules.py
// compares the two bit for bit on the CPU.

// One f32 (bits; a bf16 is its bits << 16) -> ue8m0. round_up: .rp (else .rz); satfinite: .satfinite.
static __host__ __device__ __forceinline__ uint32_t emu_ue8m0_from_f32_bits(uint32_t bits, uint32_t round_up,
                                                                           uint32_t satfinite) {
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0xFFu;                         // NaN -> NaN, with or without .satfinite
  uint32_t e = mag >> 23;                                      // .rz: the power of two at or below |x|
  if (round_up && (mag & 0x7FFFFFu) && mag > 0x00400000u && mag < 0x7F800000u) e += 1;   // above 2^-127, inexact
  if (e == 0xFFu && satfinite) e = 0xFEu;                      // infinity, or past 2^127: MAX_NORM
  return e;
}

// One ue8m0 -> bf16: 2^(e - 127); 0x00 is 2^-127 (the bf16 subnormal 0x0040), 0xff the canonical NaN 0x7fff.
static __host__ __device__ __forceinline__ uint32_t emu_bf16_from_ue8m0(uint32_t e) {
  e &= 0xFFu;
  return e == 0xFFu ? 0x7FFFu : e == 0u ? 0x0040u : e << 7;
}

// cvt.{rz,rp}{.satfinite}.ue8m0x2.f32 d, a, b: a to d[15:8], b to d[7:0]. mode: bit 0 .rp, bit 1 .satfinite.
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_cvt_ue8m0x2_f32(float a, float b, uint32_t mode) {
  return emu_ue8m0_from_f32_bits(__float_as_uint(a), mode & 1u, mode & 2u) << 8
       | emu_ue8m0_from_f32_bits(__float_as_uint(b), mode & 1u, mode & 2u);
}

// cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2 d, a: a[31:16] to d[15:8], a[15:0] to d[7:0].
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_cvt_ue8m0x2_bf16x2(uint32_t pair, uint32_t mode) {
  return emu_ue8m0_from_f32_bits(pair & 0xFFFF0000u, mode & 1u, mode & 2u) << 8
       | emu_ue8m0_from_f32_bits(pair << 16, mode & 1u, mode & 2u);
}

// cvt.rn.bf16x2.ue8m0x2 d, a: a[15:8] to d[31:16], a[7:0] to d[15:0] (exact: every ue8m0 is a bf16).
extern "C" __device__ __noinline__ uint32_t __nvfp4emu_cvt_bf16x2_ue8m0x2(uint32_t pair) {
  return emu_bf16_from_ue8m0(pair >> 8) << 16 | emu_bf16_from_ue8m0(pair);
}

// Chunk c of the MMA shared on queue q: column c of a single-CTA MMA; of a pair MMA, column c % N of half c / N.
static __device__ void emu_share_chunk(const EmuOp& op, int q, uint32_t chunk) {
  if (op.verb != OP_MMA2) { emu_mma_columns(op, chunk, chunk + 1u); return; }
  EmuMma m;
  emu_idesc2(op.kind, op.idesc, op.vec, m);
  EmuPair p;
  const volatile uint32_t* from = (const volatile uint32_t*)&__nvfp4emu_share_pair[q];
  uint32_t* to = (uint32_t*)&p;
  for (uint32_t i = 0; i < sizeof(EmuPair) / 4u; ++i) to[i] = from[i];
  emu_mma2_columns(op, p, chunk / m.N, chunk % m.N, chunk % m.N + 1u);
}
