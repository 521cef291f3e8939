// The state-model simulator tests (state slots, SPEC-CANARY §13) on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "test_state_sim.hpp"
