#include "openmp_wait.hpp"

#include <Kokkos_Macros.hpp>

#include <cstdlib>
#include <string>
#include <thread>

#include <sched.h>
#include <unistd.h>

namespace kvcanary {
namespace cli {
namespace {

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

void use_busy_host_openmp_settings(char** argv) {
#ifdef KOKKOS_ENABLE_OPENMP
  bool changed = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) changed |= setenv("OMP_WAIT_POLICY", "passive", 0) == 0;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    double load = 0;
    if (getloadavg(&load, 1) != 1) load = 0;  // unknown: the host counts as idle (OpenMP's own default)
    changed |= setenv("OMP_NUM_THREADS", std::to_string(openmp_threads_for(usable_cores(), load)).c_str(), 0) == 0;
  }
  if (changed) execv("/proc/self/exe", argv);  // only returns on failure: run on as we are
#else
  (void)argv;
#endif
}

}  // namespace cli
}  // namespace kvcanary
