// The tests of records that travel (SPEC-CANARY §12) on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "all_tests_travel.hpp"
