#ifndef KVCANARY_CLI_OPENMP_WAIT_HPP
#define KVCANARY_CLI_OPENMP_WAIT_HPP

// kvcanary's OpenMP wait policy (docs/openmp.md): passive unless the user set OMP_WAIT_POLICY. An engine's
// host is busy; OpenMP's default wait spins its idle threads, and on a loaded 2-core machine a 300-step
// simulate took 29 s on OpenMP against 0.5 s on Serial (passive: 2 s). The OpenMP runtime reads the policy
// once, when it is loaded (libgomp: a constructor that runs before main), so setting it in main is too
// late: the tool sets it and executes itself again, once. Nothing else changes (arguments, standard
// streams and limits are kept); where the re-execution fails, it runs on with the runtime's default.

namespace kvcanary {
namespace cli {

// Returns only when OMP_WAIT_POLICY was set (by the user, or by this function before it re-executed), when
// this build has no OpenMP backend, or when the re-execution failed.
void use_passive_openmp_wait(char** argv);

}  // namespace cli
}  // namespace kvcanary

#endif
