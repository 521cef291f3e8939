#ifndef KVCANARY_PERF_BACKEND_HPP
#define KVCANARY_PERF_BACKEND_HPP

// Included once by a backend's .cpp after it defines
//   KVCANARY_PERF_EXECSPACE  the Kokkos execution space (Kokkos::Serial, Kokkos::OpenMP, Kokkos::Cuda)
//   KVCANARY_PERF_BACKEND    its name in benchmark names ("serial", "openmp", "cuda")
// and defines the hooks of perf_registry.hpp for it.

#include "perf_canary_v2.hpp"
#include "perf_plan.hpp"
#include "perf_verify.hpp"
#include "perf_write.hpp"
#include "perf_step.hpp"
#include "perf_transfer.hpp"

#ifndef KVCANARY_PERF_EXECSPACE
#error "define KVCANARY_PERF_EXECSPACE before including perf_backend.hpp"
#endif
#ifndef KVCANARY_PERF_BACKEND
#error "define KVCANARY_PERF_BACKEND before including perf_backend.hpp"
#endif

namespace kvcanary_perf {

std::string backend_name() { return KVCANARY_PERF_BACKEND; }
std::vector<std::string> default_flags() { return backend_default_flags<KVCANARY_PERF_EXECSPACE>(); }
Floor measure_floor() { return measure_backend_floor<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND); }
// Plan, verify, write, canary v2's free and cross-check, then the runtime's step, in that order (each stage's
// workloads next to each other, so its caches hold one).
void register_benchmarks() {
  register_plan_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);
  register_verify_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);
  register_write_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);
  register_canary_v2_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);
  register_step_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);
  register_transfer_benchmarks<KVCANARY_PERF_EXECSPACE>(KVCANARY_PERF_BACKEND);  // SPEC-CANARY §12
}

}  // namespace kvcanary_perf

#endif
