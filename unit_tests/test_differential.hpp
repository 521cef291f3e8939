// Randomized differential tests: the library against the host reference, from the same poisoned outputs,
// on 1000 random calls per entries algorithm. Case i uses seed kBaseSeed + i; a failure prints it, and
// KVCANARY_TEST_SEED=<seed> reruns that one case alone. KVCANARY_TEST_CASES=<n> runs only the first n
// cases (for slow tools such as compute-sanitizer; the coverage checks need the full 1000).

#include "test_random_cases.hpp"

#include <cstdlib>
#include <string>

namespace kvcanary_test {

class Differential : public PlanTest<KVCANARY_TEST_EXECSPACE> {};

constexpr std::uint64_t kBaseSeed = 0x6b7663616e617279;  // "kvcanary"
constexpr int kRandomCases = 1000;

// What the random cases covered, so that a generator change that stops reaching an edge fails loudly.
struct Coverage {
  int overflow = 0, exact_fit = 0, empty_batch = 0, large_batch = 0, loose_write_capacity = 0;
  int bad_bits[3] = {0, 0, 0};  // bits 1, 2, 4
};

TEST_P(Differential, RandomCasesMatchReference) {
  std::uint64_t first = kBaseSeed;
  int cases = kRandomCases;
  if (const char* seed = std::getenv("KVCANARY_TEST_SEED")) {
    first = std::stoull(seed);
    cases = 1;
  } else if (const char* count = std::getenv("KVCANARY_TEST_CASES")) {
    cases = std::stoi(count);
    if (cases < 1 || cases > kRandomCases) FAIL() << "KVCANARY_TEST_CASES must be in [1, " << kRandomCases << "]";
  }
  Coverage seen;
  int failed_cases = 0;
  for (int i = 0; i < cases && failed_cases < 5; ++i) {
    const std::uint64_t seed = first + static_cast<std::uint64_t>(i);
    SCOPED_TRACE("random case seed " + std::to_string(seed) + " (rerun alone with KVCANARY_TEST_SEED=" +
                 std::to_string(seed) + ")");
    const RandomCase c = CaseGenerator(seed).next();
    const std::int64_t bs = batch_size(c.inputs);
    Outputs library = poisoned(c.capacities);
    Outputs reference = poisoned(c.capacities);
    kvcanary::reference::plan(c.inputs, reference);
    kvcanary::plan_host_data(execution_space(), c.inputs, library, options());

    const ::testing::AssertionResult same = same_plan(library, reference);
    const ::testing::AssertionResult rules = follows_write_rules(library, bs);
    EXPECT_TRUE(same) << "bs " << bs << ", capacities " << c.capacities.verify << "/" << c.capacities.write;
    EXPECT_TRUE(rules);
    if (!same || !rules) ++failed_cases;

    seen.overflow += reference.enable == 0;
    seen.exact_fit += reference.enable == 1 && reference.verify_num_valid == c.capacities.verify &&
                      c.capacities.verify > 0;
    seen.empty_batch += bs == 0;
    seen.large_batch += bs > 1000;
    seen.loose_write_capacity += c.capacities.write > bs;
    for (int bit = 0; bit < 3; ++bit) seen.bad_bits[bit] += (reference.input_error_bits >> bit) & 1;
  }
  if (cases == kRandomCases) {
    EXPECT_GT(seen.overflow, 50);
    EXPECT_GT(seen.exact_fit, 50);
    EXPECT_GT(seen.empty_batch, 10);
    EXPECT_GT(seen.large_batch, 5);
    EXPECT_GT(seen.loose_write_capacity, 100);
    for (int bit = 0; bit < 3; ++bit) EXPECT_GT(seen.bad_bits[bit], 20) << "input error bit " << (1 << bit);
  }
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(Differential);

}  // namespace kvcanary_test
