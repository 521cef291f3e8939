// How close can a prefill write come to its serial chain? On one H200: (1) the chain floor written
// several ways (the perf suite's loop, unrolled, with b and c loaded from memory), (2) a warp per
// request that walks each 32-token chunk with the tokens in registers (shuffles), unrolled, against the
// same chain; checked against a host walk of the chain.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o write_chain docs/perf/experiments/write_chain.cu && ./write_chain
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#define CHECK(x)                                                 \
  do {                                                           \
    cudaError_t err_ = (x);                                       \
    if (err_ != cudaSuccess) {                                   \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(err_)); \
      std::exit(1);                                              \
    }                                                            \
  } while (0)

using u64 = unsigned long long;
using i64 = long long;

__host__ __device__ __forceinline__ u64 sm64(u64 x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
__host__ __device__ __forceinline__ u64 mix3(u64 a, u64 b, u64 c) { return sm64(sm64(sm64(a) ^ b) ^ c); }

// The same splitmix64 with the 64-bit multiply spelled in 32-bit halves, so that the three partial
// products are independent (M = 1: hi = (a + b) + p_hi; M = 2: mul.hi/mul.lo instead of mul.wide).
template <int M>
__device__ __forceinline__ u64 mulc(u64 x, u64 k) {
  if (M == 0) return x * k;
  const unsigned lo = (unsigned)x, hi = (unsigned)(x >> 32), klo = (unsigned)k, khi = (unsigned)(k >> 32);
  const unsigned a = hi * klo, b = lo * khi;
  if (M == 1) {
    const u64 p = (u64)lo * klo;
    return ((u64)((unsigned)(p >> 32) + (a + b)) << 32) | (unsigned)p;
  }
  const unsigned plo = lo * klo, phi = __umulhi(lo, klo);
  return ((u64)(phi + (a + b)) << 32) | plo;
}
template <int M>
__device__ __forceinline__ u64 sm64m(u64 x) {
  x ^= x >> 30;
  x = mulc<M>(x, 0xBF58476D1CE4E5B9ull);
  x ^= x >> 27;
  x = mulc<M>(x, 0x94D049BB133111EBull);
  x ^= x >> 31;
  return x;
}
template <int M>
__device__ __forceinline__ u64 mix3m(u64 a, u64 b, u64 c) { return sm64m<M>(sm64m<M>(sm64m<M>(a) ^ b) ^ c); }

// ---- chain floors ----
__global__ void floor_loop(u64* r, i64 steps) {  // perf_support.hpp's ChainFunctor
  u64 h = *r;
  for (i64 k = 0; k < steps; ++k) h = mix3(h, (u64)k, (u64)k + 4096u);
  *r = h;
}
__global__ void floor_unroll8(u64* r, i64 steps) {
  u64 h = *r;
#pragma unroll 8
  for (i64 k = 0; k < steps; ++k) h = mix3(h, (u64)k, (u64)k + 4096u);
  *r = h;
}
__global__ void floor_u32(u64* r, int steps) {
  u64 h = *r;
#pragma unroll 32
  for (int k = 0; k < steps; ++k) h = mix3(h, (u64)k, (u64)k + 4096u);
  *r = h;
}
template <int M>
__global__ void floor_m(u64* r, int steps) {
  u64 h = *r;
#pragma unroll 32
  for (int k = 0; k < steps; ++k) h = mix3m<M>(h, (u64)k, (u64)k + 4096u);
  *r = h;
}
__global__ void floor_loaded(u64* r, const i64* tok, const i64* pos, i64 steps) {
  u64 h = *r;
#pragma unroll 8
  for (i64 k = 0; k < steps; ++k) h = mix3(h, (u64)tok[k], (u64)pos[k]);
  *r = h;
}

// ---- the write walk, a warp per request ----
struct Args {
  const i64 *offsets, *seeds, *ids, *pos, *loc, *exp_ids, *exp_pos;
  i64* rec;  // [slots][4]: token, position, prev_hash, real_kv_hash
  i64 slots, requests, num_tokens;
  i64* ring_count;
  int position_assert_on;
};

// kWalk 0: tokens of step j shuffled from lane j in the walk; 2: staged in shared memory, one
// 16-byte broadcast load per token; 3: all 32 tokens shuffled into registers before the walk. kWalk 2
// and 3 take a chunk whose 32 tokens are all valid without the select on the chain.
// kCut (where the time beyond the chain goes): 1 drops the duplicate-slot match, 2 also the checks and
// stores (what is left: the loads, the staging and the walk).
template <int kWalk, int M, int kCut = 0>
__global__ void write_warp(Args a) {
  __shared__ ulonglong2 stage[4][32];  // blocks of at most 128 threads
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
  const i64 warps = (gridDim.x * (i64)blockDim.x) >> 5;
  for (i64 r = warp; r < a.requests; r += warps) {
    const i64 begin = a.offsets[r], end = a.offsets[r + 1], seed = a.seeds[r];
    const i64 stop = end < a.num_tokens ? end : a.num_tokens;
    u64 running = 0xDE7FAE23A9A1B716ull, prev_pos = 0;
    bool passert = false;
    if (seed >= 0 && seed < a.slots) {
      running = mix3m<M>((u64)a.rec[seed * 4 + 2], (u64)a.rec[seed * 4 + 0], (u64)a.rec[seed * 4 + 1]);
      prev_pos = (u64)a.rec[seed * 4 + 1];
      passert = a.position_assert_on != 0;
    }
    __syncwarp();
    i64 i = begin + lane;
    i64 slot = i < stop ? a.loc[i] : -1, tok = i < stop ? a.ids[i] : 0, posn = i < stop ? a.pos[i] : 0;
    i64 etok = i < stop ? a.exp_ids[i] : 0, epos = i < stop ? a.exp_pos[i] : 0;
    for (i64 base = begin; base < stop; base += 32) {
      const i64 ni = base + 32 + lane;
      const i64 nslot = ni < stop ? a.loc[ni] : -1, ntok = ni < stop ? a.ids[ni] : 0, npos = ni < stop ? a.pos[ni] : 0;
      const i64 netok = ni < stop ? a.exp_ids[ni] : 0, nepos = ni < stop ? a.exp_pos[ni] : 0;
      const bool valid = slot >= 0 && slot < a.slots;
      const unsigned vmask = __ballot_sync(0xffffffffu, valid);
      u64 before = running, before_pos = prev_pos;
      if (kWalk == 0) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const u64 b = (u64)__shfl_sync(0xffffffffu, tok, j), c = (u64)__shfl_sync(0xffffffffu, posn, j);
          if (j == lane) { before = running; before_pos = prev_pos; }
          const u64 h = mix3m<M>(running, b, c);
          const bool v = (vmask >> j) & 1u;
          running = v ? h : running;
          prev_pos = v ? c : prev_pos;
        }
      } else {
        u64 bs[32], cs[32];
        if (kWalk == 2) {
          stage[wib][lane] = make_ulonglong2((u64)tok, (u64)posn);
          __syncwarp();
        } else {
#pragma unroll
          for (int j = 0; j < 32; ++j) {
            bs[j] = (u64)__shfl_sync(0xffffffffu, tok, j);
            cs[j] = (u64)__shfl_sync(0xffffffffu, posn, j);
          }
        }
        const auto walk = [&](auto all_valid) {
#pragma unroll
          for (int j = 0; j < 32; ++j) {
            u64 b, c;
            if (kWalk == 2) {
              const ulonglong2 t = stage[wib][j];
              b = t.x; c = t.y;
            } else {
              b = bs[j]; c = cs[j];
            }
            if (j == lane) { before = running; before_pos = prev_pos; }
            const u64 h = mix3m<M>(running, b, c);
            if (decltype(all_valid)::value) {
              running = h;
              prev_pos = c;
            } else {
              const bool v = (vmask >> j) & 1u;
              running = v ? h : running;
              prev_pos = v ? c : prev_pos;
            }
          }
        };
        if (vmask == 0xffffffffu) walk(std::true_type{});
        else walk(std::false_type{});
        if (kWalk == 2) __syncwarp();  // the stage is rewritten by the next chunk
      }
      const unsigned same = kCut >= 1 ? 0u : __match_any_sync(0xffffffffu, slot);
      const unsigned later = lane == 31 ? 0u : (0xffffffffu << (lane + 1));
      const bool overwritten = (same & vmask & later) != 0u;
      if (kCut >= 2) {
        if (before == 42u) a.rec[0] = (i64)before_pos;  // keeps the walk alive
      } else if (valid) {
        bool bad = etok != tok || epos != posn;
        if (passert && (u64)posn != before_pos + 1u) bad = true;
        if (bad) atomicAdd((u64*)a.ring_count, 1ull);
        if (!overwritten) {
          a.rec[slot * 4 + 0] = tok;
          a.rec[slot * 4 + 1] = posn;
          a.rec[slot * 4 + 2] = (i64)before;
          a.rec[slot * 4 + 3] = 0;
        }
      }
      slot = nslot; tok = ntok; posn = npos; etok = netok; epos = nepos;
      __syncwarp();
    }
  }
}

