#ifndef KVCANARY_PERF_REGISTRY_HPP
#define KVCANARY_PERF_REGISTRY_HPP

// The hooks a backend's .cpp defines for perf_main.cpp (one backend per executable).

#include <string>
#include <vector>

namespace kvcanary_perf {

struct Floor;

// "serial", "openmp" or "cuda": the last component of host benchmark names.
std::string backend_name();
// Google Benchmark flags put before the user's (so the user's win).
std::vector<std::string> default_flags();
// The copy-bandwidth, launch and write-chain floors, measured on this backend in this run.
Floor measure_floor();
// Registers every plan, verify and write benchmark of this backend.
void register_benchmarks();

}  // namespace kvcanary_perf

#endif
