// The canary v2 unit tests (SPEC-CANARY §11) on Kokkos::Cuda, and the plan that carries a rider's block.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "all_tests_v2.hpp"
#include "test_carrying_plan.hpp"
