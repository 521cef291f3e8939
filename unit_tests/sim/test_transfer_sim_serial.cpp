// The two-place simulator tests (records that travel, SPEC-CANARY §12) on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "test_transfer_sim.hpp"
