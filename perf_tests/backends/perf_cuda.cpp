// The plan, verify and write benchmarks on Kokkos::Cuda.
#define KVCANARY_PERF_EXECSPACE Kokkos::Cuda
#define KVCANARY_PERF_BACKEND "cuda"
#include "perf_backend.hpp"
