// Plans one small batch (SPEC §6 "aggregate") with the installed kvcanary on the default Kokkos
// backend and checks it against the host reference. Exit 0 when they agree.
#include <kvcanary/kvcanary.hpp>
#include <kvcanary/tools/host_bridge_plan.hpp>
#include <kvcanary/tools/reference_plan.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

namespace {

bool same(const kvcanary::reference::Outputs& a, const kvcanary::reference::Outputs& b) {
  return a.verify_slot_indices == b.verify_slot_indices && a.verify_expected_tokens == b.verify_expected_tokens &&
         a.verify_expected_positions == b.verify_expected_positions &&
         a.verify_prev_slot_indices == b.verify_prev_slot_indices && a.verify_num_valid == b.verify_num_valid &&
         a.enable == b.enable && a.write_offsets == b.write_offsets &&
         a.write_seed_slot_indices == b.write_seed_slot_indices && a.write_num_valid_reqs == b.write_num_valid_reqs &&
         a.input_error_bits == b.input_error_bits && a.first_bad_row == b.first_bad_row;
}

int run() {
  // linear(4, 32): req_to_token[rp][p] = rp * 32 + p
  kvcanary::reference::Inputs inputs;
  inputs.max_reqs = 4;
  inputs.max_seq_len = 32;
  for (std::int32_t slot = 0; slot < 4 * 32; ++slot) inputs.req_to_token.push_back(slot);
  inputs.req_pool_indices = {1, 2, 3, 1};
  inputs.prefix_lens = {0, 3, 8, 15};
  inputs.extend_seq_lens = {4, 1, 1, 1};

  const std::int64_t poison = -7;  // a value no plan produces
  kvcanary::reference::Outputs expected = kvcanary::reference::make_outputs(128, 8, poison);
  kvcanary::reference::Outputs actual = expected;
  kvcanary::reference::plan(inputs, expected);
  kvcanary::plan_host_data(Kokkos::DefaultExecutionSpace(), inputs, actual);

  const std::vector<std::int64_t> seeds{-1, 66, 103, 46};  // SPEC §6
  const bool facts = actual.verify_num_valid == 26 && actual.enable == 1 &&
                     std::vector<std::int64_t>(actual.write_seed_slot_indices.begin(),
                                               actual.write_seed_slot_indices.begin() + 4) == seeds;
  const bool ok = facts && same(actual, expected);
  std::printf("kvcanary %s consumer on %s: verify_num_valid=%d write_offsets[4]=%lld -> %s\n",
              KVCANARY_VERSION_STRING, Kokkos::DefaultExecutionSpace::name(), actual.verify_num_valid,
              static_cast<long long>(actual.write_offsets[4]),
              ok ? "matches the reference" : "DIFFERS from the reference");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  Kokkos::ScopeGuard guard(argc, argv);
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvcanary consumer: %s\n", e.what());
    return 1;
  }
}
