// The simulator tests on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "test_simulator.hpp"
#include "test_sim_runtime.hpp"
