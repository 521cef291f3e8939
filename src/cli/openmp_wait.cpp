#include "openmp_wait.hpp"

#include <Kokkos_Macros.hpp>

#include <cstdlib>

#include <unistd.h>

namespace kvcanary {
namespace cli {

void use_passive_openmp_wait(char** argv) {
#ifdef KOKKOS_ENABLE_OPENMP
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or already re-executed
  if (setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return;
  execv("/proc/self/exe", argv);  // only returns on failure: run on as we are
#else
  (void)argv;
#endif
}

}  // namespace cli
}  // namespace kvcanary
