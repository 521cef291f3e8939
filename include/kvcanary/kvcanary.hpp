#ifndef KVCANARY_KVCANARY_HPP
#define KVCANARY_KVCANARY_HPP

// Everything an engine needs: the stages (stages/: plan(), verify(), write() with their types and
// allocation helpers, the host report; canary v2's free(), cross_check(), check_padding_slot() and
// poisoned_prefixes()) and the engine-facing runtime (runtime/: kvcanary::Canary).
// The host tools (tools/: the serial reference of the SPEC and the host bridges that move a call's data
// between it and a device, for tests, the CLI and benchmarks) are included on their own.

#include <kvcanary/runtime/canary.hpp>
#include <kvcanary/stages/canary_types.hpp>
#include <kvcanary/stages/cross_check.hpp>
#include <kvcanary/stages/free.hpp>
#include <kvcanary/stages/head_fingerprint.hpp>
#include <kvcanary/stages/padding_check.hpp>
#include <kvcanary/stages/plan.hpp>
#include <kvcanary/stages/plan_and_verify.hpp>
#include <kvcanary/stages/plan_types.hpp>
#include <kvcanary/stages/plan_validate.hpp>
#include <kvcanary/stages/poisoned_prefixes.hpp>
#include <kvcanary/stages/report.hpp>
#include <kvcanary/stages/report_reader.hpp>
#include <kvcanary/stages/state.hpp>
#include <kvcanary/stages/transfer.hpp>
#include <kvcanary/stages/verify.hpp>
#include <kvcanary/stages/write.hpp>
#include <kvcanary/version.hpp>

#endif
