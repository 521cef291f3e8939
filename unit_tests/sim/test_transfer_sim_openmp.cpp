// The two-place simulator tests (records that travel, SPEC-CANARY §12) on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "test_transfer_sim.hpp"
