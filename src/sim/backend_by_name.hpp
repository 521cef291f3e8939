#ifndef KVCANARY_SIM_BACKEND_BY_NAME_HPP
#define KVCANARY_SIM_BACKEND_BY_NAME_HPP

// The execution space a CLI --backend names ("serial", "openmp", "cuda", "default": Kokkos's default), for
// the simulator's models that run on a Kokkos backend: run(space) on it.

#include <Kokkos_Core.hpp>

#include <cctype>
#include <stdexcept>
#include <string>

namespace kvcanary {
namespace sim {

template <class Run>
auto on_backend(const std::string& backend, Run run) {
  std::string name = backend;
  if (name == "default") {
    name = Kokkos::DefaultExecutionSpace::name();
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
#ifdef KOKKOS_ENABLE_SERIAL
  if (name == "serial") return run(Kokkos::Serial{});
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  if (name == "openmp") return run(Kokkos::OpenMP{});
#endif
#ifdef KOKKOS_ENABLE_CUDA
  if (name == "cuda") return run(Kokkos::Cuda{});
#endif
  throw std::invalid_argument("kvcanary simulate: backend '" + name + "' is not in this build");
}

}  // namespace sim
}  // namespace kvcanary

#endif
