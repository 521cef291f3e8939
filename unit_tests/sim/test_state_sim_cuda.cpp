// The state-model simulator tests (state slots, SPEC-CANARY §13) on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "test_state_sim.hpp"
