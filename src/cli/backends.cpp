#include "backends.hpp"

#include <kvcanary/tools/host_bridge_plan.hpp>

namespace kvcanary {
namespace cli {

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names;
#ifdef KOKKOS_ENABLE_SERIAL
  names.push_back("serial");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  names.push_back("openmp");
#endif
#ifdef KOKKOS_ENABLE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

std::string checked_backend(const std::string& name) {
  const std::vector<std::string> compiled = compiled_backends();
  std::string list;
  for (const std::string& b : compiled) list += (list.empty() ? "" : ", ") + b;
  for (const std::string& b : compiled)
    if (b == name) return name;
  if (name == "serial" || name == "openmp" || name == "cuda")
    throw UsageError("backend '" + name + "' is not compiled into this Kokkos (available: " + list + ")");
  throw UsageError("unknown backend '" + name + "' (available: " + list + ")");
}

EntriesAlgorithm parse_algorithm(const std::string& name) {
  if (name == "default") return EntriesAlgorithm::Default;
  if (name == "portable") return EntriesAlgorithm::Portable;
  if (name == "cuda-persistent") return EntriesAlgorithm::CudaPersistent;
  throw UsageError("unknown algorithm '" + name + "' (expected default, portable or cuda-persistent)");
}

const char* algorithm_name(EntriesAlgorithm algorithm) {
  switch (algorithm) {
    case EntriesAlgorithm::Portable: return "portable";
    case EntriesAlgorithm::CudaPersistent: return "cuda-persistent";
    default: return "default";
  }
}

CanaryAlgorithm parse_canary_algorithm(const std::string& name) {
  if (name == "default") return CanaryAlgorithm::Default;
  if (name == "portable") return CanaryAlgorithm::Portable;
  if (name == "cuda") return CanaryAlgorithm::Cuda;
  throw UsageError("unknown canary algorithm '" + name + "' (expected default, portable or cuda)");
}

const char* canary_algorithm_name(CanaryAlgorithm algorithm) {
  switch (algorithm) {
    case CanaryAlgorithm::Portable: return "portable";
    case CanaryAlgorithm::Cuda: return "cuda";
    default: return "default";
  }
}

std::string describe_execution_space(const std::optional<std::string>& backend) {
  std::string text;
  with_execution_space(backend, [&](const auto& space) {
    text = std::string(space.name()) + ", concurrency " + std::to_string(space.concurrency());
  });
  return text;
}

void plan_on_backend(const std::optional<std::string>& backend, const reference::Inputs& inputs,
                     reference::Outputs& outputs, const PlanOptions& options) {
  with_execution_space(backend, [&](const auto& space) { plan_host_data(space, inputs, outputs, options); });
}

}  // namespace cli
}  // namespace kvcanary
