// The tests of records that travel (SPEC-CANARY §12) and of state records (§13), instantiated for
// KVCANARY_TEST_EXECSPACE: a translation unit of their own beside all_tests.hpp's and all_tests_v2.hpp's.
#include "test_travel_facts.hpp"
#include "test_travel_differential.hpp"
#include "test_travel_consumer.hpp"
#include "test_head_fingerprint.hpp"
#include "test_state_records.hpp"
