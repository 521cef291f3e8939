// Google Benchmark main for the kvcanary perf drivers: Kokkos first, then Google Benchmark; the floors
// (copy, launch, write chain) are measured once on this backend before any benchmark runs and written to
// the JSON context. The verify benchmarks measure their gather floors on their own data.

#include "perf_registry.hpp"
#include "perf_support.hpp"

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char* argv[]) {
  // Default flags (medians over repetitions) go before the user's, which therefore override them.
  std::vector<std::string> defaults = kvcanary_perf::default_flags();
  std::vector<char*> args;
  args.push_back(argv[0]);
  for (std::string& flag : defaults) args.push_back(&flag[0]);
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int nargs = static_cast<int>(args.size());
  args.push_back(nullptr);

  Kokkos::initialize(nargs, args.data());
  int status = 0;
  {
    benchmark::Initialize(&nargs, args.data());
    if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) {
      status = 1;
    } else {
      const std::string backend = kvcanary_perf::backend_name();
      kvcanary_perf::Floor& floor = kvcanary_perf::measured_floor();
      floor = kvcanary_perf::measure_floor();
      std::fprintf(stderr, "kvcanary perf (%s): copy floor %.2f GB/s [%s]\n", backend.c_str(),
                   floor.copy_bytes_per_s / 1e9, floor.copy_method.c_str());
      std::fprintf(stderr, "kvcanary perf (%s): launch floor %.3f us [%s]\n", backend.c_str(), floor.launch_us,
                   floor.launch_method.c_str());
      std::fprintf(stderr, "kvcanary perf (%s): write chain floor %.2f ns per token [%s]\n", backend.c_str(),
                   floor.chain_ns_per_token, floor.chain_method.c_str());
      benchmark::AddCustomContext("kvcanary_backend", backend);
      benchmark::AddCustomContext("kvcanary_copy_GB_per_s", std::to_string(floor.copy_bytes_per_s / 1e9));
      benchmark::AddCustomContext("kvcanary_copy_method", floor.copy_method);
      benchmark::AddCustomContext("kvcanary_launch_us", std::to_string(floor.launch_us));
      benchmark::AddCustomContext("kvcanary_launch_method", floor.launch_method);
      benchmark::AddCustomContext("kvcanary_chain_ns_per_token", std::to_string(floor.chain_ns_per_token));
      benchmark::AddCustomContext("kvcanary_chain_method", floor.chain_method);
      for (const kvcanary_perf::ChainVariant& v : floor.chain_variants) {
        std::fprintf(stderr, "kvcanary perf (%s):   chain variant %.2f ns per step%s [%s]\n", backend.c_str(),
                     v.ns_per_step, v.correct ? "" : " (WRONG RESULT)", v.name.c_str());
        benchmark::AddCustomContext("kvcanary_chain_variant " + v.name,
                                    std::to_string(v.ns_per_step) + (v.correct ? "" : " (wrong result)"));
      }
      benchmark::AddCustomContext("kvcanary_kokkos_concurrency",
                                  std::to_string(Kokkos::DefaultExecutionSpace().concurrency()));

      kvcanary_perf::register_benchmarks();
      benchmark::RunSpecifiedBenchmarks();
    }
    benchmark::Shutdown();
  }
  Kokkos::finalize();
  return status;
}