template <class Launch>
float median_us(Launch&& launch, int reps = 11) {
  cudaEvent_t s, e;
  CHECK(cudaEventCreate(&s));
  CHECK(cudaEventCreate(&e));
  std::vector<float> t;
  for (int k = 0; k < reps + 2; ++k) {
    CHECK(cudaEventRecord(s));
    launch();
    CHECK(cudaEventRecord(e));
    CHECK(cudaEventSynchronize(e));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, s, e));
    if (k >= 2) t.push_back(1000.f * ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  CHECK(cudaMalloc(&p, std::max<size_t>(1, v.size()) * sizeof(T)));
  CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

int main() {
  u64* r;
  CHECK(cudaMalloc(&r, 8));
  CHECK(cudaMemset(r, 0, 8));
  const i64 S = 8192;
  std::vector<i64> tk(2 * S), ps(2 * S);
  for (i64 k = 0; k < 2 * S; ++k) { tk[k] = 1000 + 7 * k; ps[k] = k; }
  i64 *dtk = to_device(tk), *dps = to_device(ps);
  const auto ns = [&](auto one, auto two) { return 1e3 * (median_us(two) - median_us(one)) / S; };
  std::printf("chain floor, ns per mix3 step (time(2S) - time(S)) / S, S = %lld:\n", S);
  std::printf("  loop (perf suite)   %.2f\n", ns([&] { floor_loop<<<1, 1>>>(r, S); }, [&] { floor_loop<<<1, 1>>>(r, 2 * S); }));
  std::printf("  unroll 8            %.2f\n", ns([&] { floor_unroll8<<<1, 1>>>(r, S); }, [&] { floor_unroll8<<<1, 1>>>(r, 2 * S); }));
  std::printf("  int, unroll 32      %.2f\n", ns([&] { floor_u32<<<1, 1>>>(r, (int)S); }, [&] { floor_u32<<<1, 1>>>(r, (int)(2 * S)); }));
  std::printf("  M1 split multiply   %.2f\n", ns([&] { floor_m<1><<<1, 1>>>(r, (int)S); }, [&] { floor_m<1><<<1, 1>>>(r, (int)(2 * S)); }));
  std::printf("  M2 mul.hi/mul.lo    %.2f\n", ns([&] { floor_m<2><<<1, 1>>>(r, (int)S); }, [&] { floor_m<2><<<1, 1>>>(r, (int)(2 * S)); }));
  std::printf("  loaded b, c, unr 8  %.2f\n", ns([&] { floor_loaded<<<1, 1>>>(r, dtk, dps, S); }, [&] { floor_loaded<<<1, 1>>>(r, dtk, dps, 2 * S); }));

  // Write: R requests of L tokens, distinct random slots, seed -1 (first chunk) or a seed (next chunk).
  std::mt19937_64 rng(7);
  for (const auto shape : {std::pair<i64, i64>{1, 8192}, std::pair<i64, i64>{32, 2048}, std::pair<i64, i64>{4096, 1}}) {
    const i64 R = shape.first, L = shape.second, T = R * L, slots = 4 * T + 64;
    std::vector<i64> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<i64> off(R + 1), seeds(R), ids(T), pos(T), loc(T);
    for (i64 q = 0; q <= R; ++q) off[q] = q * L;
    for (i64 q = 0; q < R; ++q) seeds[q] = perm[T + q];
    for (i64 t = 0; t < T; ++t) { ids[t] = (i64)(rng() % 150000); pos[t] = 100 + t % L; loc[t] = perm[t]; }
    std::vector<i64> rec(slots * 4, 0);
    for (i64 q = 0; q < R; ++q) { rec[seeds[q] * 4 + 0] = 5; rec[seeds[q] * 4 + 1] = 99; rec[seeds[q] * 4 + 2] = 11; }
    Args a{};
    a.offsets = to_device(off); a.seeds = to_device(seeds); a.ids = to_device(ids); a.pos = to_device(pos);
    a.loc = to_device(loc); a.exp_ids = a.ids; a.exp_pos = a.pos; a.rec = to_device(rec);
    a.slots = slots; a.requests = R; a.num_tokens = T; a.position_assert_on = 1;
    CHECK(cudaMalloc(&a.ring_count, 8));
    CHECK(cudaMemset(a.ring_count, 0, 8));
    // host walk
    std::vector<i64> want(T);
    for (i64 q = 0; q < R; ++q) {
      u64 h = mix3((u64)rec[seeds[q] * 4 + 2], 5, 99);
      for (i64 t = off[q]; t < off[q + 1]; ++t) { want[t] = (i64)h; h = mix3(h, (u64)ids[t], (u64)pos[t]); }
    }
    struct Variant { const char* name; void (*kernel)(Args); int threads; };
    const Variant variants[] = {
        {"shfl in walk, M0, 128 thr", write_warp<0, 0>, 128}, {"shfl in walk, M0, 32 thr", write_warp<0, 0>, 32},
        {"smem, M0, 32 thr", write_warp<2, 0>, 32},            {"smem, M1, 32 thr", write_warp<2, 1>, 32},
        {"smem, M2, 32 thr", write_warp<2, 2>, 32},            {"shfl first, M0, 32 thr", write_warp<3, 0>, 32},
        {"shfl first, M1, 32 thr", write_warp<3, 1>, 32},      {"smem, M1, 128 thr", write_warp<2, 1>, 128},
        {"smem, M0, 32, no match", write_warp<2, 0, 1>, 32},  {"smem, M0, 32, no stores", write_warp<2, 0, 2>, 32},
    };
    for (const Variant& v : variants) {
      const int blocks = (int)std::min<i64>((R * 32 + v.threads - 1) / v.threads, 132 * 64);
      CHECK(cudaMemcpy(a.rec, rec.data(), rec.size() * 8, cudaMemcpyHostToDevice));
      const float us = median_us([&] { v.kernel<<<blocks, v.threads>>>(a); });
      CHECK(cudaDeviceSynchronize());
      std::vector<i64> got(slots * 4);
      CHECK(cudaMemcpy(got.data(), a.rec, got.size() * 8, cudaMemcpyDeviceToHost));
      i64 wrong = 0;
      for (i64 t = 0; t < T; ++t) wrong += got[loc[t] * 4 + 2] != want[t];
      i64 rows = 0;
      CHECK(cudaMemcpy(&rows, a.ring_count, 8, cudaMemcpyDeviceToHost));
      std::printf("write %4lld x %4lld, %-24s %8.2f us (%7.2f ns per token of a request), wrong %lld, rows %lld\n", R, L,
                  v.name, us, 1e3 * us / L, wrong, rows);
    }
  }
  return 0;
}
