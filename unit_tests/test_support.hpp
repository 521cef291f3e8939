#ifndef KVCANARY_TEST_SUPPORT_HPP
#define KVCANARY_TEST_SUPPORT_HPP

// Helpers shared by every test header: building SPEC §6 inputs, poisoned outputs, running the library
// and the host reference from the same starting outputs, a readable diff of two plans, and the
// written/untouched rules of SPEC §4 checked on one result alone.

#include <kvcanary/kvcanary.hpp>
#include <kvcanary/tools/host_bridge_canary.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/tools/reference_plan.hpp>
#include <kvcanary/tools/reference_canary.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

namespace kvcanary {
// Found by GoogleTest through ADL, so a failing test names its algorithm instead of printing bytes.
inline void PrintTo(EntriesAlgorithm algorithm, std::ostream* os) {
  switch (algorithm) {
    case EntriesAlgorithm::Default: *os << "Default"; return;
    case EntriesAlgorithm::Portable: *os << "Portable"; return;
    case EntriesAlgorithm::CudaPersistent: *os << "CudaPersistent"; return;
  }
  *os << "EntriesAlgorithm(" << static_cast<int>(algorithm) << ")";
}
inline void PrintTo(CanaryAlgorithm algorithm, std::ostream* os) {
  switch (algorithm) {
    case CanaryAlgorithm::Default: *os << "Default"; return;
    case CanaryAlgorithm::Portable: *os << "Portable"; return;
    case CanaryAlgorithm::Cuda: *os << "Cuda"; return;
  }
  *os << "CanaryAlgorithm(" << static_cast<int>(algorithm) << ")";
}
}  // namespace kvcanary

namespace kvcanary_test {

using kvcanary::EntriesAlgorithm;
using kvcanary::PlanOptions;
using kvcanary::reference::Inputs;
using kvcanary::reference::Outputs;
using Int64s = std::vector<std::int64_t>;

// A value no plan can produce: positions are >= 0, and every slot, LUT value and pool token the tests
// build stays far from it. An output element still equal to it was not written.
constexpr std::int64_t kPoison = -777777;

struct Capacities {
  std::int64_t verify = 64;  // SPEC §6 defaults
  std::int64_t write = 4;
};

inline std::int64_t batch_size(const Inputs& in) { return static_cast<std::int64_t>(in.req_pool_indices.size()); }

// req_to_token "linear(R, L)" of SPEC §6: rtt[rp][p] = rp * L + p.
inline Inputs linear(std::int64_t rows, std::int64_t cols) {
  Inputs in;
  in.max_reqs = rows;
  in.max_seq_len = cols;
  in.req_to_token.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows * cols; ++i) in.req_to_token[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  return in;
}

inline void set_batch(Inputs& in, Int64s req_pool_indices, Int64s prefix_lens, Int64s extend_seq_lens) {
  in.req_pool_indices = std::move(req_pool_indices);
  in.prefix_lens = std::move(prefix_lens);
  in.extend_seq_lens = std::move(extend_seq_lens);
}

// The expected-token pool of SPEC §6: pool[rp][p] = rp * 1000 + p.
inline void set_pool(Inputs& in, std::int64_t rows, std::int64_t cols, Int64s valid_lens) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(rows * cols));
  for (std::int64_t rp = 0; rp < rows; ++rp)
    for (std::int64_t p = 0; p < cols; ++p) pool[static_cast<std::size_t>(rp * cols + p)] = static_cast<std::int32_t>(rp * 1000 + p);
  in.req_to_verify_expected_tokens = std::move(pool);
  in.pool_rows = rows;
  in.pool_cols = cols;
  in.req_to_verify_expected_tokens_valid_lens = std::move(valid_lens);
}

// [first, last)
inline Int64s range(std::int64_t first, std::int64_t last) {
  Int64s values;
  for (std::int64_t v = first; v < last; ++v) values.push_back(v);
  return values;
}

// A LUT of n entries with lut[i] = i + shift (shift 0: identity).
inline Int64s shifted_lut(std::int64_t n, std::int64_t shift) { return range(shift, n + shift); }

inline Int64s head(const Int64s& values, std::size_t n) {
  return Int64s(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(std::min(n, values.size())));
}

inline Outputs poisoned(const Capacities& caps) {
  return kvcanary::reference::make_outputs(caps.verify, caps.write, kPoison);
}

// ---- comparing two plans ----

