// The write chain (one thread, 8192 dependent mix3 steps, SPEC-CANARY §2) in several formulations, to find
// why GPU-FLOORS.md's tools/chain_floor.cu runs at 74.5 ns per step where the project's chain kernels ran
// at ~100 (docs/perf-notes.md, "The chain floor"):
// * the seed by value (a kernel argument: ptxas proves the whole chain warp-uniform and runs it on the
//   uniform datapath, UIMAD/USHF/ULOP3) or loaded from memory (as every write's chain is: the vector
//   datapath, IMAD/SHF/LOP3);
// * four formulations of the 64-bit multiply: M0 plain `x * c` (IMAD + IMAD.WIDE.U32 + IMAD + IADD), M3
//   mulhi + cross products (IMAD.HI + 3 IMAD, no IMAD.WIDE), M4 PTX mad.hi (IMAD, IMAD, IMAD.WIDE with
//   addend), M5 PTX add.cc (IMAD, IMAD.WIDE, IMAD);
// * b and c from the loop counter, as chain_floor.cu.
// 20 launches per CUDA graph, median of 15 replays; every result checked against the host's chain.
//   nvcc -O3 -arch=sm_90 chain_formulations.cu -o chain_formulations && ./chain_formulations
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      printf("CUDA %s line %d\n", cudaGetErrorString(e_), __LINE__);            \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

constexpr uint64_t kC1 = 0xBF58476D1CE4E5B9ull, kC2 = 0x94D049BB133111EBull;

struct M0 {
  static __host__ __device__ __forceinline__ uint64_t mul(uint64_t x, uint64_t c) { return x * c; }
};
struct M3 {
  static __device__ __forceinline__ uint64_t mul(uint64_t x, uint64_t c) {
    const uint32_t lo = (uint32_t)x, hi = (uint32_t)(x >> 32), cl = (uint32_t)c, ch = (uint32_t)(c >> 32);
    const uint32_t h = __umulhi(lo, cl) + (hi * cl + lo * ch);
    return ((uint64_t)h << 32) | (uint32_t)(lo * cl);
  }
};
struct M4 {
  static __device__ __forceinline__ uint64_t mul(uint64_t x, uint64_t c) {
    const uint32_t lo = (uint32_t)x, hi = (uint32_t)(x >> 32), cl = (uint32_t)c, ch = (uint32_t)(c >> 32);
    uint32_t h, l;
    asm("{.reg .u32 t1, t2;\n\tmul.lo.u32 t1, %2, %4;\n\tmul.lo.u32 t2, %3, %5;\n\tadd.u32 t1, t1, t2;\n\t"
        "mad.hi.u32 %0, %3, %4, t1;\n\tmul.lo.u32 %1, %3, %4;}"
        : "=r"(h), "=r"(l) : "r"(hi), "r"(lo), "r"(cl), "r"(ch));
    return ((uint64_t)h << 32) | l;
  }
};
struct M5 {
  static __device__ __forceinline__ uint64_t mul(uint64_t x, uint64_t c) {
    const uint32_t lo = (uint32_t)x, hi = (uint32_t)(x >> 32), cl = (uint32_t)c, ch = (uint32_t)(c >> 32);
    uint32_t h, l;
    asm("{.reg .u32 t1, t2, w;\n\tmul.lo.u32 t1, %2, %4;\n\tmul.lo.u32 t2, %3, %5;\n\tmul.hi.u32 w, %3, %4;\n\t"
        "mul.lo.u32 %1, %3, %4;\n\tadd.u32 w, w, t1;\n\tadd.u32 %0, w, t2;}"
        : "=r"(h), "=r"(l) : "r"(hi), "r"(lo), "r"(cl), "r"(ch));
    return ((uint64_t)h << 32) | l;
  }
};

template <class M>
__host__ __device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x = M::mul(x ^ (x >> 30), kC1);
  x = M::mul(x ^ (x >> 27), kC2);
  return x ^ (x >> 31);
}
template <class M>
__host__ __device__ __forceinline__ uint64_t mix3(uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64<M>(splitmix64<M>(splitmix64<M>(a) ^ b) ^ c);
}

template <class M>
__global__ void chain_by_value(uint64_t seed, int32_t steps, uint64_t* out) {
  uint64_t h = seed;
  for (int32_t i = 0; i < steps; ++i) h = mix3<M>(h, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1);
  *out = h;
}
template <class M>
__global__ void chain_from_memory(const uint64_t* seed, int32_t steps, uint64_t* out) {
  uint64_t h = *seed;
  for (int32_t i = 0; i < steps; ++i) h = mix3<M>(h, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1);
  *out = h;
}

template <class Launch>
void time_variant(const char* name, cudaStream_t s, int steps, int reps, uint64_t* out, uint64_t want, Launch launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; ++i) launch();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaMemset(out, 0, sizeof(uint64_t)));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> us;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.f / 20.f);
  }
  CK(cudaGetLastError());
  std::sort(us.begin(), us.end());
  uint64_t got = 0;
  CK(cudaMemcpy(&got, out, sizeof(got), cudaMemcpyDeviceToHost));
  const float med = us[us.size() / 2];
  printf("{\"variant\": \"%s\", \"steps\": %d, \"us_per_call_median\": %.3f, \"ns_per_step\": %.2f, \"min_ns\": %.2f, "
         "\"max_ns\": %.2f, \"result_ok\": %s}\n",
         name, steps, med, med * 1000.f / steps, us.front() * 1000.f / steps, us.back() * 1000.f / steps,
         got == want ? "true" : "false");
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 8192, reps = argc > 2 ? atoi(argv[2]) : 15;
  const uint64_t seed = 0x0123456789ABCDEFULL;
  uint64_t want = seed;
  for (int i = 0; i < steps; ++i) want = mix3<M0>(want, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1);
  uint64_t *out, *seed_mem;
  CK(cudaMalloc(&out, sizeof(uint64_t)));
  CK(cudaMalloc(&seed_mem, sizeof(uint64_t)));
  CK(cudaMemcpy(seed_mem, &seed, sizeof(seed), cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
#define VARIANTS(M)                                                                                               \
  time_variant(#M " seed by value", s, steps, reps, out, want, [&] { chain_by_value<M><<<1, 1, 0, s>>>(seed, steps, out); }); \
  time_variant(#M " seed in memory", s, steps, reps, out, want,                                                  \
               [&] { chain_from_memory<M><<<1, 1, 0, s>>>(seed_mem, steps, out); });
  VARIANTS(M0)
  VARIANTS(M3)
  VARIANTS(M4)
  VARIANTS(M5)
  VARIANTS(M0)  // again: the spread between two runs of one variant
  return 0;
}
