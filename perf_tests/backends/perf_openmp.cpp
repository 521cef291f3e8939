// The plan, verify and write benchmarks on Kokkos::OpenMP.
#define KVCANARY_PERF_EXECSPACE Kokkos::OpenMP
#define KVCANARY_PERF_BACKEND "openmp"
#include "perf_backend.hpp"
