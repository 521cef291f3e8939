// graph_blocks.cu — what one extra block costs a kernel node of a replayed CUDA graph (a throwaway experiment
// for issue 20's pump: the snapshot block riding in a one-block plan or in a many-block verify).
// A step is [plan (1 block spinning ~2.5 us), verify (256 blocks), write (64 blocks)], 20 steps a graph.
// Run 2026-12-06 on an H100 (graph_blocks.h100.txt): nvcc -O3 -arch=sm_90 graph_blocks.cu && ./a.out CHAIN CYCLES.
// The table is memset to one byte, so the verify's chain of loads hits a handful of cached words and the step is
// short (~7 us): the run measures what a block costs a node, not a verify's memory traffic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

constexpr int kWords = 200;  // a counter block and a header
constexpr int kThreads = 256;

struct Snap {
  const long long* src;  // the counter block (device)
  long long* dst;        // the mailbox (pinned or device)
  long long* handover;   // device
};

// The snapshot as ride() does it: every thread one word, a block sum of the words' hashes, one thread closes.
__device__ void snapshot(const Snap& s) {
  __shared__ unsigned long long partial[kThreads / 32];
  const int t = threadIdx.x;
  const long long v = t < kWords ? s.src[t] : 0;
  unsigned long long h = t < kWords ? (static_cast<unsigned long long>(v) ^ t) * 0x9E3779B97F4A7C15ull : 0;
  if (t < kWords) s.dst[8 + t] = v;
  for (int o = 16; o; o >>= 1) h += __shfl_down_sync(0xffffffffu, h, o);
  if ((t & 31) == 0) partial[t >> 5] = h;
  __syncthreads();
  if (t == 0) {
    unsigned long long sum = 0;
    for (int w = 0; w < kThreads / 32; ++w) sum += partial[w];
    const long long seq = s.handover[0] + 1;
    s.handover[0] = seq;
    s.dst[0] = seq;
    s.dst[1] = static_cast<long long>(sum);
  }
}

__device__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// extra: 0 none, 1 an empty block, 2 a snapshot block. stage: block 0 also copies the counter block to staging.
__global__ void plan_like(long long cycles, int extra, int stage, Snap s, long long* staging, long long* out) {
  if (blockIdx.x == 1) {
    if (extra == 2) snapshot(s);
    return;
  }
  long long mine = 0;
  if (stage && threadIdx.x < kWords) mine = s.src[threadIdx.x];
  spin(cycles);
  __syncthreads();
  out[threadIdx.x] += 1;
  if (stage && threadIdx.x < kWords) staging[threadIdx.x] = mine;
}

// extra: 0 none, 1 an empty first block, 2 a snapshot first block, 3 a snapshot last block.
__global__ void verify_like(const unsigned* table, unsigned mask, int chain, int extra, Snap s, unsigned* out) {
  int b = blockIdx.x;
  if (extra == 1 || extra == 2) {
    if (b == 0) {
      if (extra == 2) snapshot(s);
      return;
    }
    b -= 1;
  } else if (extra == 3 && b == static_cast<int>(gridDim.x) - 1) {
    snapshot(s);
    return;
  }
  const unsigned i = b * kThreads + threadIdx.x;
  unsigned x = i * 2654435761u;
  for (int k = 0; k < chain; ++k) x = table[(x * 2246822519u + k) & mask];
  out[i] = x;
}

__global__ void write_like(const unsigned* table, unsigned mask, unsigned* out) {
  const unsigned i = blockIdx.x * kThreads + threadIdx.x;
  unsigned x = table[(i * 2654435761u) & mask];
  x = table[(x * 2246822519u) & mask];
  out[i] += x;
}

__global__ void snapshot_kernel(Snap s) {
  snapshot(s);
}

struct Variant {
  const char* name;
  int plan_extra, plan_stage, verify_extra, own_kernel;
  bool pinned;
};

