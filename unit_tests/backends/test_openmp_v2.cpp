// The canary v2 unit tests (SPEC-CANARY §11) on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "all_tests_v2.hpp"
