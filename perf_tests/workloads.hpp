#ifndef KVCANARY_PERF_WORKLOADS_HPP
#define KVCANARY_PERF_WORKLOADS_HPP

// The workloads of SPEC §7, each a function of a fixed seed that builds host inputs
// (kvcanary::reference::Inputs) and the capacities of its outputs.
//
// * Lengths are uniform in the stated range; decode means extend 1.
// * req_to_token has max_reqs = bs + 1 rows (row 0 is the padding row's) and
//   max_seq_len = max prefix + max extend columns, filled with random slots.
// * The expected-token pool (unless the workload says "without pool") has the same shape, random token
//   ids, and valid_lens[r] = prefix + extend, so every verify entry reads a real token.
// * The SWA workload's LUT maps every full slot to a random SWA slot.
// * verify_capacity is the exact total (equality fits, SPEC §4), write_req_capacity = bs.

#include <kvcanary/tools/reference_plan.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kvcanary_perf {

using kvcanary::reference::Inputs;

// Small batches are launch-latency bound, large ones memory-bandwidth bound (STYLE.md: keep them apart);
// a prefill write is bound by its requests' serial hash chains (SPEC-CANARY §4).
enum class Regime { Latency, Bandwidth, Chain };

inline const char* regime_name(Regime regime) {
  return regime == Regime::Latency ? "latency" : regime == Regime::Bandwidth ? "bandwidth" : "chain";
}

struct Workload {
  std::string name;  // the second component of a benchmark name: plan/<name>/...
  Regime regime = Regime::Bandwidth;  // as the shape says
  Inputs inputs;
  std::int64_t verify_capacity = 0;
  std::int64_t write_req_capacity = 0;
  std::int64_t entries = 0;  // Σ verify_len
  std::int64_t bytes = 0;    // SPEC §7 byte count
};

// What a workload is made of, before the random draw.
struct WorkloadShape {
  std::string name;
  std::int64_t batch_size = 1;
  std::int64_t prefix_min = 0, prefix_max = 0;  // inclusive
  std::int64_t extend_min = 1, extend_max = 1;  // inclusive
  bool pool = true;
  int swa_window_size = 0;  // > 0: sliding window, with a LUT
  Regime regime = Regime::Bandwidth;
  std::uint64_t seed = 0;
};

// SPEC §7 bytes: per verify entry 4 (slot read) + 4 (pool read, with a pool) + 16 (two LUT reads, with a LUT)
// + 32 (four int64 writes); plus 24 per row.
inline std::int64_t spec_bytes(std::int64_t entries, std::int64_t batch_size, bool pool, bool lut) {
  const std::int64_t per_entry = 4 + (pool ? 4 : 0) + (lut ? 16 : 0) + 32;
  return entries * per_entry + 24 * batch_size;
}

