#ifndef KVCANARY_IMPL_WRITE_CUDA_HPP
#define KVCANARY_IMPL_WRITE_CUDA_HPP

// The CUDA write path (CanaryAlgorithm::Cuda, the default on Kokkos::Cuda): the portable kernel's
// algorithm (write_portable.hpp: a request's tokens in chunks of 32, every lane walks the chunk's chain
// and keeps the state before its own token, then all lanes check and store) as a raw kernel with a warp
// per request, where warp intrinsics say what a Kokkos team cannot:
// * the chunk's tokens are staged in shared memory (one store a lane) and a chunk of 32 stored tokens is
//   walked fully unrolled with no select on the chain, so the compiler keeps the broadcast loads and the
//   bookkeeping in the chain's stalls (the chain, three dependent splitmix64 a token, is a prefill
//   write's floor);
// * a ballot gives the chunk's stored tokens, __match_any_sync the later tokens of the chunk with the same
//   slot (the in-order outcome of SPEC-CANARY §4 for a slot written twice);
// * up to as many requests as SMs, a block is one warp (each request gets an SM of its own: measured
//   9% faster on 32 prefill requests than 4 warps a block); more requests, 4 warps a block, and the
//   tokens stored are added to the run counter once per block, not once per request.
// * several buffers in one call (the K and V halves): one walk per group of buffers whose seeds agree,
//   a store per buffer.
// Same results as the portable path, row for row (the differential tests run both).

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA

