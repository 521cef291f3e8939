// The simulator tests on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "test_simulator.hpp"
#include "test_sim_runtime.hpp"
