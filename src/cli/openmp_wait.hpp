#ifndef KVCANARY_CLI_OPENMP_WAIT_HPP
#define KVCANARY_CLI_OPENMP_WAIT_HPP

// kvcanary's OpenMP settings for a busy host (docs/openmp.md). An engine's host is busy:
// * OpenMP's default wait spins its idle threads; on a loaded 2-core machine a 300-step simulate took 29 s
//   on OpenMP against 0.5 s on Serial (passive: 2 s). So: OMP_WAIT_POLICY=passive unless the user set one.
// * A team of more threads than free cores waits for time slices at every kernel (2 threads on a 2-core
//   machine with load 12: 1.2-3x Serial's time; 1 thread: Serial's). So: OMP_NUM_THREADS = the cores not
//   already busy (cores - 1-minute load average, rounded, at least 1) unless the user set it.
// The OpenMP runtime reads both once, when it is loaded (libgomp: a constructor that runs before main), so
// setting them in main is too late: the tool sets them and executes itself again, once. Nothing else
// changes (arguments, standard streams and limits are kept); where the re-execution fails, it runs on
// with the runtime's defaults.

namespace kvcanary {
namespace cli {

// The default thread count: the cores the load average leaves free, rounded, in [1, cores].
constexpr int openmp_threads_for(int cores, double load_average) {
  if (cores < 1) return 1;
  const double free_cores = static_cast<double>(cores) - (load_average > 0 ? load_average : 0.0);
  const int rounded = free_cores < 0.5 ? 1 : static_cast<int>(free_cores + 0.5);
  return rounded < 1 ? 1 : (rounded > cores ? cores : rounded);
}
static_assert(openmp_threads_for(2, 0.0) == 2 && openmp_threads_for(2, 0.4) == 2, "an idle host: every core");
static_assert(openmp_threads_for(2, 0.6) == 1 && openmp_threads_for(2, 13.0) == 1, "a loaded host: one thread");
static_assert(openmp_threads_for(64, 10.2) == 54 && openmp_threads_for(0, 1.0) == 1, "free cores, at least one");

// Returns only when OMP_WAIT_POLICY and OMP_NUM_THREADS were both set (by the user, or by this function
// before it re-executed), when this build has no OpenMP backend, or when the re-execution failed.
void use_busy_host_openmp_settings(char** argv);

}  // namespace cli
}  // namespace kvcanary

#endif
