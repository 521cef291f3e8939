// Every test header, instantiated for KVCANARY_TEST_EXECSPACE (defined by the backend's .cpp).
#include "test_smoke.hpp"