#include <kvcanary/impl/backend.hpp>
#include <kvcanary/impl/cuda_queries.hpp>
#include <kvcanary/impl/per_device.hpp>
#include <kvcanary/impl/write_portable.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace kvcanary {
namespace Impl {

namespace CudaWrite {

constexpr int kLanes = 32;
constexpr int kMaxWarps = 4;  // requests a block writes at once: 1 or kMaxWarps (blockDim.x / 32)
constexpr int kMaxThreads = kLanes * kMaxWarps;
constexpr unsigned kAllLanes = 0xffffffffu;

// A token as the chain reads it: one 16-byte shared-memory load per token of the walk.
struct alignas(16) ChainInput {
  std::int64_t token, position;
};

// How the walk computes record_hash (SPEC-CANARY §2; the same 64 bits either way). The chain runs on the
// vector datapath, where its dependent 64-bit multiplies set the pace (docs/perf-notes.md, "The chain
// floor"):
// * PlainMultiply: `x * c` in C++ (IMAD, IMAD.WIDE.U32, IMAD, IADD on the chain);
// * SplitMultiply (the default): the high word as mul.hi(lo, c_lo) + hi * c_lo + lo * c_hi in PTX, which
//   ptxas schedules as IMAD, IMAD.WIDE.U32 with the first product as its addend, IMAD: 97.6 ns per mix3
//   step against 101.1 for one thread's chain on the H200 (docs/perf/h26/chain_formulations.h200.txt).
struct PlainMultiply {
  static __device__ __forceinline__ std::int64_t record_hash(std::int64_t prev, std::int64_t token, std::int64_t position) {
    return Impl::record_hash(prev, token, position);
  }
};

struct SplitMultiply {
  static __device__ __forceinline__ std::uint64_t multiply(std::uint64_t x, std::uint64_t c) {
    const auto lo = static_cast<std::uint32_t>(x), hi = static_cast<std::uint32_t>(x >> 32);
    const auto c_lo = static_cast<std::uint32_t>(c), c_hi = static_cast<std::uint32_t>(c >> 32);
    std::uint32_t high, low;
    asm("{.reg .u32 t1, t2, w;\n\t"
        "mul.lo.u32 t1, %2, %4;\n\t"
        "mul.lo.u32 t2, %3, %5;\n\t"
        "mul.hi.u32 w, %3, %4;\n\t"
        "mul.lo.u32 %1, %3, %4;\n\t"
        "add.u32 w, w, t1;\n\t"
        "add.u32 %0, w, t2;}"
        : "=r"(high), "=r"(low)
        : "r"(hi), "r"(lo), "r"(c_lo), "r"(c_hi));
    return (static_cast<std::uint64_t>(high) << 32) | low;
  }
  static __device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
    x = multiply(x ^ (x >> 30), 0xBF58476D1CE4E5B9ull);
    x = multiply(x ^ (x >> 27), 0x94D049BB133111EBull);
    return x ^ (x >> 31);
  }
  static __device__ __forceinline__ std::int64_t record_hash(std::int64_t prev, std::int64_t token, std::int64_t position) {
    return as_int64(splitmix64(splitmix64(splitmix64(as_uint64(prev)) ^ as_uint64(token)) ^ as_uint64(position)));
  }
};

// The chain over one chunk. Every lane runs it; `before` gets the state before token `lane`.
// kAllStored: the chunk holds 32 tokens and all are stored (the prefill case), so no select is needed.
// kMasked: every link XOR `mask` (SPEC-CANARY §11.7), a request with an identity; without one the walk is
// the original's instruction for instruction.
template <bool kAllStored, bool kMasked, class Hash>
__device__ __forceinline__ void walk_chunk(const ChainInput* stage, unsigned stored_mask, int count, int lane,
                                           std::int64_t mask, ChainState& chain, ChainState& before) {
  if (kAllStored) {
#pragma unroll
    for (int j = 0; j < kLanes; ++j) {
      const ChainInput t = stage[j];
      if (j == lane) before = chain;
      chain.running = Hash::record_hash(chain.running, t.token, t.position);
      if constexpr (kMasked) chain.running ^= mask;
      chain.prev_position = as_uint64(t.position);
    }
  } else {
    for (int j = 0; j < count; ++j) {
      const ChainInput t = stage[j];
      if (j == lane) before = chain;
      if ((stored_mask >> j) & 1u) {
        chain.running = Hash::record_hash(chain.running, t.token, t.position);
        if constexpr (kMasked) chain.running ^= mask;
        chain.prev_position = as_uint64(t.position);
      }
    }
  }
  chain.stored += __popc(stored_mask);
}

// write_request of WriteFunctor (write_portable.hpp) for a warp: the same reads, rows and stores, in
// every target; a target that shares its leader's walk (TargetChains) takes the leader's states. The
// loops over targets run to the functor's constant kTargets, unrolled, the states in registers.
template <class Hash, class Functor>
__device__ std::int64_t write_request(const Functor& f, ChainInput* stage, int lane, const WriteRequest& q) {
  if (q.begin >= q.end) return 0;  // nothing at all, seed included
  const std::int64_t begin = q.begin, stop = f.stop(q);
  // begin < stop <= num_tokens: begin + lane cannot overflow, whatever the offsets hold.
  WriteToken mine = begin >= 0 && begin < stop ? f.own_token(begin + lane, stop) : WriteToken{};
  auto c = f.start_targets(q, lane);
  constexpr int kTargets = Functor::kTargetCount;
  // Every lane has read the seeds before any lane stores (a request whose seed is one of its targets).
  __syncwarp();
  if (begin < 0) {
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < kTargets; ++t)
        if (t < f.target_count()) f.push_outside_tokens(t, begin, c.chain[t].running);
    return 0;
  }
  for (std::int64_t base = begin; base < stop; base += kLanes) {
    const int count = stop - base < kLanes ? static_cast<int>(stop - base) : kLanes;
    // The next chunk's own token, loaded now and used after this chunk's chain.
    const WriteToken next = f.own_token(base + kLanes + lane, stop);
    // The lanes with my slot, asked before the walk so that the match's latency hides behind it.
    const unsigned same_slot = __match_any_sync(kAllLanes, mine.slot);
    stage[lane] = ChainInput{mine.token, mine.position};
    __syncwarp();
    ChainState before[kTargets];
    unsigned stored_mask[kTargets];
#pragma unroll
    for (int t = 0; t < kTargets; ++t) {
      if (t >= f.target_count()) continue;
      if (c.leader[t] != t) {  // walked already, by an earlier target
#pragma unroll
        for (int u = 0; u < t; ++u)
          if (c.leader[t] == u) {
            before[t] = before[u];
            c.chain[t] = c.chain[u];
            stored_mask[t] = stored_mask[u];
          }
        continue;
      }
      const std::int64_t n = f.targets[t].buffer.num_slots;
      stored_mask[t] = __ballot_sync(kAllLanes, lane < count && mine.slot >= 0 && mine.slot < n);
      before[t] = c.chain[t];
      // Uniform branches (a warp is one request): the mask's walk only for a request with an identity.
      if (q.mask != 0) {
        if (stored_mask[t] == kAllLanes)
          walk_chunk<true, true, Hash>(stage, stored_mask[t], count, lane, q.mask, c.chain[t], before[t]);
        else
          walk_chunk<false, true, Hash>(stage, stored_mask[t], count, lane, q.mask, c.chain[t], before[t]);
      } else if (stored_mask[t] == kAllLanes) {
        walk_chunk<true, false, Hash>(stage, stored_mask[t], count, lane, 0, c.chain[t], before[t]);
      } else {
        walk_chunk<false, false, Hash>(stage, stored_mask[t], count, lane, 0, c.chain[t], before[t]);
      }
    }
    // A later token of the chunk that stores into my slot: its record is the one kept.
    const unsigned later_lanes = lane == kLanes - 1 ? 0u : kAllLanes << (lane + 1);
    if (lane < count) {
#pragma unroll
      for (int t = 0; t < kTargets; ++t) {
        if (t >= f.target_count()) continue;
        const bool overwritten = (same_slot & stored_mask[t] & later_lanes) != 0u;
        f.store_token(t, mine, before[t], c.position_assert[t], !overwritten);
      }
    }
    mine = next;
    // The chunk's stores land before the next chunk's, and the stage is read before it is rewritten.
    __syncwarp();
  }
  f.end_request(q, lane, c);
  return f.stored(c);
}

