// The runtime tests on Kokkos::OpenMP.
#define KVCANARY_TEST_EXECSPACE Kokkos::OpenMP
#include "test_pump_mailbox.hpp"
#include "test_runtime.hpp"
#include "test_runtime_next_plan.hpp"
#include "test_runtime_text.hpp"
