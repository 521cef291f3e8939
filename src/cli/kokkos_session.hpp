#ifndef KVCANARY_CLI_KOKKOS_SESSION_HPP
#define KVCANARY_CLI_KOKKOS_SESSION_HPP

// How kvcanary-plan starts Kokkos: only once the command line and the case are known to be good, and
// quietly (Kokkos' OMP_PROC_BIND warning would break "one line on stderr"). Threads come from the
// environment (OMP_NUM_THREADS); kvcanary-plan's own arguments are not passed to Kokkos.

#include <Kokkos_Core.hpp>

namespace kvcanary {
namespace cli {

inline Kokkos::InitArguments kokkos_arguments() {
  Kokkos::InitArguments arguments;
  arguments.disable_warnings = true;
  return arguments;
}

}  // namespace cli
}  // namespace kvcanary

#endif
