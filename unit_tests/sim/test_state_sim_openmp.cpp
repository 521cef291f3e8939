// The state-model simulator tests (state slots, SPEC-CANARY §13) on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "test_state_sim.hpp"
