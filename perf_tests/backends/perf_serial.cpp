// The plan, verify and write benchmarks on Kokkos::Serial.
#define KVCANARY_PERF_EXECSPACE Kokkos::Serial
#define KVCANARY_PERF_BACKEND "serial"
#include "perf_backend.hpp"
