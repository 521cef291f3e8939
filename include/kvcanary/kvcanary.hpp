#ifndef KVCANARY_KVCANARY_HPP
#define KVCANARY_KVCANARY_HPP

// Everything a user of kvcanary needs: the plan types and allocation helpers, validate(), plan(),
// and the serial host reference.

#include <kvcanary/host_bridge.hpp>
#include <kvcanary/plan.hpp>
#include <kvcanary/plan_types.hpp>
#include <kvcanary/reference.hpp>
#include <kvcanary/validate.hpp>
#include <kvcanary/version.hpp>

#endif