namespace detail {

inline void diff_array(std::ostream& os, const char* name, const Int64s& library, const Int64s& reference) {
  if (library.size() != reference.size()) {
    os << "\n  " << name << ": library has " << library.size() << " entries, reference " << reference.size();
    return;
  }
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < library.size(); ++i) {
    if (library[i] == reference[i]) continue;
    if (++mismatches <= 5) os << "\n  " << name << "[" << i << "]: library " << library[i] << ", reference " << reference[i];
  }
  if (mismatches > 5) os << "\n  " << name << ": " << mismatches - 5 << " more mismatches";
}

inline void diff_scalar(std::ostream& os, const char* name, std::int32_t library, std::int32_t reference) {
  if (library != reference) os << "\n  " << name << ": library " << library << ", reference " << reference;
}

}  // namespace detail

// Every output field, element by element; the failure message lists the first mismatches of each field.
inline ::testing::AssertionResult same_plan(const Outputs& library, const Outputs& reference) {
  std::ostringstream diff;
  detail::diff_scalar(diff, "verify_num_valid", library.verify_num_valid, reference.verify_num_valid);
  detail::diff_scalar(diff, "enable", library.enable, reference.enable);
  detail::diff_array(diff, "verify_slot_indices", library.verify_slot_indices, reference.verify_slot_indices);
  detail::diff_array(diff, "verify_expected_tokens", library.verify_expected_tokens, reference.verify_expected_tokens);
  detail::diff_array(diff, "verify_expected_positions", library.verify_expected_positions,
                     reference.verify_expected_positions);
  detail::diff_array(diff, "verify_prev_slot_indices", library.verify_prev_slot_indices,
                     reference.verify_prev_slot_indices);
  detail::diff_array(diff, "write_offsets", library.write_offsets, reference.write_offsets);
  detail::diff_array(diff, "write_seed_slot_indices", library.write_seed_slot_indices,
                     reference.write_seed_slot_indices);
  detail::diff_scalar(diff, "write_num_valid_reqs", library.write_num_valid_reqs, reference.write_num_valid_reqs);
  detail::diff_scalar(diff, "input_error_bits", library.input_error_bits, reference.input_error_bits);
  detail::diff_scalar(diff, "first_bad_row", library.first_bad_row, reference.first_bad_row);
  // SPEC-CANARY §11.7's identity arrays, when either plan holds them.
  const auto diff_optional = [&](const char* name, const std::optional<Int64s>& l, const std::optional<Int64s>& r) {
    if (l.has_value() != r.has_value())
      diff << "\n  " << name << ": library " << (l ? "holds it" : "has none") << ", reference " << (r ? "holds it" : "has none");
    else if (l)
      detail::diff_array(diff, name, *l, *r);
  };
  diff_optional("verify_identities", library.verify_identities, reference.verify_identities);
  diff_optional("write_identities", library.write_identities, reference.write_identities);
  if (diff.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "library and reference plans differ:" << diff.str();
}

// SPEC §4 "what is written, and what is left alone", judged on a result that started fully poisoned:
// verify arrays written exactly on [0, total) when enable == 1 and not at all on overflow; seeds written
// on [0, bs) only; scalars and the whole of write_offsets always written.
inline ::testing::AssertionResult follows_write_rules(const Outputs& out, std::int64_t bs) {
  std::ostringstream problems;
  const auto scalar_written = [&](const char* name, std::int32_t value) {
    if (value == static_cast<std::int32_t>(kPoison)) problems << "\n  " << name << " was not written";
  };
  scalar_written("verify_num_valid", out.verify_num_valid);
  scalar_written("enable", out.enable);
  scalar_written("write_num_valid_reqs", out.write_num_valid_reqs);
  scalar_written("input_error_bits", out.input_error_bits);
  scalar_written("first_bad_row", out.first_bad_row);
  const auto capacity = static_cast<std::int64_t>(out.verify_slot_indices.size());
  if (out.enable != 0 && out.enable != 1) problems << "\n  enable is " << out.enable;
  if (out.enable == 0 && out.verify_num_valid != capacity)
    problems << "\n  overflow but verify_num_valid " << out.verify_num_valid << " != capacity " << capacity;
  if (out.write_num_valid_reqs != bs) problems << "\n  write_num_valid_reqs " << out.write_num_valid_reqs << " != bs " << bs;

  // Elements [0, written) must be written, [written, end) untouched.
  const auto check = [&](const char* name, const Int64s& values, std::int64_t written) {
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(values.size()); ++i) {
      const bool is_poison = values[static_cast<std::size_t>(i)] == kPoison;
      if (i < written && is_poison) {
        problems << "\n  " << name << "[" << i << "] was not written (written range [0, " << written << "))";
        return;
      }
      if (i >= written && !is_poison) {
        problems << "\n  " << name << "[" << i << "] = " << values[static_cast<std::size_t>(i)]
                 << " was written outside [0, " << written << ")";
        return;
      }
    }
  };
  const std::int64_t verify_written = out.enable == 1 ? out.verify_num_valid : 0;
  check("verify_slot_indices", out.verify_slot_indices, verify_written);
  check("verify_expected_tokens", out.verify_expected_tokens, verify_written);
  check("verify_expected_positions", out.verify_expected_positions, verify_written);
  check("verify_prev_slot_indices", out.verify_prev_slot_indices, verify_written);
  check("write_offsets", out.write_offsets, static_cast<std::int64_t>(out.write_offsets.size()));
  check("write_seed_slot_indices", out.write_seed_slot_indices, bs);
  if (problems.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "SPEC §4 written/untouched rules broken:" << problems.str();
}

// ---- fixtures ----

inline std::string algorithm_name(const ::testing::TestParamInfo<EntriesAlgorithm>& info) {
  return ::testing::PrintToString(info.param);
}

// Tests over every entries algorithm (on host backends Default and CudaPersistent take the portable path;
// on CUDA they take the persistent kernel), bound to one execution space.
template <class ExecSpace>
class PlanTest : public ::testing::TestWithParam<EntriesAlgorithm> {
 protected:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;

  PlanOptions options() const { return PlanOptions{GetParam()}; }

  // The library's plan, started from poisoned outputs; the test fails when it differs from the reference's
  // plan (started from the same outputs) or breaks the written/untouched rules.
  Outputs plan_checked(const Inputs& in, const Capacities& caps = {}) const {
    Outputs library = poisoned(caps);
    Outputs reference = poisoned(caps);
    kvcanary::reference::plan(in, reference);
    kvcanary::plan_host_data(ExecSpace(), in, library, options());
    EXPECT_TRUE(same_plan(library, reference));
    EXPECT_TRUE(follows_write_rules(library, batch_size(in)));
    return library;
  }
};

#define KVCANARY_INSTANTIATE_OVER_ALGORITHMS(Suite)                                                         \
  INSTANTIATE_TEST_SUITE_P(Entries, Suite,                                                                  \
                           ::testing::Values(EntriesAlgorithm::Default, EntriesAlgorithm::Portable,         \
                                             EntriesAlgorithm::CudaPersistent),                             \
                           algorithm_name)

// ---- the device API, for calls plan_host_data() cannot express (persistent plans, malformed shapes) ----

// Device outputs with the shapes and values of `host` (each array keeps its own extent, so malformed
// calls can be built), and a workspace for `max_batch_size` rows.
template <class ExecSpace>
struct DevicePlan {
  using memory_space = typename ExecSpace::memory_space;
  using Array = Kokkos::View<std::int64_t*, memory_space>;

  kvcanary::VerifyPlan<memory_space> verify;
  kvcanary::WritePlan<memory_space> write;
  kvcanary::PlanStatus<memory_space> status;
  kvcanary::PlanWorkspace<memory_space> workspace;

  DevicePlan(const ExecSpace& space, const Outputs& host, std::int64_t max_batch_size) {
    const auto array = [&](const std::string& label, const Int64s& values) {
      return Array(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), values.size());
    };
    verify = kvcanary::allocate_verify_plan(space, 0);
    verify.verify_slot_indices = array("test::verify_slot_indices", host.verify_slot_indices);
    verify.verify_expected_tokens = array("test::verify_expected_tokens", host.verify_expected_tokens);
    verify.verify_expected_positions = array("test::verify_expected_positions", host.verify_expected_positions);
    verify.verify_prev_slot_indices = array("test::verify_prev_slot_indices", host.verify_prev_slot_indices);
    write = kvcanary::allocate_write_plan(space, 0);
    write.write_offsets = array("test::write_offsets", host.write_offsets);
    write.write_seed_slot_indices = array("test::write_seed_slot_indices", host.write_seed_slot_indices);
    status = kvcanary::allocate_plan_status(space);
    workspace = kvcanary::allocate_plan_workspace(space, max_batch_size);
    kvcanary::upload_outputs(space, host, verify, write, status);
  }

  void plan(const ExecSpace& space, const kvcanary::PlanInputs<memory_space>& in,
            const PlanOptions& options = PlanOptions{}) const {
    kvcanary::plan(space, in, verify, write, status, workspace, options);
  }

  Outputs download(const ExecSpace& space) const {
    Outputs host;
    kvcanary::download_outputs(space, verify, write, status, host);
    return host;
  }
};

// The message of the std::invalid_argument that `call` throws, or nothing when it returns normally.
template <class Call>
std::optional<std::string> invalid_argument_message(Call&& call) {
  try {
    call();
  } catch (const std::invalid_argument& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

}  // namespace kvcanary_test

#endif
