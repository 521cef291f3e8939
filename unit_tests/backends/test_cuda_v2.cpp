// The canary v2 unit tests (SPEC-CANARY §11) on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "all_tests_v2.hpp"