// Work a caller folds into the write's grid, run by its last block once every block's stores are visible
// (an active epilogue's `done_blocks`: a device counter at 0 between launches, which that block resets): the
// runtime's in-graph snapshot (runtime/impl/pump_in_write.hpp), so that it costs no kernel of its own.
struct NoEpilogue {
  static constexpr bool kActive = false;
  __device__ void operator()(int, int) const {}
};

// Warp w of the grid writes requests w, w + warps, ... (read as the portable kernel reads them); one add of
// the tokens stored per block, one kernel run per call; then, with an epilogue, the last block to finish runs
// it.
template <class Functor, class Hash, class Epilogue = NoEpilogue>
__global__ void __launch_bounds__(kMaxThreads) write_kernel(const Functor f, const Epilogue epilogue = Epilogue{}) {
  __shared__ ChainInput stage[kMaxWarps][kLanes];
  __shared__ std::int64_t stored_by_warp[kMaxWarps];
  const int lane = static_cast<int>(threadIdx.x) % kLanes, warp = static_cast<int>(threadIdx.x) / kLanes;
  const int block_warps = static_cast<int>(blockDim.x) / kLanes;
  if (blockIdx.x == 0 && threadIdx.x == 0) f.ring.add_runs(0, f.target_count());  // every call and target
  std::int64_t stored = 0;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * block_warps;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * block_warps + warp; r < f.plan.capacity(); r += warps) {
    const WriteRequest q = f.request(r);
    if (!q.active) break;
    stored += write_request<Hash>(f, stage[warp], lane, q);
  }
  if (lane == 0) stored_by_warp[warp] = stored;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int64_t total = 0;
    for (int w = 0; w < block_warps; ++w) total += stored_by_warp[w];
    f.ring.add_runs(total, 0);
  }
  if constexpr (Epilogue::kActive) {
    __shared__ bool last;
    __threadfence();  // this block's rows and counters before its count (the fences are cumulative)
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(epilogue.done_blocks, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last) {
      __threadfence();  // every other block's stores before ours
      epilogue(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
      if (threadIdx.x == 0) *epilogue.done_blocks = 0u;  // for the next launch (kernel boundaries order it)
    }
  }
}

// Blocks of kMaxThreads that fit on the device at once (blocks of one warp fit at least as many).
template <class Functor, class Hash, class Epilogue = NoEpilogue>
int resident_write_blocks(int device) {
  static PerDevice cache;
  return cache.get(device, [device] {
    return CudaPersistent::resident_blocks(write_kernel<Functor, Hash, Epilogue>, kMaxThreads, device);
  });
}

}  // namespace CudaWrite

template <>
struct WriteBackend<Kokkos::Cuda> {
  static constexpr bool has_cuda = true;

  // Launches the write on `space`'s stream and returns true, or launches nothing and returns false.
  // `Hash`: how the walk multiplies (the perf tests time both).
  // `epilogue`: work the last block runs (CudaWrite::NoEpilogue: none).
  template <class Functor, class Hash = CudaWrite::SplitMultiply, class Epilogue = CudaWrite::NoEpilogue>
  static bool write(const Kokkos::Cuda& space, const Functor& functor, const Epilogue& epilogue = Epilogue{}) {
    static_assert(sizeof(Functor) + sizeof(Epilogue) < kMaxKernelArgumentBytes,
                  "kvcanary: kernel arguments must stay small");
    const int device = space.cuda_device();
    if (!CudaPersistent::is_current_device(device)) return false;
    const int resident = CudaWrite::resident_write_blocks<Functor, Hash, Epilogue>(device);
    const int sms = CudaPersistent::sm_count(device);
    if (resident <= 0 || sms <= 0) return false;
    const std::int64_t requests = functor.plan.capacity();
    const int warps = requests <= sms ? 1 : CudaWrite::kMaxWarps;
    Kokkos::Profiling::pushRegion("kvcanary::write[cuda]");
    CudaWrite::write_kernel<Functor, Hash, Epilogue>
        <<<CudaPersistent::capped_blocks(requests, warps, resident), CudaWrite::kLanes * warps, 0,
           space.cuda_stream()>>>(functor, epilogue);
    Kokkos::Profiling::popRegion();
    KVCANARY_CUDA_CHECK(cudaGetLastError());
    return true;
  }
};

}  // namespace Impl
}  // namespace kvcanary

#endif  // KOKKOS_ENABLE_CUDA
#endif
