// The simulator tests on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "test_simulator.hpp"
#include "test_sim_runtime.hpp"
