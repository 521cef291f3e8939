// The canary v2 unit tests (SPEC-CANARY §11) on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "all_tests_v2.hpp"
