// The tests of canary v2 (SPEC-CANARY §11), instantiated for KVCANARY_TEST_EXECSPACE: a translation unit
// of their own beside all_tests.hpp's, so that each compiles in half the time.
#include "test_canary_v2_facts.hpp"
#include "test_canary_v2_differential.hpp"
#include "test_canary_v2_identity.hpp"
#include "test_plan_and_verify.hpp"
