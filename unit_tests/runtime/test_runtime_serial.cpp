// The runtime tests on Kokkos::Serial.
#define KVCANARY_TEST_EXECSPACE Kokkos::Serial
#include "test_pump_mailbox.hpp"
#include "test_runtime.hpp"
#include "test_runtime_next_plan.hpp"
#include "test_runtime_text.hpp"
