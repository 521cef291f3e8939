// simulate(options, backend): the backend by name (simulate.hpp).

#include "simulate.hpp"

#include <cctype>
#include <stdexcept>

namespace kvcanary {
namespace sim {

SimulationReport simulate(const SimulationOptions& options, const std::string& name) {
  std::string backend = name;
  if (backend == "default") {
    backend = Kokkos::DefaultExecutionSpace::name();
    for (auto& c : backend) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
#ifdef KOKKOS_ENABLE_SERIAL
  if (backend == "serial") return simulate(Kokkos::Serial{}, options);
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  if (backend == "openmp") return simulate(Kokkos::OpenMP{}, options);
#endif
#ifdef KOKKOS_ENABLE_CUDA
  if (backend == "cuda") return simulate(Kokkos::Cuda{}, options);  // on a user stream of its own (simulate.hpp)
#endif
  throw std::invalid_argument("kvcanary simulate: backend '" + backend + "' is not in this build");
}

}  // namespace sim
}  // namespace kvcanary
