// What a small plan call can cost at least on this GPU: the links of the fused kernel's chain timed one
// by one, in CUDA-graph replay (20 nodes per graph, like the perf tests), with no plan logic. Each block
// does what one tile of decode bs1 does: read a row's inputs, then per thread 4 slots and 4 pool tokens
// at positions that depend on them, then 16 int64 stores (a 1024-entry tile); variants add the block
// scan and barriers of the fused kernel, a warp scan instead, or large kernel parameters.
//
//   nvcc -O3 -arch=sm_90 -o latency_chain docs/perf/experiments/latency_chain.cu && ./latency_chain
#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                 \
  do {                                                           \
    cudaError_t e = (x);                                         \
    if (e != cudaSuccess) {                                      \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                              \
    }                                                            \
  } while (0)

constexpr int kThreads = 256;
constexpr int kPerThread = 4;
constexpr int kTile = kThreads * kPerThread;

struct Buffers {
  const long long* rows;  // 4 fields per row: pool row, prefix, extend, valid_len
  const int* tokens;      // req_to_token
  const int* pool;
  long long *o0, *o1, *o2, *o3;
  long long rows_in_batch;
};

struct Padding {  // brings the parameters to the plan kernels' size (DeviceInputs + DeviceOutputs: 552 bytes)
  long long unused[58];
};

struct Pair {
  long long a, b;
};
struct PairSum {
  __device__ Pair operator()(const Pair& x, const Pair& y) const { return {x.a + y.a, x.b + y.b}; }
};

enum Variant { kEmpty, kStoresOnly, kOneTrip, kTwoTrips, kTwoTripsBlockScan, kTwoTripsWarpScan };

template <Variant V>
__global__ void __launch_bounds__(kThreads) chain(Buffers b, Padding) {
  if (V == kEmpty) return;
  const long long begin = (long long)blockIdx.x * kTile;
  long long pool_row = 1, prefix = kTile, valid = kTile, extra = 0;
  if (V != kStoresOnly) {
    const int lane = threadIdx.x % 32;
    const long long r = lane < b.rows_in_batch ? lane : 0;
    pool_row = b.rows[4 * r];
    prefix = b.rows[4 * r + 1];
    valid = b.rows[4 * r + 3];
    Pair mine{prefix, b.rows[4 * r + 2]};
    if (V == kTwoTripsBlockScan) {
      using Scan = cub::BlockScan<Pair, kThreads>;
      __shared__ typename Scan::TempStorage storage;
      __shared__ int status;
      if (threadIdx.x == 0) status = 0;
      __syncthreads();
      if (pool_row < 0) atomicOr(&status, 1);
      Pair base, total;
      Scan(storage).ExclusiveScan(mine, base, Pair{0, 0}, PairSum(), total);
      __shared__ long long offsets[kThreads + 1];
      offsets[threadIdx.x] = base.a;
      __syncthreads();
      extra = offsets[0] + status + total.b * 0;
    } else if (V == kTwoTripsWarpScan) {
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const long long ua = __shfl_up_sync(0xffffffffu, mine.a, d), ub = __shfl_up_sync(0xffffffffu, mine.b, d);
        if (lane >= d) mine = {mine.a + ua, mine.b + ub};
      }
      extra = __shfl_sync(0xffffffffu, mine.a, 0) - prefix;  // 0, but the compiler cannot know
    }
  }
  long long slot[kPerThread], token[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const long long position = k * kThreads + threadIdx.x + extra;
    if (V == kTwoTrips || V == kTwoTripsBlockScan || V == kTwoTripsWarpScan) {
      slot[k] = b.tokens[pool_row * 65536 + position];
      token[k] = position < valid ? b.pool[pool_row * 65536 + position] : -1;
    } else {
      slot[k] = pool_row + position;
      token[k] = prefix - position;
    }
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const long long i = begin + k * kThreads + threadIdx.x;
    b.o0[i] = slot[k];
    b.o1[i] = token[k];
    b.o2[i] = i;
    b.o3[i] = slot[k] - 1;
  }
}

__global__ void empty_small(int) {}

// µs per node: a graph of 20 launches, replayed 50 times, median of 7.
template <class Launch>
double per_node_us(Launch launch, cudaStream_t stream) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int n = 0; n < 20; ++n) launch();
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int w = 0; w < 5; ++w) CHECK(cudaGraphLaunch(exec, stream));
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    cudaEventRecord(start, stream);
    for (int r = 0; r < 50; ++r) CHECK(cudaGraphLaunch(exec, stream));
    cudaEventRecord(stop, stream);
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t.push_back(1000.0 * ms / (50 * 20));
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return t[3];
}

int main() {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int max_blocks = 64;
  long long* rows;
  int *tokens, *pool;
  long long* out;
  CHECK(cudaMalloc(&rows, 4 * 32 * sizeof(long long)));
  CHECK(cudaMalloc(&tokens, 4 * 65536 * sizeof(int)));
  CHECK(cudaMalloc(&pool, 4 * 65536 * sizeof(int)));
  CHECK(cudaMalloc(&out, 4 * max_blocks * kTile * sizeof(long long)));
  std::vector<long long> host_rows(4 * 32);
  for (int r = 0; r < 32; ++r) {
    host_rows[4 * r] = 1 + r % 3;
    host_rows[4 * r + 1] = 1024;
    host_rows[4 * r + 2] = 1;
    host_rows[4 * r + 3] = 1024;
  }
  CHECK(cudaMemcpy(rows, host_rows.data(), host_rows.size() * sizeof(long long), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(tokens, 1, 4 * 65536 * sizeof(int)));
  CHECK(cudaMemset(pool, 2, 4 * 65536 * sizeof(int)));
  const long long n = (long long)max_blocks * kTile;
  Buffers b{rows, tokens, pool, out, out + n, out + 2 * n, out + 3 * n, 1};
  Padding pad{};

  std::printf("empty kernel, 4-byte parameters: %.3f us\n",
              per_node_us([&] { empty_small<<<1, 1, 0, stream>>>(0); }, stream));
  for (int blocks : {1, 34}) {
    for (long long rows_in_batch : {1LL, 8LL}) {
      b.rows_in_batch = rows_in_batch;
      auto run = [&](const char* name, auto kernel) {
        std::printf("%2d block(s), %lld row(s): %-36s %.3f us\n", blocks, rows_in_batch, name,
                    per_node_us([&] { kernel<<<blocks, kThreads, 0, stream>>>(b, pad); }, stream));
      };
      run("empty, 552-byte parameters", chain<kEmpty>);
      run("16 stores a thread", chain<kStoresOnly>);
      run("row loads -> stores", chain<kOneTrip>);
      run("row loads -> tile loads -> stores", chain<kTwoTrips>);
      run("... + block scan, status, 3 barriers", chain<kTwoTripsBlockScan>);
      run("... + warp scan instead", chain<kTwoTripsWarpScan>);
    }
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
