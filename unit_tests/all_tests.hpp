// Every test header, instantiated for KVCANARY_TEST_EXECSPACE (defined by the backend's .cpp).
#include "test_plan_facts.hpp"
#include "test_write_rules.hpp"
#include "test_bad_rows.hpp"
#include "test_host_errors.hpp"
#include "test_differential.hpp"
#include "test_repeated_calls.hpp"
#include "test_large_batch.hpp"
#include "test_raw_pointers.hpp"
