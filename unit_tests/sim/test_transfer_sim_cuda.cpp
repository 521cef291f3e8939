// The two-place simulator tests (records that travel, SPEC-CANARY §12) on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "test_transfer_sim.hpp"
