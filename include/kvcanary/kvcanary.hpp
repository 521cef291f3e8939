#ifndef KVCANARY_KVCANARY_HPP
#define KVCANARY_KVCANARY_HPP

// Everything a user of kvcanary needs: the plan types and allocation helpers, validate(), plan(); the
// canary stages write() and verify() with their types, and the host report; canary v2's free(),
// cross_check(), check_padding_slot() and poisoned_prefixes(); the serial host reference
// of both parts of the SPEC, and the host bridges that move a call's data between it and the device.

#include <kvcanary/canary_host_bridge.hpp>
#include <kvcanary/canary_types.hpp>
#include <kvcanary/canary_v2_host_bridge.hpp>
#include <kvcanary/cross_check.hpp>
#include <kvcanary/free.hpp>
#include <kvcanary/host_bridge.hpp>
#include <kvcanary/padding_check.hpp>
#include <kvcanary/plan.hpp>
#include <kvcanary/plan_types.hpp>
#include <kvcanary/poisoned_prefixes.hpp>
#include <kvcanary/reference.hpp>
#include <kvcanary/reference_canary.hpp>
#include <kvcanary/report.hpp>
#include <kvcanary/report_reader.hpp>
#include <kvcanary/validate.hpp>
#include <kvcanary/verify.hpp>
#include <kvcanary/version.hpp>
#include <kvcanary/write.hpp>

#endif
