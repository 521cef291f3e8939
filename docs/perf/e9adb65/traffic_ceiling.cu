// What the plan's byte mix can reach on this GPU, without any plan logic: per entry, two int32 reads
// (req_to_token, pool: contiguous) and four int64 writes, the traffic of decode bs256 (SPEC §7 counts
// 40 bytes an entry). Compared with a device-to-device copy of 1 GiB, the copy floor of the perf tests.
//
//   nvcc -O3 -arch=sm_90 -o traffic_ceiling docs/perf/experiments/traffic_ceiling.cu && ./traffic_ceiling
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(e));                   \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

template <int kPerThread, bool kRead, bool kStreaming>
__global__ void __launch_bounds__(256) mix(const std::int32_t* a, const std::int32_t* b, long long* o0, long long* o1,
                                           long long* o2, long long* o3, std::int64_t n) {
  const std::int64_t tile = 256 * kPerThread;
  for (std::int64_t begin = std::int64_t(blockIdx.x) * tile; begin < n; begin += std::int64_t(gridDim.x) * tile) {
    long long x[kPerThread], y[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = begin + k * 256 + threadIdx.x;
      x[k] = kRead && i < n ? a[i] : i;
      y[k] = kRead && i < n ? b[i] : -i;
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = begin + k * 256 + threadIdx.x;
      if (i >= n) continue;
      if (kStreaming) {
        __stcs(o0 + i, x[k]);
        __stcs(o1 + i, y[k]);
        __stcs(o2 + i, i);
        __stcs(o3 + i, x[k] - 1);
      } else {
        o0[i] = x[k];
        o1[i] = y[k];
        o2[i] = i;
        o3[i] = x[k] - 1;
      }
    }
  }
}

template <class F>
float median_us(F launch, int reps) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const std::int64_t n = 4700000;  // ~ decode bs256's entries
  const std::size_t copy_bytes = std::size_t(1) << 30;
  std::int32_t *a, *b;
  long long* o[4];
  void *src, *dst;
  CHECK(cudaMalloc(&a, n * 4));
  CHECK(cudaMalloc(&b, n * 4));
  for (auto& p : o) CHECK(cudaMalloc(&p, n * 8));
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  CHECK(cudaMemset(a, 1, n * 4));
  CHECK(cudaMemset(b, 2, n * 4));
  CHECK(cudaMemset(src, 3, copy_bytes));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  const float copy_us = median_us([&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); }, 21);
  const double copy_gbs = 2.0 * copy_bytes / copy_us / 1e3;  // read + write, as the perf tests count it
  std::printf("copy 1 GiB: %.1f us, %.0f GB/s\n", copy_us, copy_gbs);

  auto run = [&](const char* name, auto kernel, int per_thread, double bytes_per_entry) {
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0);
    const std::int64_t tiles = (n + 256 * per_thread - 1) / (256 * per_thread);
    const int grid = static_cast<int>(std::min<std::int64_t>(tiles, std::int64_t(sms) * per_sm));
    const float us = median_us([&] { kernel<<<grid, 256>>>(a, b, o[0], o[1], o[2], o[3], n); }, 51);
    const double gbs = bytes_per_entry * n / us / 1e3;
    std::printf("%-34s %8.1f us %6.0f GB/s %5.1f%% of copy  (grid %d)\n", name, us, gbs, 100.0 * gbs / copy_gbs, grid);
  };
  run("read 8 + write 32 B, 4/thread", mix<4, true, false>, 4, 40);
  run("read 8 + write 32 B, 8/thread", mix<8, true, false>, 8, 40);
  run("read 8 + write 32 B, 4/thread, stcs", mix<4, true, true>, 4, 40);
  run("write 32 B only, 4/thread", mix<4, false, false>, 4, 32);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  return 0;
}
