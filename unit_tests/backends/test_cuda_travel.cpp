// The tests of records that travel (SPEC-CANARY §12) on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "all_tests_travel.hpp"
