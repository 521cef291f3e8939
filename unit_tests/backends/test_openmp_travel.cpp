// The tests of records that travel (SPEC-CANARY §12) on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "all_tests_travel.hpp"
