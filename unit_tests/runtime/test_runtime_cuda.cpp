// The runtime tests on Kokkos::Cuda.
#define KVCANARY_TEST_EXECSPACE Kokkos::Cuda
#include "test_pump_mailbox.hpp"
#include "test_runtime.hpp"
#include "test_runtime_next_plan.hpp"
#include "test_runtime_text.hpp"
