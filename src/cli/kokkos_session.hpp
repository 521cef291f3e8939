#ifndef KVCANARY_CLI_KOKKOS_SESSION_HPP
#define KVCANARY_CLI_KOKKOS_SESSION_HPP

// How kvcanary starts Kokkos: only once the command line and the case are known to be good, and
// quietly (Kokkos' OMP_PROC_BIND warning would break "one line on stderr"). Threads come from the
// environment (OMP_NUM_THREADS); kvcanary's own arguments are not passed to Kokkos.

#include <Kokkos_Core.hpp>

namespace kvcanary {
namespace cli {

// Kokkos 3.7 replaced InitArguments with InitializationSettings (InitArguments is gone from 4.0 unless
// Kokkos keeps its deprecated code); ScopeGuard takes either.
#if KOKKOS_VERSION >= 30700
inline Kokkos::InitializationSettings kokkos_arguments() {
  return Kokkos::InitializationSettings().set_disable_warnings(true);
}
#else
inline Kokkos::InitArguments kokkos_arguments() {
  Kokkos::InitArguments arguments;
  arguments.disable_warnings = true;
  return arguments;
}
#endif

}  // namespace cli
}  // namespace kvcanary

#endif