inline Workload build_workload(const WorkloadShape& shape) {
  std::mt19937_64 rng(shape.seed);
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };

  const std::int64_t bs = shape.batch_size;
  Workload w;
  w.name = shape.name;
  Inputs& in = w.inputs;
  in.max_reqs = bs + 1;
  in.max_seq_len = shape.prefix_max + shape.extend_max;
  in.swa_window_size = shape.swa_window_size;

  // Batch row r uses a random pool row in [1, bs]: a permutation, so no two rows share one.
  in.req_pool_indices.resize(static_cast<std::size_t>(bs));
  std::iota(in.req_pool_indices.begin(), in.req_pool_indices.end(), std::int64_t{1});
  std::shuffle(in.req_pool_indices.begin(), in.req_pool_indices.end(), rng);
  in.prefix_lens.resize(static_cast<std::size_t>(bs));
  in.extend_seq_lens.resize(static_cast<std::size_t>(bs));
  for (std::int64_t r = 0; r < bs; ++r) {
    in.prefix_lens[static_cast<std::size_t>(r)] = uniform(shape.prefix_min, shape.prefix_max);
    in.extend_seq_lens[static_cast<std::size_t>(r)] = uniform(shape.extend_min, shape.extend_max);
  }

  // Random slots over a full-attention pool as large as the page table.
  const std::int64_t cells = in.max_reqs * in.max_seq_len;
  const std::int64_t full_slots = std::min<std::int64_t>(cells, INT32_MAX);
  in.req_to_token.resize(static_cast<std::size_t>(cells));
  {
    std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(full_slots - 1));
    for (auto& v : in.req_to_token) v = slot(rng);
  }

  if (shape.swa_window_size > 0) {
    // Every full slot maps to a random slot of an SWA pool holding each row's window twice over.
    const std::int64_t swa_slots = std::max<std::int64_t>(1, 2 * bs * shape.swa_window_size);
    std::uniform_int_distribution<std::int64_t> swa(0, swa_slots - 1);
    std::vector<std::int64_t> lut(static_cast<std::size_t>(full_slots));
    for (auto& v : lut) v = swa(rng);
    in.full_to_swa_index_mapping = std::move(lut);
  }

  if (shape.pool) {
    in.pool_rows = in.max_reqs;
    in.pool_cols = in.max_seq_len;
    std::uniform_int_distribution<std::int32_t> token(0, 151935);  // a typical vocabulary
    std::vector<std::int32_t> pool(static_cast<std::size_t>(cells));
    for (auto& v : pool) v = token(rng);
    in.req_to_verify_expected_tokens = std::move(pool);
    std::vector<std::int64_t> valid(static_cast<std::size_t>(bs));
    for (std::size_t r = 0; r < valid.size(); ++r) valid[r] = in.prefix_lens[r] + in.extend_seq_lens[r];
    in.req_to_verify_expected_tokens_valid_lens = std::move(valid);
  }

  // SPEC §4 verify_len of a good active row.
  for (std::int64_t r = 0; r < bs; ++r) {
    const std::int64_t prefix = in.prefix_lens[static_cast<std::size_t>(r)];
    const std::int64_t start =
        shape.swa_window_size > 0 ? std::max<std::int64_t>(0, prefix - shape.swa_window_size) : 0;
    w.entries += std::max<std::int64_t>(0, prefix - start);
  }
  w.verify_capacity = w.entries;
  w.write_req_capacity = bs;
  w.bytes = spec_bytes(w.entries, bs, shape.pool, shape.swa_window_size > 0);
  w.regime = shape.regime;
  return w;
}

// SPEC §7, in the order of the text. Seeds are fixed so every run (and every backend) sees the same data.
inline std::vector<WorkloadShape> workload_shapes() {
  constexpr std::int64_t K = 1024;
  std::vector<WorkloadShape> shapes;
  auto add = [&shapes](WorkloadShape s) {
    s.seed = 0x6b7663616e617279ULL + shapes.size();  // "kvcanary" + index
    shapes.push_back(s);
  };
  // Latency: at most ~35K entries (~1.4 MB, a third of a microsecond of H200 copy bandwidth), so the
  // launches dominate. Bandwidth: 270K to 4.7M entries.
  constexpr Regime L = Regime::Latency, B = Regime::Bandwidth;
  //   name                  bs    prefix          extend       pool   window  regime
  add({"decode_bs1",          1,    1 * K, 1 * K,   1, 1,        true,  0,      L});
  add({"decode_bs8",          8,    2 * K, 6 * K,   1, 1,        true,  0,      L});
  add({"decode_bs64",         64,   512, 8 * K,     1, 1,        true,  0,      B});
  add({"decode_bs256",        256,  4 * K, 32 * K,  1, 1,        true,  0,      B});
  add({"long_context_bs4",    4,    128 * K, 128 * K, 1, 1,      true,  0,      B});
  add({"prefill_bs32",        32,   0, 2 * K,       128, 2 * K,  true,  0,      L});
  add({"swa_bs128",           128,  8 * K, 24 * K,  1, 1,        true,  4096,   B});
  add({"decode_bs4096",       4096, 1, 256,         1, 1,        true,  0,      B});
  add({"decode_bs64_nopool",  64,   512, 8 * K,     1, 1,        false, 0,      B});
  return shapes;
}

// Latency workloads first, then bandwidth ones (STYLE.md: keep them apart); SPEC order within each.
inline std::vector<WorkloadShape> shapes_by_regime() {
  std::vector<WorkloadShape> ordered;
  for (const Regime regime : {Regime::Latency, Regime::Bandwidth})
    for (const WorkloadShape& shape : workload_shapes())
      if (shape.regime == regime) ordered.push_back(shape);
  return ordered;
}

}  // namespace kvcanary_perf

#endif
