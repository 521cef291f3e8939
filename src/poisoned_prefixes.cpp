// Poisoned prefixes, attributed (SPEC-CANARY §11.6; see poisoned_prefixes.hpp).

#include <kvcanary/impl/cross_check_rules.hpp>
#include <kvcanary/stages/poisoned_prefixes.hpp>
#include <kvcanary/stages/plan_shape_checks.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_set>

namespace kvcanary {

namespace {

std::int64_t size_of(const std::vector<std::int64_t>& values) { return static_cast<std::int64_t>(values.size()); }

void check_batch(const reference::Inputs& b) {
  constexpr const char* function = "poisoned_prefixes";
  const std::int64_t bs = size_of(b.req_pool_indices);
  if (size_of(b.prefix_lens) != bs || size_of(b.extend_seq_lens) != bs)
    Impl::throw_invalid_in(function, "prefix_lens and extend_seq_lens have ", b.prefix_lens.size(), " and ",
                           b.extend_seq_lens.size(), " entries but req_pool_indices has ", bs);
  if (b.max_reqs < 0 || b.max_seq_len < 0 || !Impl::holds(b.req_to_token.size(), b.max_reqs, b.max_seq_len))
    Impl::throw_invalid_in(function, "req_to_token holds ", b.req_to_token.size(), " values, not ", b.max_reqs, " x ",
                           b.max_seq_len);
  if (b.swa_window_size < 0) Impl::throw_invalid_in(function, "swa_window_size is ", b.swa_window_size, ", must be >= 0");
  if (b.full_to_swa_index_mapping && b.full_to_swa_index_mapping->empty())
    Impl::throw_invalid_in(function, "full_to_swa_index_mapping is empty (0 entries)");
}

}  // namespace

std::vector<PoisonedPrefix> poisoned_prefixes(const std::vector<RingRow>& rows, const reference::Inputs& batch,
                                              std::uint32_t kinds) {
  check_batch(batch);
  const std::int64_t bs = size_of(batch.req_pool_indices);
  std::unordered_set<std::int64_t> bad_slots;
  std::vector<std::int64_t> metadata_hit(static_cast<std::size_t>(bs), 0);  // 1: a metadata row names the row
  for (const RingRow& row : rows) {
    const std::int64_t kind = row[kRowKernelKind];
    if (kind < 0 || kind >= kKernelKinds || (kinds >> kind & 1u) == 0) continue;
    const std::int64_t bits = row[kRowFailReasonBits];
    if ((bits & ~std::int64_t(kOutOfRange)) == 0) continue;  // an index, not a slot
    if ((bits & kMetadataMismatch) != 0) {
      const std::int64_t r = row[kRowStoredToken];
      if (r >= 0 && r < bs) metadata_hit[static_cast<std::size_t>(r)] = 1;
      continue;
    }
    bad_slots.insert(row[kRowSlot]);
  }

  const auto at = [](const auto& values, std::int64_t i) { return values[static_cast<std::size_t>(i)]; };
  const auto slot_at = [&](std::int64_t rp, std::int64_t p) {  // req_to_token, then T of SPEC §4
    const std::int64_t slot = at(batch.req_to_token, rp * batch.max_seq_len + p);
    if (!batch.full_to_swa_index_mapping || slot < 0) return slot;
    const auto& lut = *batch.full_to_swa_index_mapping;
    return at(lut, std::min<std::int64_t>(slot, size_of(lut) - 1));
  };

  std::vector<PoisonedPrefix> out;
  for (std::int64_t r = 0; r < bs; ++r) {
    const std::int64_t rp = at(batch.req_pool_indices, r);
    const std::int64_t prefix = at(batch.prefix_lens, r);
    if (!Impl::cross_check_row(rp, prefix, batch.max_reqs, batch.max_seq_len)) continue;
    const std::int64_t end = Impl::cross_check_length(prefix, at(batch.extend_seq_lens, r), batch.max_seq_len);
    const std::int64_t start =
        batch.swa_window_size > 0 && prefix > batch.swa_window_size ? prefix - batch.swa_window_size : 0;
    std::int64_t first = metadata_hit[static_cast<std::size_t>(r)] ? prefix : std::numeric_limits<std::int64_t>::max();
    for (std::int64_t p = start; p < end && p < first; ++p)
      if (bad_slots.count(slot_at(rp, p)) != 0) first = p;
    if (first == std::numeric_limits<std::int64_t>::max()) continue;
    std::set<std::int64_t> slots;
    for (std::int64_t p = first; p < end; ++p) {
      const std::int64_t slot = slot_at(rp, p);
      if (slot > 0) slots.insert(slot);
    }
    out.push_back(PoisonedPrefix{r, rp, first, std::vector<std::int64_t>(slots.begin(), slots.end())});
  }
  return out;
}

std::string poisoned_prefixes_json(const std::vector<PoisonedPrefix>& prefixes) {
  std::string out = "{\"poisoned_prefixes\": [";
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    const PoisonedPrefix& p = prefixes[i];
    out += i == 0 ? "{" : ", {";
    out += "\"batch_row\": " + std::to_string(p.batch_row) + ", \"pool_row\": " + std::to_string(p.pool_row) +
           ", \"first_bad_position\": " + std::to_string(p.first_bad_position) + ", \"slots\": [";
    for (std::size_t s = 0; s < p.slots.size(); ++s) out += (s == 0 ? "" : ", ") + std::to_string(p.slots[s]);
    out += "]}";
  }
  return out + "]}";
}

}  // namespace kvcanary
