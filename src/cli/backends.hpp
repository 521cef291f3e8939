#ifndef KVCANARY_CLI_BACKENDS_HPP
#define KVCANARY_CLI_BACKENDS_HPP

// Backends and entries algorithms by name. A backend is one of serial, openmp, cuda, and only those
// compiled into the Kokkos installation are accepted; no name means Kokkos::DefaultExecutionSpace.
// --algorithm cuda-persistent (plan) and cuda (canary) are accepted everywhere: off CUDA the library falls
// back to the portable path.

#include "cli_error.hpp"

#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <Kokkos_Core.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kvcanary {
namespace cli {

// The backends compiled in, in the order serial, openmp, cuda.
std::vector<std::string> compiled_backends();

// Throws UsageError for a name that is unknown or not compiled in; returns it otherwise.
std::string checked_backend(const std::string& name);

// default | portable | cuda-persistent; throws UsageError otherwise.
EntriesAlgorithm parse_algorithm(const std::string& name);
const char* algorithm_name(EntriesAlgorithm algorithm);

// The canary stages' algorithm: default | portable | cuda; throws UsageError otherwise.
CanaryAlgorithm parse_canary_algorithm(const std::string& name);
const char* canary_algorithm_name(CanaryAlgorithm algorithm);

// Calls function(space) with a default-constructed instance of the named execution space (or of
// Kokkos::DefaultExecutionSpace when `backend` is empty). Kokkos must be initialized.
template <class Function>
void with_execution_space(const std::optional<std::string>& backend, Function&& function) {
  if (!backend) return function(Kokkos::DefaultExecutionSpace());
#ifdef KOKKOS_ENABLE_SERIAL
  if (*backend == "serial") return function(Kokkos::Serial());
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  if (*backend == "openmp") return function(Kokkos::OpenMP());
#endif
#ifdef KOKKOS_ENABLE_CUDA
  if (*backend == "cuda") return function(Kokkos::Cuda());
#endif
  checked_backend(*backend);  // throws with the list of compiled backends
  throw UsageError("backend '" + *backend + "' is not available");
}

// The execution space's name and concurrency, e.g. "OpenMP, 2 threads".
std::string describe_execution_space(const std::optional<std::string>& backend);

// kvcanary::plan_host_data on the named backend (Kokkos must be initialized). Throws std::invalid_argument
// for a call the library rejects, outputs untouched.
void plan_on_backend(const std::optional<std::string>& backend, const reference::Inputs& inputs,
                     reference::Outputs& outputs, const PlanOptions& options);

}  // namespace cli
}  // namespace kvcanary

#endif