int main(int argc, char** argv) {
  const int chain = argc > 1 ? std::atoi(argv[1]) : 12;
  const long long plan_cycles = argc > 2 ? std::atoll(argv[2]) : 5000;
  const int steps = 20, replays = 50, reps = 9;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; verify chain %d loads, plan spin %lld cycles\n", prop.name, prop.multiProcessorCount,
              chain, plan_cycles);

  const unsigned table_words = 1u << 26;  // 256 MiB: loads miss L2
  unsigned *table, *vout, *wout;
  long long *src, *dev_mail, *host_mail, *handover, *staging, *pout;
  CHECK(cudaMalloc(&table, table_words * sizeof(unsigned)));
  CHECK(cudaMemset(table, 0x5a, table_words * sizeof(unsigned)));
  CHECK(cudaMalloc(&vout, (257 * kThreads) * sizeof(unsigned)));
  CHECK(cudaMalloc(&wout, (64 * kThreads) * sizeof(unsigned)));
  CHECK(cudaMalloc(&src, kWords * sizeof(long long)));
  CHECK(cudaMemset(src, 1, kWords * sizeof(long long)));
  CHECK(cudaMalloc(&dev_mail, 1024 * sizeof(long long)));
  CHECK(cudaHostAlloc(&host_mail, 1024 * sizeof(long long), cudaHostAllocMapped));
  CHECK(cudaMalloc(&handover, 64 * sizeof(long long)));
  CHECK(cudaMemset(handover, 0, 64 * sizeof(long long)));
  CHECK(cudaMalloc(&staging, kWords * sizeof(long long)));
  CHECK(cudaMalloc(&pout, kThreads * sizeof(long long)));
  CHECK(cudaMemset(pout, 0, kThreads * sizeof(long long)));
  long long* host_mail_dev;
  CHECK(cudaHostGetDevicePointer(&host_mail_dev, host_mail, 0));

  const std::vector<Variant> variants = {
      {"baseline", 0, 0, 0, 0, true},
      {"plan+empty block", 1, 0, 0, 0, true},
      {"plan+snapshot block (pinned)", 2, 0, 0, 0, true},
      {"plan+snapshot block (device)", 2, 0, 0, 0, false},
      {"plan stages the block", 0, 1, 0, 0, true},
      {"verify+empty first block", 0, 0, 1, 0, true},
      {"verify+snapshot first (pinned)", 0, 0, 2, 0, true},
      {"verify+snapshot last (pinned)", 0, 0, 3, 0, true},
      {"stage + verify snapshot first", 0, 1, 2, 0, true},
      {"own snapshot kernel (pinned)", 0, 0, 0, 1, true},
  };
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaGraphExec_t> execs;
  for (const Variant& v : variants) {
    Snap s{v.plan_stage ? staging : src, v.pinned ? host_mail_dev : dev_mail, handover};
    Snap plan_snap{src, v.pinned ? host_mail_dev : dev_mail, handover};
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < steps; ++k) {
      plan_like<<<v.plan_extra ? 2 : 1, kThreads, 0, stream>>>(plan_cycles, v.plan_extra, v.plan_stage, plan_snap,
                                                               staging, pout);
      verify_like<<<v.verify_extra ? 257 : 256, kThreads, 0, stream>>>(table, table_words - 1, chain, v.verify_extra, s,
                                                                       vout);
      write_like<<<64, kThreads, 0, stream>>>(table, table_words - 1, wout);
      if (v.own_kernel) snapshot_kernel<<<1, kThreads, 0, stream>>>(s);
    }
    CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    execs.push_back(exec);
    CHECK(cudaGraphLaunch(exec, stream));  // warm
  }
  CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<std::vector<double>> us(variants.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      CHECK(cudaGraphLaunch(execs[i], stream));
      CHECK(cudaEventRecord(a, stream));
      for (int k = 0; k < replays; ++k) CHECK(cudaGraphLaunch(execs[i], stream));
      CHECK(cudaEventRecord(b, stream));
      CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      us[i].push_back(1000.0 * ms / (replays * steps));
    }
  }
  double base = 0;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    std::vector<double> x = us[i];
    std::sort(x.begin(), x.end());
    const double med = x[x.size() / 2];
    if (i == 0) base = med;
    std::printf("%-34s %8.3f us/step  %+7.3f  (min %.3f max %.3f)\n", variants[i].name, med, med - base, x.front(),
                x.back());
  }
  return 0;
}
